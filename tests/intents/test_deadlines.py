"""Deadlines (SLA): the due time fixed at creation, the warning, the breach and the escalation,
driven by the sweep at the configured times. The sweep reads the database clock, which no test
can move: ``_database_clock_at`` moves the drafts' deadlines back instead, for as long as it
lasts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db.models import F
from django.utils import timezone

from config.clock import db_now
from intents import services
from intents.models import Draft, IntentEvent
from intents.selectors.queue import QueueFilter, draft_queue
from intents.services import deadlines
from intents.tasks import sweep_once
from mailboxes.models import Mailbox
from tenants.models import Tenant
from tests.intents.helpers import run_concurrently, set_state
from webhooks.models import InboundMessage

SECOND = timedelta(seconds=1)


def _actions(draft) -> list[str]:
    return list(
        IntentEvent.objects.filter(draft=draft, action__startswith="draft.")
        .exclude(action="draft.created")
        .order_by("id")
        .values_list("action", flat=True)
    )


@contextmanager
def _database_clock_at(moment: datetime) -> Iterator[None]:
    """As if the database clock read ``moment``: every draft's deadline and warning time move
    back by the difference, and forward again after."""
    shift = moment - db_now()
    Draft.objects.update(sla_due_at=F("sla_due_at") - shift, sla_warn_at=F("sla_warn_at") - shift)
    try:
        yield
    finally:
        Draft.objects.update(
            sla_due_at=F("sla_due_at") + shift, sla_warn_at=F("sla_warn_at") + shift
        )


def _set(tenant, **fields):
    Tenant.objects.filter(pk=tenant.pk).update(**fields)
    tenant.refresh_from_db()


@pytest.fixture
def escalation_member(tenant_a, member_of):
    return member_of(tenant_a, "approver", user__full_name="Esme Escalation").user


def _approved_then_failed(tenant, draft, approver) -> Draft:
    """``draft`` approved at its first version, and its send failed: a draft to reopen."""
    intent = services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=approver,
    )
    set_state(intent, "failed")
    return draft


def test_warning_breach_and_escalation_happen_at_their_times_once_each(
    tenant_a, new_draft, approver, escalation_member, member_of
):
    _set(tenant_a, sla_minutes=60, sla_warning_minutes=15, escalate_to=escalation_member)
    admin = member_of(tenant_a, "admin").user
    draft = new_draft()
    # Handed (no claim expiry), so only the deadline moves the draft.
    services.draft_hand(tenant=tenant_a, draft_id=draft.pk, actor=admin, to_user=approver)
    draft.refresh_from_db()
    due = draft.sla_due_at
    assert due - draft.created_at == pytest.approx(timedelta(minutes=60), abs=timedelta(seconds=5))
    assert draft.sla_warn_at == due - timedelta(minutes=15)

    with _database_clock_at(draft.sla_warn_at - SECOND):
        sweep_once()
    assert _actions(draft) == ["draft.handed"]
    with _database_clock_at(draft.sla_warn_at + SECOND):
        sweep_once()
        sweep_once()
    assert _actions(draft) == ["draft.handed", "draft.sla_warning"]

    with _database_clock_at(due - SECOND):
        sweep_once()
    draft.refresh_from_db()
    assert draft.sla_breached_at is None and draft.escalated_at is None
    assert draft.assignee == approver

    with _database_clock_at(due + SECOND):
        sweep_once()
        sweep_once()
    assert _actions(draft) == [
        "draft.handed",
        "draft.sla_warning",
        "draft.sla_breached",
        "draft.escalated",
    ]
    draft.refresh_from_db()
    assert draft.assignee == escalation_member
    assert draft.assigned_how == "escalated"
    assert draft.escalated_at is not None
    assert draft.sla_breach_holder == approver
    escalated = IntentEvent.objects.get(draft=draft, action="draft.escalated")
    assert escalated.data == {"to": escalation_member.pk, "previous_holder": approver.pk}

    mine = draft_queue(tenant=tenant_a, f=_mine(escalation_member))
    assert [d.pk for d in mine.items] == [draft.pk]
    assert [d.pk for d in draft_queue(tenant=tenant_a, f=_escalated()).items] == [draft.pk]


def _mine(user):
    return QueueFilter(view="mine", viewer=user.pk)


def _escalated():
    return QueueFilter(view="escalated")


def test_the_deadline_runs_from_the_customers_message(tenant_a, local_mailbox, new_draft):
    _set(tenant_a, sla_minutes=120)
    received = timezone.now() - timedelta(minutes=30)
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=local_mailbox,
        thread_id="th-1",
        message_id="<m1@example.com>",
        sender="Customer <customer@example.com>",
        subject="Refund?",
        received_at=received,
    )
    draft = new_draft(in_reply_to="<m1@example.com>", subject=None)
    assert draft.sla_due_at == received + timedelta(minutes=120)
    assert draft.sla_warn_at == received + timedelta(minutes=90)


def test_the_mailbox_target_overrides_the_tenants(tenant_a, local_mailbox, new_draft):
    _set(tenant_a, sla_minutes=120)
    Mailbox.objects.filter(pk=local_mailbox.pk).update(sla_minutes=10)
    draft = new_draft()
    assert draft.sla_due_at - draft.created_at == pytest.approx(
        timedelta(minutes=10), abs=timedelta(seconds=5)
    )


def test_no_target_no_deadline(tenant_a, new_draft):
    draft = new_draft()
    assert draft.sla_due_at is None and draft.sla_warn_at is None


def test_escalation_to_a_role_goes_round_robin_among_present_members(
    tenant_a, new_draft, approver, member_of
):
    _set(tenant_a, sla_minutes=5, escalate_to_role="admin")
    admins = [member_of(tenant_a, "admin").user for _ in range(2)]
    member_of(tenant_a, "admin", is_away=True)
    drafts = [new_draft() for _ in range(3)]
    with _database_clock_at(db_now() + timedelta(minutes=5, seconds=5)):
        assert deadlines.drafts_escalate_due() == 3
    holders = [Draft.objects.get(pk=d.pk).assignee for d in drafts]
    assert holders == [admins[0], admins[1], admins[0]]


def test_round_robin_takes_turns_when_drafts_fall_due_out_of_creation_order(
    tenant_a, new_draft, member_of
):
    """Found by an outside probe: within one sweep every escalation has the same time, and the
    last pick was read back as the draft with the highest id, not the one escalated last."""
    _set(tenant_a, sla_minutes=5, escalate_to_role="admin")
    admins = [member_of(tenant_a, "admin").user for _ in range(3)]
    drafts = [new_draft() for _ in range(3)]
    now = db_now()
    for draft, minutes in zip(drafts, (2, 3, 1), strict=True):  # due: third, first, second
        Draft.objects.filter(pk=draft.pk).update(sla_due_at=now + timedelta(minutes=minutes))
    with _database_clock_at(now + timedelta(minutes=5)):
        assert deadlines.drafts_escalate_due() == 3

    holders = {Draft.objects.get(pk=d.pk).assignee for d in drafts}
    assert holders == set(admins)


def test_breach_without_a_rule_is_counted_but_not_escalated(tenant_a, new_draft, approver):
    _set(tenant_a, sla_minutes=5)
    draft = new_draft()
    with _database_clock_at(db_now() + timedelta(minutes=6)):
        sweep_once()
    draft.refresh_from_db()
    assert draft.sla_breached_at is not None
    assert draft.escalated_at is None
    assert _actions(draft) == ["draft.sla_warning", "draft.sla_breached"]


def test_the_review_expiry_still_fails_closed(tenant_a, new_draft, escalation_member):
    _set(tenant_a, sla_minutes=5, escalate_to=escalation_member)
    draft = new_draft()
    Draft.objects.filter(pk=draft.pk).update(review_deadline=timezone.now() - SECOND)
    sweep_once()
    draft.refresh_from_db()
    assert draft.status == "expired"
    assert draft.assignee is None
    assert "draft.escalated" not in _actions(draft)


def test_an_escalation_target_without_the_right_leaves_it_unassigned(
    tenant_a, new_draft, member_of
):
    narrow = member_of(tenant_a, "approver", approve_all_mailboxes=False).user
    _set(tenant_a, sla_minutes=5, escalate_to=narrow)
    draft = new_draft()
    with _database_clock_at(db_now() + timedelta(minutes=6)):
        sweep_once()
    draft.refresh_from_db()
    assert draft.escalated_at is not None
    assert draft.assignee is None
    event = IntentEvent.objects.get(draft=draft, action="draft.escalated")
    assert "nobody the escalation rule names" in event.reason


@pytest.mark.parametrize(
    "lapse",
    [{"is_active": False}, {"role": "viewer"}, {"approve_all_mailboxes": False}],
    ids=["deactivated", "made a viewer", "without the mailbox's right"],
)
def test_a_named_target_who_can_no_longer_decide_is_passed_over_for_an_admin(
    tenant_a, new_draft, escalation_member, member_of, lapse
):
    """Found by an outside probe: the named member deactivated or stripped of the right, each
    breached draft was marked escalated and went to nobody."""
    _set(tenant_a, sla_minutes=5, escalate_to=escalation_member)
    admin = member_of(tenant_a, "admin").user
    escalation_member.memberships.filter(tenant=tenant_a).update(**lapse)
    draft = new_draft()
    with _database_clock_at(db_now() + timedelta(minutes=6)):
        sweep_once()
    draft.refresh_from_db()
    event = IntentEvent.objects.get(draft=draft, action="draft.escalated")
    assert (draft.assignee, draft.assigned_how, draft.escalated_to) == (admin, "escalated", admin)
    assert event.data["passed_over"] == escalation_member.pk
    assert "can no longer decide it" in event.reason


@pytest.mark.django_db(transaction=True)
def test_many_sweeps_at_once_warn_and_escalate_each_draft_once(
    tenant_a, new_draft, escalation_member
):
    _set(tenant_a, sla_minutes=5, escalate_to=escalation_member)
    drafts = [new_draft() for _ in range(12)]
    later = db_now() + timedelta(minutes=6)
    warned = run_concurrently(lambda i: deadlines.drafts_warn_due(batch=5, now=later), 4)
    breached = run_concurrently(lambda i: deadlines.drafts_escalate_due(batch=5, now=later), 4)
    deadlines.drafts_warn_due(now=later)
    deadlines.drafts_escalate_due(now=later)
    assert all(isinstance(n, int) for n in warned + breached)
    for action in ("draft.sla_warning", "draft.sla_breached", "draft.escalated"):
        rows = IntentEvent.objects.filter(draft__in=drafts, action=action)
        assert sorted(rows.values_list("draft_id", flat=True)) == sorted(d.pk for d in drafts)


def test_a_stale_row_is_not_warned_or_breached_twice(tenant_a, new_draft, escalation_member):
    """The conditional UPDATE decides, not the row the sweep read: a second pass over the same
    read (another sweep that read it before the first committed) changes and journals nothing."""
    _set(tenant_a, sla_minutes=5, escalate_to=escalation_member)
    draft = new_draft()
    stale = Draft.objects.select_related("mailbox").get(pk=draft.pk)
    later = db_now() + timedelta(minutes=6)
    assert deadlines._warn(stale, later) is True
    assert deadlines._warn(stale, later) is False
    assert deadlines._breach(tenant_a, stale, later) is True
    assert deadlines._breach(tenant_a, stale, later) is False
    assert _actions(draft) == ["draft.sla_warning", "draft.sla_breached", "draft.escalated"]


@pytest.mark.django_db(transaction=True)
def test_an_escalation_sweep_in_progress_does_not_hold_up_writes_that_name_the_tenant(
    tenant_a, new_draft, escalation_member, member_of
):
    """The sweep locks the tenants of its batch (a role's round-robin); with FOR UPDATE every
    row written meanwhile that names the tenant (an audit row, a draft, a journal row: a KEY
    SHARE lock on it) waited for the sweep's commit."""
    import threading

    from django.db import connection, connections, transaction

    from tenants.models import AuditEvent

    _set(tenant_a, sla_minutes=1, escalate_to=escalation_member)
    admin = member_of(tenant_a, "admin").user
    new_draft()
    Draft.objects.update(sla_due_at=db_now() - SECOND)
    written: list[object] = []

    def write_an_audit_row() -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '2s'")
                AuditEvent.objects.create(tenant=tenant_a, actor=admin, action="test.written")
            written.append("done")
        except Exception as exc:  # the lock timeout of the old FOR UPDATE
            written.append(exc)
        finally:
            connections.close_all()

    with transaction.atomic():
        assert deadlines.drafts_escalate_due() == 1  # its locks are held until this block ends
        writer = threading.Thread(target=write_an_audit_row)
        writer.start()
        writer.join(10)
    assert written == ["done"]


def test_a_reopened_draft_gets_a_fresh_deadline_from_the_reopen(
    tenant_a, new_draft, approver, escalation_member, member_of
):
    """A draft approved in time whose send then failed, reopened after its first deadline had
    passed: it was escalated at once by the next sweep. The reopen starts a new review round,
    with a new deadline measured from it, and any earlier warning, breach or escalation marks
    cleared (the journal keeps them)."""
    _set(tenant_a, sla_minutes=60, sla_warning_minutes=15, escalate_to=escalation_member)
    draft = _approved_then_failed(tenant_a, new_draft(), approver)
    past = timezone.now() - timedelta(hours=2)
    Draft.objects.filter(pk=draft.pk).update(
        sla_due_at=past,
        sla_warn_at=past - timedelta(minutes=15),
        sla_warned_at=past - timedelta(minutes=15),
        sla_breached_at=past,
        escalated_at=past,
        escalated_to=escalation_member,
    )
    reopener = member_of(tenant_a, "admin").user
    before = db_now()
    services.draft_reopen(tenant=tenant_a, draft_id=draft.pk, actor=reopener, reason="again")

    draft.refresh_from_db()
    assert draft.sla_due_at - before == pytest.approx(
        timedelta(minutes=60), abs=timedelta(seconds=5)
    )
    assert draft.sla_warn_at == draft.sla_due_at - timedelta(minutes=15)
    assert (draft.sla_warned_at, draft.sla_breached_at, draft.escalated_at) == (None, None, None)
    assert draft.escalated_to is None
    reopened = IntentEvent.objects.get(draft=draft, action="draft.reopened")
    assert reopened.data["sla_due_at"] == draft.sla_due_at.isoformat()

    sweep_once()
    assert _actions(draft) == ["draft.approved", "draft.reopened"]
    with _database_clock_at(draft.sla_due_at + SECOND):
        sweep_once()
    assert _actions(draft)[-3:] == ["draft.sla_warning", "draft.sla_breached", "draft.escalated"]
    draft.refresh_from_db()
    assert draft.assignee == escalation_member


# A web host and a worker host whose clocks disagree: the due time was computed on the web
# host's clock and compared with the sweeping host's, while created_at is the database's. Both
# read the database clock now.
SKEW = timedelta(minutes=10)


def test_a_draft_created_on_a_host_behind_is_not_breached_at_once(tenant_a, new_draft):
    _set(tenant_a, sla_minutes=5)
    with time_machine.travel(datetime.now(UTC) - SKEW):
        draft = new_draft()
    assert draft.sla_due_at - draft.created_at == pytest.approx(
        timedelta(minutes=5), abs=timedelta(seconds=5)
    )
    sweep_once()
    draft.refresh_from_db()
    assert (draft.sla_warned_at, draft.sla_breached_at) == (None, None)


def test_a_sweep_on_a_host_ahead_does_not_breach_a_draft_before_its_time(tenant_a, new_draft):
    _set(tenant_a, sla_minutes=5)
    draft = new_draft()
    with time_machine.travel(datetime.now(UTC) + SKEW):
        assert deadlines.drafts_warn_due() == 0
        assert deadlines.drafts_escalate_due() == 0
    assert _actions(draft) == []


def test_a_draft_reopened_on_a_host_behind_gets_its_deadline_from_the_database_clock(
    tenant_a, new_draft, approver, member_of
):
    _set(tenant_a, sla_minutes=60)
    draft = _approved_then_failed(tenant_a, new_draft(), approver)
    reopener = member_of(tenant_a, "admin").user
    with time_machine.travel(datetime.now(UTC) - SKEW):
        services.draft_reopen(tenant=tenant_a, draft_id=draft.pk, actor=reopener, reason="again")
    draft.refresh_from_db()
    assert draft.sla_due_at - db_now() == pytest.approx(
        timedelta(minutes=60), abs=timedelta(seconds=5)
    )
