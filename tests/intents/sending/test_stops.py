"""A change that stops sends (member deactivated, mailbox disabled, tenant suspended, a mailbox's
recipient policy narrowed, the recipient suppressed by hand) and the worker's pre-call check,
committing at the same moment: no call goes out after the change that the change does not count
as in flight (intents.sending.stops)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from django.db import connection, transaction
from django.db.models.functions import Now

from console.services import suppression_add
from intents import errors, sending
from intents.models import DraftVersion, SendAttempt, SendIntent
from intents.sending.claim import intent_claim
from intents.sending.worker import execute_claims
from mailboxes.provisioning import mailbox_set_status, mailbox_update_policy
from tenants.models import AuditEvent, Membership
from tenants.onboarding import tenant_suspend
from tenants.services import member_deactivate
from tests.intents.helpers import (
    blocked_on_a_lock,
    in_thread,
    sends_in_flight,
    until_done_or_waiting,
)
from tests.intents.sending.test_four_eyes_at_send import four_eyes_on
from tests.ops.test_query_plans import analyze, captured, earlier_sends, scanning
from tests.webhooks.conftest import intent_row  # noqa: F401 (a fixture, used by name)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def lease_for_a_loaded_machine(fast_send):
    """The races here hold the worker between its claim and its call while other sessions line
    up; a call is not made once its lease's call deadline has passed (``lease.call_deadline``:
    2.5 s after the claim with fast_send's lease of 5 s). On a loaded machine the steps took
    longer than that, the call was not made, and a test of a call in flight found 0 sends."""
    fast_send.SEND_LEASE_SECONDS = 60
    return fast_send


def _claimed(live):
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
    claims = intent_claim(worker="t", limit=5)
    assert [c.intent_id for c in claims] == [intent.pk]
    return intent, claims


@contextmanager
def _held(model):
    """Inserts into ``model``'s table wait until the block ends."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"LOCK TABLE {connection.ops.quote_name(model._meta.db_table)} IN SHARE MODE"
        )
        yield


def _deactivate_approver(live, admin):
    membership = Membership.objects.get(tenant=live.tenant, user=live.approver)
    member_deactivate(tenant=live.tenant, membership_id=membership.pk, actor=admin)
    return "member.deactivated"


def _disable_mailbox(live, admin):
    mailbox_set_status(
        tenant=live.tenant, mailbox_id=live.mailbox.pk, status="disabled", actor=admin
    )
    return "mailbox.disabled"


def _narrow_policy(live, admin):
    """The approved send's recipient (example.com) is outside the new policy."""
    mailbox_update_policy(
        tenant=live.tenant,
        mailbox_id=live.mailbox.pk,
        policy_mode="restricted",
        allowed_domains=["example.org"],
        allowed_addresses=[],
        display_name=live.mailbox.display_name,
        actor=admin,
    )
    return "mailbox.policy_changed"


def _suppress_recipient(live, admin):
    suppression_add(tenant=live.tenant, address="Customer@Example.com", note="asked", actor=admin)
    return "suppression.added"


def _suspend_tenant(live, admin):
    tenant_suspend(slug=live.tenant.slug, reason="Unpaid invoices")
    return "tenant.suspended"


def _require_second_approver(live, admin):
    """The send was written and approved by live.approver alone: the rule now refuses that."""
    four_eyes_on(live, admin)
    return "tenant.policies_changed"


def _sends(live, intent) -> int:
    return len(live.sandbox.ledger(idempotency_key=intent.idempotency_key))


@pytest.mark.parametrize(
    "change",
    [
        _deactivate_approver,
        _disable_mailbox,
        _narrow_policy,
        _suppress_recipient,
        _require_second_approver,
    ],
)
def test_a_change_committed_while_the_check_inserts_its_attempt_counts_that_call(
    live, member_of, change
):
    """The check had read the approver's right and the mailbox when the change committed; its
    attempt row came after, and so did the call, which the change knew nothing about. Now the
    change waits for the check's attempt row and says the call is in flight."""
    # The call takes half a second, so the change, let go when the check commits, counts it while
    # it is out: with an instant provider a loaded machine could record its answer first.
    live.sandbox.config(latency_ms=500)
    admin = member_of(live.tenant, "admin").user
    intent, claims = _claimed(live)
    worker: list = []
    changed: list = []

    def change_then_count_attempts():
        action = change(live, admin)
        return action, intent.attempts_log.count()

    with _held(type(intent.attempts_log.model())):
        sender = in_thread(lambda: execute_claims(claims), worker)
        assert blocked_on_a_lock(), "the pre-call check never reached its attempt row"
        changer = in_thread(change_then_count_attempts, changed)
        until_done_or_waiting(changer, waiters=2)
    sender.join(30)
    changer.join(30)
    assert not isinstance(worker[0], Exception) and not isinstance(changed[0], Exception)
    action, attempts_before_the_change = changed[0]
    assert _sends(live, intent) == 1
    assert attempts_before_the_change == 1
    assert AuditEvent.objects.get(action=action).data["sends_in_flight"] == 1


