"""Who may call the agent API: bearer tokens only, live ones, with the right scope, within rate."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connections, transaction
from django.test import Client
from django.utils import timezone

from agent_api.mcp_tools import call_tool
from config.clock import db_now
from intents import tasks
from intents.models import ApiIdempotencyKey, ApiRateWindow, Draft
from tenants.models import AgentToken
from tenants.tokens import token_revoke
from tests.agent_api.conftest import Api, draft_body
from tests.intents.helpers import blocked_on_a_lock, run_concurrently

pytestmark = pytest.mark.django_db


def _unauthenticated(response):
    return (
        response.status_code,
        response["Content-Type"],
        response.json()["code"],
        response["WWW-Authenticate"],
    )


UNAUTHENTICATED = (401, "application/problem+json", "unauthenticated", 'Bearer realm="countersign"')


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Bearer cs_nope",
        "Bearer cs_AAAAAAAA_" + "x" * 43,
        "Token cs_AAAAAAAA_" + "x" * 43,
    ],
)
def test_missing_or_unknown_credentials_are_401(api, mailbox_a, authorization):
    headers = {"Authorization": authorization} if authorization is not None else {}

    read = api.get("/drafts", token=None, headers=headers)
    write = api.post("/drafts", draft_body(mailbox_a), token=None, key="k", headers=headers)

    assert _unauthenticated(read) == UNAUTHENTICATED
    assert _unauthenticated(write) == UNAUTHENTICATED
    assert Draft.objects.count() == 0
    assert ApiIdempotencyKey.objects.count() == 0


def test_wrong_secret_for_a_real_prefix_is_401(api, token_a, mailbox_a):
    prefix = token_a.split("_")[1]
    forged = f"cs_{prefix}_" + "A" * 43

    response = api.get("/drafts", token=forged)

    assert _unauthenticated(response) == UNAUTHENTICATED


def test_session_cookie_without_token_is_401(api, signed_in, member_of, tenant_a, mailbox_a):
    admin = member_of(tenant_a, "admin").user
    signed_in(admin)

    read = api.get("/mailboxes", token=None)
    write = api.post("/drafts", draft_body(mailbox_a), token=None, key="cookie")

    assert read.status_code == 401
    assert write.status_code == 401
    assert Draft.objects.count() == 0


def test_revoked_token_is_401_at_once(api, token_a, tenant_a, mailbox_a):
    before = api.get("/mailboxes", token=token_a)
    token = AgentToken.objects.get(prefix=token_a.split("_")[1])
    token_revoke(tenant=tenant_a, token_id=token.pk, actor=None)

    after = api.get("/mailboxes", token=token_a)
    write = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="revoked")

    assert before.status_code == 200
    assert _unauthenticated(after) == UNAUTHENTICATED
    assert write.status_code == 401
    assert Draft.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_token_revoked_while_its_request_is_in_flight_is_401_and_nothing_is_written(
    api, token_a, tenant_a, mailbox_a
):
    """Found by an outside probe: the request authenticated with the live token, the admin's
    revocation committed, and the request still wrote its draft (201)."""
    token = AgentToken.objects.get(prefix=token_a.split("_")[1])
    # Used a moment ago: authentication does not write the row (which would wait right there).
    AgentToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    answers: list = []

    def agent_posts() -> None:
        try:
            answers.append(api.post("/drafts", draft_body(mailbox_a), token=token_a, key="k-1"))
        finally:
            connections.close_all()

    with transaction.atomic():
        token_revoke(tenant=tenant_a, token_id=token.pk, actor=None)
        agent = threading.Thread(target=agent_posts)
        agent.start()
        assert blocked_on_a_lock(), "the request's write did not wait for the revocation"
    agent.join(30)

    [answer] = answers
    assert (answer.status_code, answer.json()["code"]) == (401, "token_revoked")
    assert not Draft.objects.exists()
    assert not ApiIdempotencyKey.objects.exists()  # released with the refusal


def test_expired_token_is_401(api, make_token, tenant_a, mailbox_a):
    token = make_token(tenant_a, expires_at=timezone.now() + timedelta(hours=1))
    before = api.get("/mailboxes", token=token)

    AgentToken.objects.update(expires_at=db_now() - timedelta(seconds=1))
    after = api.get("/mailboxes", token=token)

    assert before.status_code == 200
    assert after.status_code == 401


# The expiry is the database's clock's call, as a write's recheck (token_standing) makes it: a
# request authenticated on the web host's clock let an expired token read for as long as that
# host lagged, and refused a live one on a host ahead.
SKEW = timedelta(minutes=10)


def test_a_token_expired_by_the_database_clock_is_refused_on_a_host_behind(
    api, make_token, tenant_a, mailbox_a
):
    token = make_token(tenant_a, expires_at=db_now() + timedelta(hours=1))
    AgentToken.objects.update(expires_at=db_now() - timedelta(seconds=1))

    with time_machine.travel(datetime.now(UTC) - SKEW):
        response = api.get("/mailboxes", token=token)

    assert response.status_code == 401


def test_a_live_token_is_let_in_on_a_host_ahead(api, make_token, tenant_a, mailbox_a):
    token = make_token(tenant_a, expires_at=db_now() + timedelta(minutes=1))

    with time_machine.travel(datetime.now(UTC) + SKEW):
        response = api.get("/mailboxes", token=token)

    assert response.status_code == 200


def test_missing_scope_is_403(api, make_token, tenant_a, mailbox_a):
    read_only = make_token(tenant_a, scopes=["drafts:read"])
    write_only = make_token(tenant_a, scopes=["drafts:write"])

    post = api.post("/drafts", draft_body(mailbox_a), token=read_only, key="scope")
    get = api.get("/drafts", token=write_only)
    allowed = api.get("/drafts", token=read_only)

    assert post.status_code == 403
    assert post.json()["code"] == "insufficient_scope"
    assert 'scope="drafts:write"' in post["WWW-Authenticate"]
    assert get.status_code == 403
    assert allowed.status_code == 200
    assert Draft.objects.count() == 0
    assert ApiIdempotencyKey.objects.count() == 0


def test_suspended_tenant_is_403(api, token_a, tenant_a, mailbox_a):
    tenant_a.status = "suspended"
    tenant_a.save(update_fields=["status"])

    response = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="susp")

    assert response.status_code == 403
    assert response.json()["code"] == "tenant_suspended"
    assert Draft.objects.count() == 0


def test_rate_limit_is_429_with_retry_after(api, token_a, token_b, settings):
    settings.API_RATE_LIMIT_PER_MINUTE = 3

    allowed = [api.get("/mailboxes", token=token_a).status_code for _ in range(3)]
    limited = api.get("/mailboxes", token=token_a)
    other_token = api.get("/mailboxes", token=token_b)

    assert allowed == [200, 200, 200]
    assert limited.status_code == 429
    assert limited.json()["code"] == "rate_limited"
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert other_token.status_code == 200


def test_a_rate_limited_mcp_tool_call_says_how_long_to_wait(settings, token_a):
    """The JSON API's 429 carries Retry-After; a tool result has no headers, and the wait was
    only in the words of `detail` (the MCP tools in-process: no server needed for this)."""
    settings.API_RATE_LIMIT_PER_MINUTE = 1

    first = call_tool(raw_token=token_a, name="list_mailboxes", arguments={})
    limited = call_tool(raw_token=token_a, name="list_mailboxes", arguments={})

    assert (first.is_error, limited.is_error) == (False, True)
    assert limited.document["code"] == "rate_limited"
    assert 1 <= limited.document["retry_after"] <= 60


def test_last_used_is_recorded_at_most_once_a_minute(api, token_a):
    token = AgentToken.objects.get(prefix=token_a.split("_")[1])
    start = timezone.now()

    with time_machine.travel(start, tick=False):
        api.get("/mailboxes", token=token_a)
        first = AgentToken.objects.get(pk=token.pk).last_used_at
    with time_machine.travel(start + timedelta(seconds=30), tick=False):
        api.get("/mailboxes", token=token_a)
        unchanged = AgentToken.objects.get(pk=token.pk).last_used_at
    with time_machine.travel(start + timedelta(seconds=61), tick=False):
        api.get("/mailboxes", token=token_a)
        later = AgentToken.objects.get(pk=token.pk).last_used_at

    assert first is not None
    assert unchanged == first
    assert later > first


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_cannot_overrun_the_rate_limit(token_a, settings):
    """Thirty requests released together with a budget of five: exactly five pass. The cache's
    read-then-write increment let all thirty through."""
    settings.API_RATE_LIMIT_PER_MINUTE = 5

    def call(_):
        return Api(Client()).get("/mailboxes", token=token_a).status_code

    codes = run_concurrently(call, 30)

    assert sorted(codes) == [200] * 5 + [429] * 25
    assert ApiRateWindow.objects.get().count == 30


def test_past_rate_windows_are_purged_by_the_sweep(api, token_a):
    api.get("/mailboxes", token=token_a)
    ApiRateWindow.objects.update(window_start=timezone.now() - timedelta(minutes=3))
    api.get("/mailboxes", token=token_a)

    report = tasks.sweep_once()

    assert report["api_rate_windows_purged"] == 1
    assert list(ApiRateWindow.objects.values_list("count", flat=True)) == [1]
