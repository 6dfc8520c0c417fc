"""Idempotency-Key on the agent API (IETF draft semantics, Postgres-backed)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from agent_api.idempotency import request_fingerprints
from intents.models import ApiIdempotencyKey, Draft, DraftVersion
from intents.retention import api_idempotency_purge
from tenants.models import AgentToken
from tests.agent_api.conftest import Api, draft_body


@pytest.mark.django_db
def test_missing_key_on_post_drafts_is_400_and_writes_nothing(api, token_a, mailbox_a):
    response = api.post("/drafts", draft_body(mailbox_a), token=token_a)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "idempotency_key_missing"
    assert response.json()["errors"] == [{"field": "Idempotency-Key", "message": "required"}]
    assert Draft.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "has space", "semi;colon", "ü-umlaut", "k" * 256, '"a"b"'])
def test_malformed_key_is_400_and_writes_nothing(api, token_a, mailbox_a, key):
    response = api.post("/drafts", draft_body(mailbox_a), token=token_a, key=key)

    assert response.status_code == 400
    assert response.json()["code"] == "idempotency_key_invalid"
    assert Draft.objects.count() == 0
    assert ApiIdempotencyKey.objects.count() == 0


@pytest.mark.django_db
def test_longest_valid_key_and_the_rfc8941_quoted_form_are_accepted(api, token_a, mailbox_a):
    longest = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="A._~-" * 51)
    quoted = api.post(
        "/drafts", draft_body(mailbox_a, subject="other"), token=token_a, key='"uuid-like.1"'
    )

    assert longest.status_code == 201
    assert quoted.status_code == 201
    assert ApiIdempotencyKey.objects.filter(key="uuid-like.1").count() == 1


@pytest.mark.django_db
def test_replay_returns_byte_identical_body_with_the_replay_header(api, token_a, mailbox_a):
    first = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="replay-1")
    # Same request, keys in another order and other whitespace: the same canonical body.
    reordered = '{"text": "It shipped yesterday.", "subject": "Re: Where is my order?",' + (
        f'"to":["customer@example.com"],   "mailbox": "{mailbox_a.address}"}}'
    )
    second = api.post("/drafts", raw=reordered, token=token_a, key="replay-1")

    assert first.status_code == 201
    assert "Idempotent-Replayed" not in first
    assert second.status_code == 201
    assert second["Idempotent-Replayed"] == "true"
    assert second.content == first.content
    assert second["Location"] == first["Location"] == f"/api/v1/drafts/{Draft.objects.get().pk}"


@pytest.mark.django_db
def test_same_key_different_body_is_422_and_writes_nothing(api, token_a, mailbox_a):
    api.post("/drafts", draft_body(mailbox_a), token=token_a, key="reuse-1")

    response = api.post(
        "/drafts", draft_body(mailbox_a, subject="Something else"), token=token_a, key="reuse-1"
    )

    assert response.status_code == 422
    assert response.json()["code"] == "idempotency_key_reused"
    assert response.json()["title"] == "Idempotency-Key is already used"
    assert Draft.objects.count() == 1


@pytest.mark.django_db
def test_same_key_on_another_route_is_422(api, token_a, mailbox_a):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="route-1").json()["id"]

    response = api.post(f"/drafts/{draft_id}/withdraw", token=token_a, key="route-1")

    assert response.status_code == 422
    assert Draft.objects.get().status == "pending"


@pytest.mark.django_db
def test_keys_are_scoped_per_tenant(api, token_a, token_b, mailbox_a, mailbox_b):
    a = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="shared-key")
    b = api.post("/drafts", draft_body(mailbox_b), token=token_b, key="shared-key")

    assert a.status_code == 201
    assert b.status_code == 201
    assert "Idempotent-Replayed" not in b
    assert a.json()["id"] != b.json()["id"]
    assert Draft.objects.filter(tenant=mailbox_a.tenant).count() == 1
    assert Draft.objects.filter(tenant=mailbox_b.tenant).count() == 1


@pytest.mark.django_db
def test_a_refused_request_does_not_consume_its_key(api, token_a, mailbox_a):
    invalid = api.post(
        "/drafts", draft_body(mailbox_a, to=["not-an-address"]), token=token_a, key="fix-me"
    )
    unknown_mailbox = api.post(
        "/drafts", draft_body(mailbox_a, mailbox="nobody@nowhere.test"), token=token_a, key="fix-me"
    )
    unauthenticated = api.post("/drafts", draft_body(mailbox_a), token="cs_bad", key="fix-me")
    fixed = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="fix-me")

    assert [invalid.status_code, unknown_mailbox.status_code, unauthenticated.status_code] == [
        422,
        404,
        401,
    ]
    assert fixed.status_code == 201
    assert "Idempotent-Replayed" not in fixed
    assert Draft.objects.count() == 1


@pytest.mark.django_db
def test_in_flight_key_is_409_with_retry_after(api, token_a, mailbox_a):
    body = draft_body(mailbox_a)
    first = api.post("/drafts", body, token=token_a, key="busy")
    # Put the key back in flight, as if its first request were still running.
    ApiIdempotencyKey.objects.filter(key="busy").update(
        state="in_flight", locked_until=timezone.now() + timedelta(seconds=30)
    )

    response = api.post("/drafts", body, token=token_a, key="busy")

    assert first.status_code == 201
    assert response.status_code == 409
    assert response["Retry-After"] == "1"
    assert response.json()["code"] == "idempotency_key_in_flight"
    assert Draft.objects.count() == 1


@pytest.mark.django_db
def test_a_crashed_in_flight_key_is_free_after_locked_until(api, token_a, mailbox_a, rf):
    body = draft_body(mailbox_a)
    # What a request leaves behind when its process dies mid-work: its draft rolled back, its
    # claim in flight, and the claim's lock now in the past.
    same_request = rf.post("/api/v1/drafts", data=body, content_type="application/json")
    ApiIdempotencyKey.objects.create(
        tenant=mailbox_a.tenant,
        key="crashed",
        token=AgentToken.objects.get(prefix=token_a.split("_")[1]),
        fingerprint=request_fingerprints(same_request, credential="").stored,
        method="POST",
        path="/api/v1/drafts",
        state="in_flight",
        locked_until=timezone.now() - timedelta(seconds=1),
    )

    retry = api.post("/drafts", body, token=token_a, key="crashed")
    replay = api.post("/drafts", body, token=token_a, key="crashed")

    assert retry.status_code == 201
    assert "Idempotent-Replayed" not in retry
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.content == retry.content
    assert Draft.objects.count() == 1


@pytest.mark.django_db
def test_versions_and_withdraw_replay_too(api, token_a, mailbox_a):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="d").json()["id"]
    revision = {"to": ["customer@example.com"], "subject": "v2", "text": "second"}

    v1 = api.post(f"/drafts/{draft_id}/versions", revision, token=token_a, key="v-key")
    v2 = api.post(f"/drafts/{draft_id}/versions", revision, token=token_a, key="v-key")
    w1 = api.post(f"/drafts/{draft_id}/withdraw", token=token_a, key="w-key")
    w2 = api.post(f"/drafts/{draft_id}/withdraw", token=token_a, key="w-key")

    assert (v1.status_code, v2.status_code) == (201, 201)
    assert v2.content == v1.content
    assert v2["Idempotent-Replayed"] == "true"
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 2
    assert (w1.status_code, w2.status_code) == (200, 200)
    assert w2.content == w1.content


@pytest.mark.django_db
def test_purge_forgets_keys_after_retention(api, token_a, mailbox_a):
    api.post("/drafts", draft_body(mailbox_a), token=token_a, key="old")
    api.post("/drafts", draft_body(mailbox_a, subject="new"), token=token_a, key="new")
    ApiIdempotencyKey.objects.filter(key="old").update(
        created_at=timezone.now() - timedelta(hours=24, minutes=2),
        completed_at=timezone.now() - timedelta(hours=24, minutes=1),
    )

    deleted = api_idempotency_purge()
    reused = api.post("/drafts", draft_body(mailbox_a, subject="again"), token=token_a, key="old")

    assert deleted == 1
    assert sorted(ApiIdempotencyKey.objects.values_list("key", flat=True)) == ["new", "old"]
    assert reused.status_code == 201
    assert "Idempotent-Replayed" not in reused


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_with_one_key_create_one_draft(token_a, mailbox_a):
    """Eight threads, each with its own database connection, post the same request at once."""
    threads_count = 8
    barrier = threading.Barrier(threads_count)
    results = []
    lock = threading.Lock()

    def post():
        try:
            barrier.wait()
            response = Api(Client()).post(
                "/drafts", draft_body(mailbox_a), token=token_a, key="race-1"
            )
            with lock:
                results.append(
                    (response.status_code, response.get("Idempotent-Replayed"), response.content)
                )
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    kinds = [(status, replayed) for status, replayed, _ in results]
    first_body = next(c for status, replayed, c in results if (status, replayed) == (201, None))
    assert len(results) == threads_count
    assert kinds.count((201, None)) == 1
    assert set(kinds) <= {(201, None), (201, "true"), (409, None)}
    assert all(content == first_body for status, _, content in results if status == 201)
    assert Draft.objects.count() == 1
    assert ApiIdempotencyKey.objects.get(key="race-1").state == "completed"


@pytest.mark.django_db
def test_the_sweep_purges_expired_keys(api, token_a, mailbox_a):
    from intents import tasks

    api.post("/drafts", draft_body(mailbox_a), token=token_a, key="sweep-old")
    ApiIdempotencyKey.objects.filter(key="sweep-old").update(
        created_at=timezone.now() - timedelta(hours=25),
        completed_at=timezone.now() - timedelta(hours=25),
    )

    report = tasks.sweep_once()

    assert report["idempotency_keys_purged"] == 1
    assert ApiIdempotencyKey.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_key_in_flight_is_named_as_the_entry_point_names_it(tenant_a):
    """An MCP tool's call whose key another call still held was told to retry 'with the same
    Idempotency-Key', the JSON API's header, which no tool takes (the reused-key refusal named
    the argument already)."""
    from agent_api.errors import ApiProblem
    from agent_api.idempotency import Fingerprints, run_once
    from agent_api.mcp_tools import KEY_NAME

    said = {}

    def again() -> tuple[int, bytes]:
        try:
            run_once(**call, work=lambda: (200, b"{}"), authorize=lambda: None, name=KEY_NAME)
        except ApiProblem as problem:
            said.update(code=problem.code, detail=problem.detail, title=problem.title)
        return 200, b"{}"

    call = dict(
        tenant=tenant_a,
        token=None,
        key="k-1",
        fingerprints=Fingerprints(stored="f", with_token="f"),
        method="TOOL",
        path="create_draft",
    )
    run_once(**call, work=again, authorize=lambda: None, name=KEY_NAME)

    assert said["code"] == "idempotency_key_in_flight"
    assert "idempotency_key" in said["detail"] and "idempotency_key" in said["title"]
    assert "Idempotency-Key" not in said["detail"] + said["title"]