@pytest.mark.parametrize(
    "change",
    [
        _disable_mailbox,
        _suspend_tenant,
        _narrow_policy,
        _suppress_recipient,
        _require_second_approver,
    ],
)
def test_a_check_that_waited_for_the_change_reads_it_and_blocks_the_send(live, member_of, change):
    """The check's locked read took its snapshot, then waited for the change's lock on the send:
    it got the row after the change committed, with the mailbox and tenant from before, and
    sent. They are read again after the wait."""
    admin = member_of(live.tenant, "admin").user
    intent, claims = _claimed(live)
    worker: list = []
    changed: list = []

    with _held(AuditEvent):  # the change holds the send and waits here to write its audit row
        changer = in_thread(lambda: change(live, admin), changed)
        assert blocked_on_a_lock(), "the change never reached its audit row"
        sender = in_thread(lambda: execute_claims(claims), worker)
        until_done_or_waiting(sender, waiters=2)
    sender.join(30)
    changer.join(30)
    assert not isinstance(worker[0], Exception) and not isinstance(changed[0], Exception)
    intent.refresh_from_db()
    assert (intent.state, _sends(live, intent)) == ("blocked", 0)
    assert AuditEvent.objects.get(action=changed[0]).data["sends_in_flight"] == 0


def test_a_change_with_no_send_in_flight_costs_one_indexed_statement(
    live,
    member_of,
    intent_row,  # noqa: F811 (the fixture imported above)
):
    """Over the mailbox's history of sends by the approver: one statement on the intents, read
    through an index that skips the history."""
    admin = member_of(live.tenant, "admin").user
    earlier_sends(intent_row, live.mailbox, live.approver)
    analyze()

    statements = captured(lambda: _deactivate_approver(live, admin))
    statements += captured(lambda: _disable_mailbox(live, admin))
    statements += captured(lambda: _suppress_recipient(live, admin))

    on_intents = [sql for sql in statements if '"intents_sendintent"' in sql]
    assert len(on_intents) == 3
    assert scanning(on_intents) == []
    assert {
        e.data["sends_in_flight"]
        for e in AuditEvent.objects.filter(
            action__in=("member.deactivated", "mailbox.disabled", "suppression.added")
        )
    } == {0}


def _approval_of_a_new_draft(live):
    """A pending draft of the live mailbox, and a function approving the version it shows."""
    from intents import services

    draft = services.draft_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        actor_user=live.approver,
        to=["customer@example.com"],
        subject="Your refund",
        text="We refunded your order.",
    )
    content_hash = draft.versions.get().content_hash

    def approve():
        return services.draft_approve(
            tenant=live.tenant,
            draft_id=draft.pk,
            version=1,
            content_hash=content_hash,
            actor=live.approver,
        )

    return draft, approve


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (_deactivate_approver, errors.NoRight),
        (_disable_mailbox, errors.MailboxInactive),
        (_suspend_tenant, errors.TenantInactive),
    ],
)
def test_an_approval_during_a_change_that_stops_sends_waits_for_it_and_is_refused(
    live, member_of, change, refusal
):
    """The change had held the sends on their way; an approval read the right, the mailbox and
    the tenant as they were before it, and its new send was one the change never held: a worker
    sent it before the change committed (a deactivated approver's reply went out, counted as no
    send in flight), or it was approved after the change with what it had read before. Now an
    approval waits for a running change and reads after it; a change waits for approvals."""
    admin = member_of(live.tenant, "admin").user
    draft, approve = _approval_of_a_new_draft(live)
    changed: list = []
    approved: list = []

    with _held(AuditEvent):  # the change holds the sends and waits here to write its audit row
        changer = in_thread(lambda: change(live, admin), changed)
        assert blocked_on_a_lock(), "the change never reached its audit row"
        approver = in_thread(approve, approved)
        until_done_or_waiting(approver, waiters=2)
        # A worker round while the change is still running.
        in_thread(lambda: sending.run_once(worker="t"), []).join(30)
    changer.join(30)
    approver.join(30)
    assert not isinstance(changed[0], Exception)
    assert isinstance(approved[0], refusal), approved[0]
    assert not SendIntent.objects.filter(draft=draft).exists()
    assert live.sandbox.ledger(inbox_id=live.mailbox.inbox_id) == []
    assert AuditEvent.objects.get(action=changed[0]).data["sends_in_flight"] == 0


def test_rights_narrowed_hold_and_count_only_the_sends_of_the_mailboxes_taken_away(
    tenant_a, member_of, mailbox_factory
):
    """The approver keeps mailbox A and loses B: the send of A on its way is theirs to keep
    (it is not stopped, and not counted as let through); only B's is."""
    from tenants.services import member_set_mailbox_rights
    from tests.intents.helpers import sends_in_flight

    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver")
    kept, taken = mailbox_factory(tenant_a), mailbox_factory(tenant_a)
    sends_in_flight(kept, approver.user, 1)
    sends_in_flight(taken, approver.user, 1)

    stopped = member_set_mailbox_rights(
        tenant=tenant_a,
        membership_id=approver.pk,
        approve_all_mailboxes=False,
        mailbox_ids=[kept.pk],
        actor=admin,
    )

    assert stopped.sends_in_flight == 1
    row = AuditEvent.objects.get(action="member.rights_changed")
    assert row.data["sends_in_flight"] == 1


