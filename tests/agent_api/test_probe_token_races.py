"""An outsider's probe of agent tokens while their requests are in flight: the tenant suspended,
the token revoked or expiring, a replay after revocation, a removed creator, concurrent
creations and revocations. Real concurrent requests, each thread on its own connection."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.db.models.functions import Now
from django.utils import timezone

from intents import errors, services
from intents.models import ApiIdempotencyKey, Draft
from mailboxes.models import Mailbox
from tenants.models import AgentToken, AuditEvent, Membership, Tenant
from tenants.onboarding import tenant_suspend
from tenants.services import member_deactivate
from tenants.tokens import token_create, token_revoke
from tests.agent_api.conftest import draft_body
from tests.intents.helpers import blocked_on_a_lock, run_concurrently, until_done_or_waiting

pytestmark = pytest.mark.django_db


def _row(plaintext: str) -> AgentToken:
    return AgentToken.objects.get(prefix=plaintext.split("_")[1])


def _in_thread(fn, outcome: list) -> threading.Thread:
    def run() -> None:
        try:
            outcome.append(fn())
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _agent_draft(tenant, mailbox, token):
    """The agent's draft, or the refusal it got."""
    try:
        return services.draft_create(
            tenant=tenant,
            mailbox=mailbox,
            to=["customer@example.com"],
            subject="Hi",
            text="x",
            agent_token=token,
        )
    except errors.DraftError as exc:
        return exc


@pytest.mark.django_db(transaction=True)
def test_a_tenant_suspended_while_a_draft_post_waits_gets_no_draft_after_its_suspension(
    api, token_a, tenant_a, mailbox_a
):
    """Found by this probe: the tenant was read active outside the writing transaction; the
    request then waited (here on the mailbox's row, which an admin saving its assignment holds,
    and which auto-assignment locks), the suspension committed meanwhile, and the draft was
    written into the suspended tenant (201). Now the write holds the tenant's row from its
    check to its commit, so the suspension waits for it (or the write sees the suspension)."""
    Mailbox.objects.filter(pk=mailbox_a.pk).update(auto_assign=True)
    AgentToken.objects.filter(pk=_row(token_a).pk).update(last_used_at=timezone.now())
    answers: list = []
    suspended: list = []

    with transaction.atomic():
        Mailbox.objects.select_for_update().filter(pk=mailbox_a.pk).values_list("pk").first()
        agent = _in_thread(
            lambda: api.post("/drafts", draft_body(mailbox_a), token=token_a, key="s-1"), answers
        )
        assert blocked_on_a_lock(), "the request did not reach the mailbox's lock"
        operator = _in_thread(
            lambda: tenant_suspend(slug=tenant_a.slug, reason="Unpaid invoices"), suspended
        )
        until_done_or_waiting(operator, waiters=2)
        suspended_first = not operator.is_alive()
    agent.join(30)
    operator.join(30)

    [answer] = answers
    # Either the suspension waited for the write already under way, or the write saw it; never
    # a suspension committed first and a draft written after it.
    assert (suspended_first, answer.status_code) in {(False, 201), (True, 403)}
    assert Draft.objects.filter(tenant=tenant_a).count() == (0 if suspended_first else 1)


@pytest.mark.django_db(transaction=True)
def test_an_agent_write_waits_for_a_running_suspension_and_is_refused(token_a, tenant_a, mailbox_a):
    """The other order: the suspension holds the tenant's row, uncommitted, when the write
    starts. The write's draft used to wait only at its insert (the foreign key) and then went
    in after the suspension committed."""
    token = _row(token_a)
    outcome: list = []

    with transaction.atomic():
        tenant_suspend(slug=tenant_a.slug, reason="Unpaid invoices")
        agent = _in_thread(lambda: _agent_draft(tenant_a, mailbox_a, token), outcome)
        assert blocked_on_a_lock(), "the write did not wait for the suspension in flight"
    agent.join(30)

    assert [type(r) for r in outcome] == [errors.TenantInactive]
    assert not Draft.objects.exists()


def _until_database_clock_passes(instant) -> None:
    with connection.cursor() as cursor:
        for _poll in range(500):
            cursor.execute("SELECT clock_timestamp() > %s", [instant])
            if cursor.fetchone()[0]:
                return
            time.sleep(0.02)
    raise AssertionError("the database clock did not pass the instant")


