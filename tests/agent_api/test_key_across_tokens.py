"""An Idempotency-Key is the tenant's, not the token's.

An admin rotates an agent's token (makes a new one, revokes the old) while the agent's POST
/drafts is in flight and its answer lost. The agent retried with the same key and its new token,
was refused 422 `idempotency_key_reused` (the token was part of the fingerprint), retried with a
fresh key, and the draft was created twice: a reviewer could approve it twice. The same key, the
same method, path and body from another token of the tenant is now the same request, replayed if
that token may see what the stored answer shows, and otherwise refused without showing it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agent_api.idempotency import fingerprint, token_credential
from agent_api.mcp_tools import call_tool
from intents.models import ApiIdempotencyKey, Draft
from tenants.models import AgentToken
from tenants.tokens import token_authenticate, token_revoke
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db

REVISION = {"to": ["customer@example.com"], "subject": "v2", "text": "The second text."}


def revoke(raw_token: str) -> None:
    token = token_authenticate(raw_token)
    token_revoke(tenant=token.tenant, token_id=token.pk, actor=None)


def test_a_rotated_token_replays_the_answer_the_revoked_one_got(
    api, make_token, tenant_a, mailbox_a
):
    old = make_token(tenant_a)
    first = api.post("/drafts", draft_body(mailbox_a), token=old, key="lost-answer")
    new = make_token(tenant_a)
    revoke(old)

    retried = api.post("/drafts", draft_body(mailbox_a), token=new, key="lost-answer")

    assert first.status_code == 201
    assert api.post("/drafts", draft_body(mailbox_a), token=old, key="lost-answer").status_code == (
        401
    )
    assert retried.status_code == 201
    assert retried["Idempotent-Replayed"] == "true"
    assert retried.content == first.content
    assert retried["Location"] == first["Location"]
    assert Draft.objects.count() == 1


def test_revisions_and_withdrawals_replay_to_another_token_that_reaches_the_draft(
    api, make_token, tenant_a, mailbox_a
):
    old = make_token(tenant_a)
    new = make_token(tenant_a, mailboxes=(mailbox_a,))
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=old, key="d").json()["id"]
    revised = api.post(f"/drafts/{draft_id}/versions", REVISION, token=old, key="v")
    withdrawn = api.post(f"/drafts/{draft_id}/withdraw", token=old, key="w")

    revised_again = api.post(f"/drafts/{draft_id}/versions", REVISION, token=new, key="v")
    withdrawn_again = api.post(f"/drafts/{draft_id}/withdraw", token=new, key="w")

    assert (revised_again.status_code, revised_again.content) == (201, revised.content)
    assert (withdrawn_again.status_code, withdrawn_again.content) == (200, withdrawn.content)
    assert revised_again["Idempotent-Replayed"] == withdrawn_again["Idempotent-Replayed"] == "true"
    assert Draft.objects.get().versions.count() == 2


def test_a_token_that_may_not_see_the_answer_is_refused_without_it(
    api, make_token, tenant_a, mailbox_a, mailbox_a2
):
    first_token = make_token(tenant_a)
    narrower = make_token(tenant_a, mailboxes=(mailbox_a2,))
    first = api.post("/drafts", draft_body(mailbox_a), token=first_token, key="theirs")

    refused = api.post("/drafts", draft_body(mailbox_a), token=narrower, key="theirs")
    live = api.post("/drafts", draft_body(mailbox_a), token=narrower, key="a-fresh-key")

    assert refused.status_code == 422
    assert "Idempotent-Replayed" not in refused
    assert "Location" not in refused
    problem = refused.json()
    assert problem["code"] == "idempotency_key_reused"
    assert "another agent token of this tenant" in problem["detail"]
    assert "may not see" in problem["detail"]
    assert str(first.json()["id"]) not in refused.content.decode()
    assert first.json()["current_version"]["content_hash"] not in refused.content.decode()
    assert problem["errors"] == [
        {
            "field": "Idempotency-Key",
            "message": "used by another token for a request it may not see",
        }
    ]
    # What the same request with a new key gets: nothing more.
    assert live.status_code == 404
    assert live.json()["code"] == "mailbox_not_found"
    assert Draft.objects.count() == 1


def test_a_withdrawal_by_a_token_that_may_not_reach_the_draft_is_refused(
    api, make_token, tenant_a, mailbox_a, mailbox_a2
):
    first_token = make_token(tenant_a)
    narrower = make_token(tenant_a, mailboxes=(mailbox_a2,))
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=first_token, key="d").json()["id"]
    api.post(f"/drafts/{draft_id}/withdraw", token=first_token, key="w")

    refused = api.post(f"/drafts/{draft_id}/withdraw", token=narrower, key="w")

    assert refused.status_code == 422
    assert refused.json()["code"] == "idempotency_key_reused"
    assert "may not see" in refused.json()["detail"]
    assert b"shipped" not in refused.content


def test_a_token_without_the_routes_scope_is_refused_before_the_key(
    api, make_token, tenant_a, mailbox_a
):
    first_token = make_token(tenant_a)
    reader = make_token(tenant_a, scopes=("drafts:read",))
    api.post("/drafts", draft_body(mailbox_a), token=first_token, key="k")

    refused = api.post("/drafts", draft_body(mailbox_a), token=reader, key="k")

    assert refused.status_code == 403
    assert refused.json()["code"] == "insufficient_scope"
    assert "Idempotent-Replayed" not in refused


def test_another_token_with_another_body_is_422_as_ever(api, make_token, tenant_a, mailbox_a):
    first_token = make_token(tenant_a)
    second_token = make_token(tenant_a)
    api.post("/drafts", draft_body(mailbox_a), token=first_token, key="k")

    other = api.post(
        "/drafts", draft_body(mailbox_a, subject="Something else"), token=second_token, key="k"
    )

    assert other.status_code == 422
    assert other.json()["code"] == "idempotency_key_reused"
    assert "may not see" not in other.json()["detail"]
    assert Draft.objects.count() == 1


def test_another_tenants_token_with_the_same_key_and_body_makes_its_own_draft(
    api, make_token, tenant_a, tenant_b, mailbox_a, mailbox_b
):
    a = api.post("/drafts", draft_body(mailbox_a), token=make_token(tenant_a), key="k")
    # The same body word for word, naming tenant A's mailbox: not found, not replayed.
    same_body = api.post("/drafts", draft_body(mailbox_a), token=make_token(tenant_b), key="k")
    own = api.post("/drafts", draft_body(mailbox_b), token=make_token(tenant_b), key="k")

    assert a.status_code == 201
    assert same_body.status_code == 404
    assert same_body.json()["code"] == "mailbox_not_found"
    assert own.status_code == 201
    assert "Idempotent-Replayed" not in own
    assert own.json()["id"] != a.json()["id"]
    assert Draft.objects.filter(tenant=tenant_b).count() == 1


def test_a_key_in_flight_for_one_token_is_409_for_another(api, make_token, tenant_a, mailbox_a):
    first_token = make_token(tenant_a)
    second_token = make_token(tenant_a)
    api.post("/drafts", draft_body(mailbox_a), token=first_token, key="busy")
    ApiIdempotencyKey.objects.filter(key="busy").update(
        state="in_flight", locked_until=timezone.now() + timedelta(seconds=30)
    )

    response = api.post("/drafts", draft_body(mailbox_a), token=second_token, key="busy")

    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_key_in_flight"
    assert Draft.objects.count() == 1


def test_a_key_stored_before_the_change_still_replays_to_its_own_token(api, token_a, mailbox_a):
    """A row written before keys were the tenant's holds a fingerprint that includes its token,
    and no token: the same token's retry is still the same request."""
    first = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="old-row")
    token = token_authenticate(token_a)
    ApiIdempotencyKey.objects.filter(key="old-row").update(
        token=None,
        fingerprint=fingerprint(
            credential=token_credential(token),
            method="POST",
            path="/api/v1/drafts",
            data=draft_body(mailbox_a),
        ),
    )

    retried = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="old-row")

    assert retried.status_code == 201
    assert retried["Idempotent-Replayed"] == "true"
    assert retried.content == first.content
    assert Draft.objects.count() == 1


