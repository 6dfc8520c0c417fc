"""Two backfill runs at once (the schedule's and an operator's ``manage.py webhooks_backfill``)
each took the whole per-key call budget, and AgentMail's rate limits are per key: the key got
twice the calls. A run now holds the tenant while it asks about its mailboxes; another run skips
that tenant and says so, and a lease left by a run that died lapses."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.intents.helpers import run_concurrently
from tests.webhooks.test_backfill import accepted_send
from webhooks import registration
from webhooks.models import BackfillLease
from webhooks.services.backfill import webhooks_backfill
from webhooks.services.backfill_lease import backfill_tenant_held

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quiet_sandbox(sandbox, settings):
    """Webhooks off (what the backfill is for), no backfill delay."""
    sandbox.config(webhooks_enabled=False)
    settings.WEBHOOK_BACKFILL_AFTER_SECONDS = 0
    settings.WEBHOOK_BACKFILL_CALLS_PER_SECOND = 0
    yield sandbox
    sandbox.config(webhooks_enabled=True)


def calls_about(sandbox, mailbox, seen: set) -> int:
    return sum(
        1
        for r in sandbox.requests()
        if r["id"] not in seen
        and r["route"] in ("get_message", "list_messages")
        and f"/inboxes/{mailbox.inbox_id}/" in r["path"]
    )


def test_two_runs_at_once_spend_one_keys_budget_once(
    quiet_sandbox, settings, tenant_a, member_of, mailbox_factory
):
    sandbox = quiet_sandbox
    settings.WEBHOOK_BACKFILL_CALLS_PER_KEY = 3
    # Paced, so that each run asks for about a second and the two overlap.
    settings.WEBHOOK_BACKFILL_CALLS_PER_SECOND = 3
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    for n in range(5):
        accepted_send(tenant_a, mailbox, approver, to=[f"c{n}@customer.test"])
    seen = {r["id"] for r in sandbox.requests()}

    reports = run_concurrently(lambda i: webhooks_backfill(tenant_id=tenant_a.pk), 2)

    assert calls_about(sandbox, mailbox, seen) == 3
    assert sorted(len(r.skipped_tenants) for r in reports) == [0, 1]
    assert BackfillLease.objects.count() == 0


def test_a_tenant_another_run_holds_is_skipped_and_the_command_says_so(
    quiet_sandbox, tenant_a, tenant_b, mailbox_factory
):
    sandbox = quiet_sandbox
    held_box, other_box = mailbox_factory(tenant_a), mailbox_factory(tenant_b)
    registration.webhook_register(tenant=tenant_a)
    registration.webhook_register(tenant=tenant_b)
    seen = {r["id"] for r in sandbox.requests()}
    out = io.StringIO()

    with backfill_tenant_held(tenant_a.pk) as held:
        call_command("webhooks_backfill", stdout=out)
    again = webhooks_backfill(tenant_id=tenant_a.pk)

    assert held is True
    assert calls_about(sandbox, held_box, seen) == 1  # the run after, not the one held off
    assert calls_about(sandbox, other_box, seen) == 1
    assert f"tenant '{tenant_a.slug}' skipped: another backfill run" in out.getvalue()
    assert tenant_b.slug not in out.getvalue()
    assert again.skipped_tenants == []


def test_a_lease_left_by_a_run_that_died_lapses(quiet_sandbox, tenant_a, mailbox_factory):
    sandbox = quiet_sandbox
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    BackfillLease.objects.create(
        tenant=tenant_a,
        holder="00000000-0000-0000-0000-000000000001",
        held_until=timezone.now() - timedelta(seconds=1),
    )
    seen = {r["id"] for r in sandbox.requests()}

    report = webhooks_backfill(tenant_id=tenant_a.pk)

    assert report.skipped_tenants == []
    assert calls_about(sandbox, mailbox, seen) == 1
    assert BackfillLease.objects.count() == 0