@pytest.mark.django_db(transaction=True)
def test_a_token_that_expires_while_its_write_waits_is_refused(token_a, tenant_a, mailbox_a):
    """Found by this probe: the write's check compared the expiry with the start of its
    statement, which then waited (here for the tenant's row, which an operator's change holds):
    the token expired during the wait and the draft was still written."""
    AgentToken.objects.filter(pk=_row(token_a).pk).update(expires_at=Now() + timedelta(seconds=1))
    token = _row(token_a)
    outcome: list = []

    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=tenant_a.pk).values_list("pk").first()
        agent = _in_thread(lambda: _agent_draft(tenant_a, mailbox_a, token), outcome)
        assert blocked_on_a_lock(), "the write did not wait for the tenant's row"
        _until_database_clock_passes(token.expires_at)
    agent.join(30)

    assert [type(r) for r in outcome] == [errors.TokenRevoked]
    assert not Draft.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_token_revoked_while_its_authentication_records_its_use_is_refused_and_not_marked_used(
    api, token_a, tenant_a
):
    """Found by this probe: authentication read the live row, then its last_used_at UPDATE
    waited for a revocation in flight and wrote anyway. The request was answered 200 after the
    revocation committed, and the console showed the token used after it was revoked."""
    token = _row(token_a)
    assert token.last_used_at is None
    answers: list = []

    with transaction.atomic():
        token_revoke(tenant=tenant_a, token_id=token.pk, actor=None)
        agent = _in_thread(lambda: api.get("/mailboxes", token=token_a), answers)
        assert blocked_on_a_lock(), "authentication did not wait for the revocation"
    agent.join(30)

    [answer] = answers
    token.refresh_from_db()
    assert (answer.status_code, token.last_used_at) == (401, None)
    assert token.revoked_at is not None


def test_a_replay_of_a_request_made_before_revocation_is_refused_and_shows_nothing(
    api, token_a, tenant_a, mailbox_a
):
    first = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="before-revoke")
    token_revoke(tenant=tenant_a, token_id=_row(token_a).pk, actor=None)

    replay = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="before-revoke")

    assert first.status_code == 201
    assert (replay.status_code, replay.json()["code"]) == (401, "unauthenticated")
    assert "Idempotent-Replayed" not in replay
    assert "id" not in replay.json()
    assert Draft.objects.count() == 1
    assert ApiIdempotencyKey.objects.get().state == ApiIdempotencyKey.State.COMPLETED


def test_a_replay_through_a_suspended_tenant_is_refused(api, token_a, tenant_a, mailbox_a):
    first = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="before-suspend")
    tenant_suspend(slug=tenant_a.slug, reason="Unpaid invoices")

    replay = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="before-suspend")

    assert first.status_code == 201
    assert (replay.status_code, replay.json()["code"]) == (403, "tenant_suspended")
    assert "Idempotent-Replayed" not in replay


def test_a_token_outlives_the_admin_who_made_it_and_the_deactivation_page_says_so(
    api, member_of, tenant_a, mailbox_a, signed_in, client
):
    """A product decision, as comparable products make it (Helpthread's assistant tokens are
    the workspace's, not a person's): the token is the tenant's; deactivating its maker leaves
    it working, and the console says so before the admin confirms."""
    maker = member_of(tenant_a, "admin")
    other = member_of(tenant_a, "admin")
    _token, plaintext = token_create(
        tenant=tenant_a, name="triage", scopes=["drafts:read"], actor=maker.user
    )
    signed_in(other.user)
    confirm = client.get(f"/t/{tenant_a.slug}/admin/members/{maker.pk}/deactivate/")
    member_deactivate(tenant=tenant_a, membership_id=maker.pk, actor=other.user)

    after = api.get("/mailboxes", token=plaintext)

    assert "Still working after this: 1 agent token" in confirm.content.decode()
    assert not Membership.objects.get(pk=maker.pk).is_active
    assert after.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_two_admins_making_the_same_replacement_token_at_once_get_one_row_and_one_secret(
    tenant_a, member_of
):
    """There is no rotation: a token is replaced by a new one (then the old one revoked). Two
    admins doing it at once under the same name: one token, one plaintext, one audit row."""
    admins = [member_of(tenant_a, "admin").user for _i in range(2)]

    results = run_concurrently(
        lambda i: token_create(
            tenant=tenant_a, name="triage-2", scopes=["drafts:write"], actor=admins[i]
        ),
        2,
    )

    assert sorted(type(r).__name__ for r in results) == ["TokenError", "tuple"]
    assert AgentToken.objects.filter(name="triage-2").count() == 1
    assert AuditEvent.objects.filter(action="token.created").count() == 1


@pytest.mark.django_db(transaction=True)
def test_five_revocations_at_once_revoke_once_and_audit_once(token_a, tenant_a):
    token = _row(token_a)

    results = run_concurrently(
        lambda _i: token_revoke(tenant=tenant_a, token_id=token.pk, actor=None), 5
    )

    assert sorted(type(r).__name__ for r in results) == ["AgentToken"] + ["TokenError"] * 4
    assert AuditEvent.objects.filter(action="token.revoked").count() == 1
    assert AgentToken.objects.get(pk=token.pk).revoked_at is not None