def test_mcp_create_draft_follows_the_same_rule(make_token, tenant_a, mailbox_a, mailbox_a2):
    old = make_token(tenant_a)
    new = make_token(tenant_a)
    narrower = make_token(tenant_a, mailboxes=(mailbox_a2,))
    arguments = {**draft_body(mailbox_a), "idempotency_key": "mcp-lost"}
    first = call_tool(raw_token=old, name="create_draft", arguments=arguments)
    revoke(old)

    replayed = call_tool(raw_token=new, name="create_draft", arguments=arguments)
    refused = call_tool(raw_token=narrower, name="create_draft", arguments=arguments)

    assert not first.is_error
    assert replayed.replayed and replayed.document == first.document
    assert refused.is_error and not refused.replayed
    assert refused.document["code"] == "idempotency_key_reused"
    assert "may not see" in refused.document["detail"]
    assert refused.document["errors"][0]["field"] == "idempotency_key"
    assert Draft.objects.count() == 1


def test_mcp_calls_without_a_key_stay_each_tokens_own(make_token, tenant_a, mailbox_a):
    """The key a call without one derives is still the token's: two agents that post the same
    words without a key post two drafts, as before."""
    first = call_tool(
        raw_token=make_token(tenant_a), name="create_draft", arguments=draft_body(mailbox_a)
    )
    second = call_tool(
        raw_token=make_token(tenant_a), name="create_draft", arguments=draft_body(mailbox_a)
    )

    assert not first.is_error and not second.is_error
    assert not second.replayed
    assert first.document["id"] != second.document["id"]
    assert AgentToken.objects.filter(tenant=tenant_a).count() == 2


def test_a_key_whose_request_died_is_taken_over_by_the_new_token(
    api, make_token, tenant_a, mailbox_a
):
    old = make_token(tenant_a)
    new = make_token(tenant_a)
    # What the old token's request leaves when its process dies mid-work: its draft rolled
    # back, its claim in flight with the lock run out.
    ApiIdempotencyKey.objects.create(
        tenant=tenant_a,
        token=token_authenticate(old),
        key="died",
        fingerprint=fingerprint(method="POST", path="/api/v1/drafts", data=draft_body(mailbox_a)),
        method="POST",
        path="/api/v1/drafts",
        state="in_flight",
        locked_until=timezone.now() - timedelta(seconds=1),
    )
    revoke(old)

    retried = api.post("/drafts", draft_body(mailbox_a), token=new, key="died")

    assert retried.status_code == 201
    assert "Idempotent-Replayed" not in retried
    assert ApiIdempotencyKey.objects.get(key="died").token == token_authenticate(new)
    assert Draft.objects.get().pk == retried.json()["id"]