def test_a_rename_alone_holds_no_send(live, member_of):
    """Only a change of who may be written to stops sends; a new display name locks none of
    the mailbox's sends, in flight or queued."""
    admin = member_of(live.tenant, "admin").user
    sends_in_flight(live.mailbox, live.approver, 1)

    def rename():
        return mailbox_update_policy(
            tenant=live.tenant,
            mailbox_id=live.mailbox.pk,
            policy_mode=live.mailbox.policy_mode,
            allowed_domains=[],
            allowed_addresses=[],
            display_name="Support desk",
            actor=admin,
        )

    statements = captured(rename)

    assert [sql for sql in statements if '"intents_sendintent"' in sql] == []
    changed = AuditEvent.objects.get(action="mailbox.policy_changed")
    assert changed.data["after"]["display_name"] == "Support desk"
    assert "sends_in_flight" not in changed.data


@pytest.mark.parametrize(
    ("stored", "suppressed"),
    [
        # The domain in Unicode: the normal form before it was kept in ASCII.
        ("ana@bücher.de", "ana@xn--bcher-kva.de"),
        # J + U+030C lower-cased, not composed again: the normal form before it was.
        ("j\u030cx@example.com", "\u01f0x@example.com"),
    ],
)
def test_a_suppression_holds_the_sends_to_an_older_spelling_of_the_address(
    live, member_of, stored, suppressed
):
    """Recipients approved before the address form changed keep their spelling (the approval
    hash covers it). The worker normalises them and blocks the send; the hold looked for the
    new spelling only, so such a send checked just before the save went out unseen, and the
    admin was told nothing was on its way. Another address of the same domain is not held."""
    admin = member_of(live.tenant, "admin").user
    to_her, to_another = sends_in_flight(live.mailbox, live.approver, 2)
    for intent, address in ((to_her, stored), (to_another, "bob@bücher.de")):
        SendIntent.objects.filter(pk=intent.pk).update(
            recipients={"to": [address], "cc": [], "bcc": []}
        )
        DraftVersion.objects.filter(pk=intent.draft_version_id).update(to=[address])

    stopped = suppression_add(tenant=live.tenant, address=suppressed, note="asked", actor=admin)

    assert stopped.sends_in_flight == 1
    assert AuditEvent.objects.get(action="suppression.added").data["sends_in_flight"] == 1


@pytest.mark.parametrize(
    ("suppressed", "held"),
    [
        ("ana@example.com", ["ana@example.com", "ana+billing@example.com", "ana+a+b@example.com"]),
        # An entry for a sub-address covers that one alone.
        ("ana+billing@example.com", ["ana+billing@example.com"]),
    ],
)
def test_a_suppression_holds_the_sends_to_the_sub_addresses_it_covers(
    live, member_of, suppressed, held
):
    """The pre-call check blocks ana+billing@ by ana@'s entry (``suppression_keys``); the hold
    looked for the address itself only, so such a send checked just before the save went out
    unseen, and the admin was told nothing was on its way."""
    admin = member_of(live.tenant, "admin").user
    to = [
        "ana@example.com",
        "ana+billing@example.com",
        "ana+a+b@example.com",
        "ana+x@example.org",
        "banana+x@example.com",
    ]
    intents = sends_in_flight(live.mailbox, live.approver, len(to))
    for intent, address in zip(intents, to, strict=True):
        SendIntent.objects.filter(pk=intent.pk).update(
            recipients={"to": [], "cc": [address], "bcc": []}
        )

    stopped = suppression_add(tenant=live.tenant, address=suppressed, note="asked", actor=admin)

    assert stopped.sends_in_flight == len(held)
    assert AuditEvent.objects.get(action="suppression.added").data["sends_in_flight"] == len(held)


def test_a_label_lookup_in_flight_is_not_counted_as_a_send_that_goes_out(live, member_of):
    """A reconciliation's lookup only reads at AgentMail: the admin was told "1 send ... will go
    out" of a send whose lookup was in flight, and nothing went out."""
    admin = member_of(live.tenant, "admin").user
    [looking] = sends_in_flight(live.mailbox, live.approver, 1)
    SendIntent.objects.filter(pk=looking.pk).update(state=SendIntent.State.UNCERTAIN)
    SendAttempt.objects.filter(intent=looking).update(kind=SendAttempt.Kind.LOOKUP)

    stopped = mailbox_set_status(
        tenant=live.tenant, mailbox_id=live.mailbox.pk, status="disabled", actor=admin
    )

    assert stopped.sends_in_flight == 0
