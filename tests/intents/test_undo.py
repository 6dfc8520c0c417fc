"""Undo send (issue 16): the undo window after Approve, on real PostgreSQL, with the real worker
loop (a subprocess, as in test_acceptance.py) against the sandbox over HTTP. Every test counts
what the sandbox received for the intent's idempotency key."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Now

from config.clock import db_now
from intents import errors, sending, services, tasks
from intents.models import Draft, DraftVersion, IntentEvent, SendIntent
from intents.sending.sweep import due_intent_ids, seconds_until_next_due
from tenants.models import Tenant
from tenants.templatetags.zones import zoned
from tests.intents.conftest import start_worker, wait_until_polling
from tests.intents.helpers import run_concurrently

pytestmark = pytest.mark.django_db(transaction=True)


def sends(sandbox, intent):
    return sandbox.ledger(idempotency_key=intent.idempotency_key)


def calls(sandbox, intent):
    return sandbox.requests(idempotency_key=intent.idempotency_key)


def with_hold(live, seconds):
    Tenant.objects.filter(pk=live.tenant.pk).update(send_hold_seconds=seconds)
    live.tenant.refresh_from_db()
    return live


def sleep_until(moment, margin=0.0):
    """Sleep (database clock) until ``margin`` seconds before ``moment``."""
    left = (moment - db_now()).total_seconds() - margin
    if left > 0:
        time.sleep(left)


def wait_for_state(intent, states, timeout=20.0):
    deadline = time.monotonic() + timeout
    while SendIntent.objects.get(pk=intent.pk).state not in states:
        assert time.monotonic() < deadline, "intent did not settle in time"
        time.sleep(0.1)
    return SendIntent.objects.get(pk=intent.pk)


def undo(live, intent, actor=None):
    return services.intent_undo(
        tenant=live.tenant, intent_id=intent.pk, actor=actor or live.approver
    )


def journal_actions(intent):
    return list(
        IntentEvent.objects.filter(draft=intent.draft_id)
        .order_by("id")
        .values_list("action", flat=True)
    )


# --- the window ----------------------------------------------------------------------------------


def test_approval_sets_the_window_from_the_database_clock(live):
    with_hold(live, 10)
    intent = live.approved()
    assert (intent.hold_until - intent.approved_at).total_seconds() == 10
    # Not due before the window ends, so every reader of next_attempt_at waits too.
    assert intent.next_attempt_at == intent.hold_until
    assert step_now() == 0
    assert due_intent_ids() == ([], [])
    assert 8 < seconds_until_next_due() <= 10


def step_now():
    return sending.run_once(worker="test", limit=5)


def test_claim_by_id_inside_the_window_takes_nothing(live):
    with_hold(live, 10)
    intent = live.approved()
    assert sending.run_once(worker="t", limit=1, intent_id=intent.pk) == 0
    assert tasks.execute_intent(intent.pk) == 0
    assert calls(live.sandbox, intent) == []


def test_nothing_may_make_it_due_inside_its_window(live):
    with_hold(live, 10)
    intent = live.approved()
    with pytest.raises(IntegrityError), transaction.atomic():
        SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=F("approved_at"))


class Rollback(Exception):
    pass


def test_the_claim_and_the_wake_up_check_the_window_themselves(live):
    """Without the constraint (dropped inside a rolled-back transaction) an intent inside its
    window could be due by next_attempt_at; the claim and the sweep's wake-up still skip it."""
    from django.db import connection

    with_hold(live, 30)
    intent = live.approved()
    with pytest.raises(Rollback), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "ALTER TABLE intents_sendintent DROP CONSTRAINT intent_not_due_inside_hold"
            )
        SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=F("approved_at"))
        assert sending.intent_claim(worker="w", intent_id=intent.pk) == []
        assert due_intent_ids() == ([], [])
        raise Rollback
    assert calls(live.sandbox, intent) == []


def test_release_inside_the_window_still_waits_for_its_end(live):
    with_hold(live, 10)
    intent = live.approved()
    services.intent_hold(tenant=live.tenant, intent_id=intent.pk, reason="customer wrote again")
    services.intent_release(tenant=live.tenant, intent_id=intent.pk, actor=live.approver)
    intent.refresh_from_db()
    assert intent.next_attempt_at == intent.hold_until
    assert step_now() == 0


def test_hold_zero_sends_at_once_and_has_nothing_to_undo(live):
    with_hold(live, 0)
    intent = live.approved()
    assert intent.hold_until is None and intent.next_attempt_at == intent.approved_at
    assert step_now() == 1
    assert len(sends(live.sandbox, intent)) == 1
    with pytest.raises(errors.IntentError) as refused:
        undo(live, with_state(intent))
    assert refused.value.code == "undo_no_window"


def with_state(intent):
    intent.refresh_from_db()
    return intent


def approve(live, draft):
    version = draft.versions.order_by("-number").first()
    return services.draft_approve(
        tenant=live.tenant,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=live.approver,
    )


def draft_sending_by(live, not_after):
    return services.draft_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        to=["customer@example.com"],
        subject="Your refund",
        text="We refunded your order.",
        actor_user=live.approver,
        not_after=not_after,
    )


def not_after_passes(intent):
    """The agent's send-by time is now a second behind the database clock (as if the test had
    slept until then); the sweep has not run yet."""
    Draft.objects.filter(pk=intent.draft_id).update(not_after=Now() - timedelta(seconds=1))
    SendIntent.objects.filter(pk=intent.pk).update(not_after=Now() - timedelta(seconds=1))


def test_an_undo_window_that_would_outlast_not_after_refuses_the_approval(live):
    """Not due before its window ends and dead after not_after: such a send could only expire.
    The approval is refused, naming both, and changes nothing."""
    with_hold(live, 60)
    draft = draft_sending_by(live, db_now() + timedelta(seconds=20))
    events = IntentEvent.objects.count()
    with pytest.raises(errors.NotPending) as refused:
        approve(live, draft)
    assert refused.value.code == "not_after_within_undo"
    not_after = Draft.objects.get(pk=draft.pk).not_after
    assert f"sent by {not_after:%-d %b %Y, %H:%M:%S} UTC" in refused.value.message
    assert "undo window of 60 seconds" in refused.value.message
    assert Draft.objects.get(pk=draft.pk).status == "pending"
    assert not SendIntent.objects.filter(draft=draft).exists()
    assert IntentEvent.objects.count() == events
    assert step_now() == 0
    assert live.sandbox.ledger(inbox_id=live.mailbox.inbox_id) == []


def test_a_not_after_beyond_the_undo_window_is_approved_and_sent_after_it(live):
    with_hold(live, 1)
    draft = draft_sending_by(live, db_now() + timedelta(minutes=10))
    intent = approve(live, draft)
    assert intent.hold_until < intent.not_after
    sleep_until(intent.hold_until)
    time.sleep(0.05)
    assert step_now() == 1
    assert len(sends(live.sandbox, intent)) == 1


# --- acceptance: the real worker loop over HTTP --------------------------------------------------


def test_undo_within_the_window_sends_nothing_while_a_worker_runs(live):
    with_hold(live, 4)
    # A worker that lives well past the window however slow the machine (a loaded one took
    # longer than a 9 s worker's life to reach the last check); SIGTERM stops it cleanly.
    worker = start_worker(
        live.sandbox, "--seconds", "60", "--poll", "0.1", "--sweep-every", "0.5", LOG_LEVEL="INFO"
    )
    try:
        said = wait_until_polling(worker)
        intent = live.approved()
        # The worker polls through most of the window before the undo lands near its end.
        sleep_until(intent.hold_until, margin=0.8)
        assert worker.poll() is None
        draft = undo(live, intent)
        sleep_until(intent.hold_until)
        time.sleep(2.0)  # well past the window, the worker still polling
        assert worker.poll() is None
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert worker.returncode == 0, "".join(said)
    assert sends(live.sandbox, intent) == []
    assert calls(live.sandbox, intent) == []
    intent.refresh_from_db()
    assert (intent.state, intent.attempts, intent.resolved_by) == ("cancelled", 0, live.approver)
    assert draft.status == Draft.Status.PENDING and draft.current_version == 2
    copy = DraftVersion.objects.get(draft=draft, number=2)
    assert copy.content_hash == intent.content_hash
    assert journal_actions(intent)[-2:] == ["intent.undone", "draft.approval_undone"]
    assert not IntentEvent.objects.filter(intent=intent, action="intent.claimed").exists()


def test_after_the_window_exactly_one_message(live):
    with_hold(live, 2)
    # A worker that lives well past the window even when its start-up is slow (a loaded CI
    # machine took 15 s to import Django); the test stops it as soon as the intent settled.
    worker = start_worker(live.sandbox, "--seconds", "90", "--poll", "0.1", "--sweep-every", "0.5")
    try:
        intent = live.approved()
        accepted = wait_for_state(intent, SendIntent.TERMINAL, timeout=60)
    finally:
        worker.terminate()
        worker.communicate(timeout=30)
    assert accepted.state == "accepted"
    assert len(sends(live.sandbox, intent)) == 1
    assert len(calls(live.sandbox, intent)) == 1
    claimed = IntentEvent.objects.get(intent=intent, action="intent.claimed")
    assert claimed.created_at >= intent.hold_until


def test_undo_after_the_window_is_refused_and_changes_nothing(live):
    with_hold(live, 1)
    intent = live.approved()
    sleep_until(intent.hold_until)
    time.sleep(0.05)
    before = (IntentEvent.objects.count(), DraftVersion.objects.count())
    with pytest.raises(errors.IntentError) as refused:
        undo(live, intent)
    assert refused.value.code == "undo_too_late"
    assert "Too late to undo" in refused.value.message
    assert (IntentEvent.objects.count(), DraftVersion.objects.count()) == before
    assert with_state(intent).state == "queued"
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"
    assert step_now() == 1
    assert len(sends(live.sandbox, intent)) == 1
    with pytest.raises(errors.IntentError):
        undo(live, intent)
    assert with_state(intent).state == "accepted"


@pytest.mark.parametrize("fields", [{"state": "sending"}, {"attempts": 1}])
def test_undo_inside_the_window_of_a_send_already_started_is_refused(live, fields):
    """State and attempts guard on their own, even with the window still open."""
    from tests.intents.helpers import set_state

    with_hold(live, 30)
    intent = live.approved()
    set_state(intent, fields.pop("state", "queued"), **fields)
    with pytest.raises(errors.IntentError) as refused:
        undo(live, intent)
    assert refused.value.code == "undo_too_late"
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"


def test_undo_against_the_claim_at_the_edge_exactly_one_wins(live):
    """Undo and four claimers released together around the window's end, several rounds:
    each round either cancels (nothing sent, never claimed) or sends once (undo refused)."""
    with_hold(live, 1)
    outcomes = []
    for round_ in range(6):
        intent = live.approved(subject=f"edge {round_}")
        # Rounds straddle the end: some start just before it, some just after.
        sleep_until(intent.hold_until, margin=0.03 - round_ * 0.012)

        def racer(i, intent=intent):
            if i == 0:
                try:
                    return undo(live, intent)
                except errors.IntentError as refused:
                    return refused.code
            return sending.run_once(worker=f"w{i}", limit=1, intent_id=intent.pk)

        results = run_concurrently(racer, 5)
        # Claimers that ran just before the end found nothing due; the send then goes after it.
        sleep_until(intent.hold_until)
        sending.run_once(worker="after", limit=1, intent_id=intent.pk)
        intent.refresh_from_db()
        sent = len(sends(live.sandbox, intent))
        claimed = IntentEvent.objects.filter(intent=intent, action="intent.claimed").count()
        if intent.state == "cancelled":
            assert (sent, claimed, sorted(results[1:])) == (0, 0, [0, 0, 0, 0])
            assert isinstance(results[0], Draft)
        else:
            assert (intent.state, sent, claimed) == ("accepted", 1, 1)
            assert results[0] == "undo_too_late" and sorted(results[1:]) in ([0] * 4, [0, 0, 0, 1])
        outcomes.append(intent.state)
    assert set(outcomes) <= {"cancelled", "accepted"}


def test_undo_waits_for_a_claimer_holding_the_row_and_then_is_refused(live):
    """The claim holds the row (FOR UPDATE) when the undo arrives: the undo waits for it, then
    sees the claimed state, never a queued one."""
    from tests.intents.helpers import blocked_on_a_lock

    with_hold(live, 1)
    intent = live.approved()
    sleep_until(intent.hold_until)
    time.sleep(0.05)
    result = {}

    def undoer():
        try:
            undo(live, intent)
            result["undo"] = "won"
        except errors.IntentError as refused:
            result["undo"] = refused.code

    with transaction.atomic():
        # The claim's own locking read, then its lease, in one transaction kept open.
        list(SendIntent.objects.select_for_update().filter(pk=intent.pk))
        thread = threading.Thread(target=undoer)
        thread.start()
        assert blocked_on_a_lock()
        [claim] = sending.intent_claim(worker="w", intent_id=intent.pk)
    thread.join(10)
    assert result["undo"] == "undo_too_late"
    assert with_state(intent).state == "sending"
    assert claim.intent_id == intent.pk


def test_the_after_hold_task_sends_once_when_the_window_ends(live):
    with_hold(live, 1)
    intent = live.approved()
    assert tasks.execute_intent_after_hold(intent.pk) == 1
    intent.refresh_from_db()
    assert intent.state == "accepted"
    assert len(sends(live.sandbox, intent)) == 1


def test_the_after_hold_task_sends_nothing_after_an_undo(live):
    with_hold(live, 2)
    intent = live.approved()
    done = {}
    thread = threading.Thread(
        target=lambda: done.setdefault("n", tasks.execute_intent_after_hold(intent.pk))
    )
    thread.start()
    undo(live, intent)
    thread.join(10)
    assert done["n"] == 0
    assert calls(live.sandbox, intent) == []


# --- who may undo, and bad input -----------------------------------------------------------------


def test_any_approver_of_the_mailbox_may_undo(live, member_of):
    with_hold(live, 30)
    colleague = member_of(live.tenant, "approver").user
    intent = live.approved()
    draft = undo(live, intent, actor=colleague)
    assert draft.status == "pending"
    event = IntentEvent.objects.get(intent=intent, action="intent.undone")
    assert event.actor_user == colleague


@pytest.mark.parametrize(
    ("role", "kwargs"), [("viewer", {}), ("approver", {"approve_all_mailboxes": False})]
)
def test_a_viewer_or_an_approver_without_the_right_cannot_undo(live, member_of, role, kwargs):
    with_hold(live, 30)
    outsider = member_of(live.tenant, role, **kwargs).user
    intent = live.approved()
    with pytest.raises(errors.NoRight):
        undo(live, intent, actor=outsider)
    assert with_state(intent).state == "queued"
    assert not IntentEvent.objects.filter(intent=intent, action="intent.undone").exists()


def test_another_tenants_send_is_not_found(live, tenant_b, member_of):
    with_hold(live, 30)
    intent = live.approved()
    other = member_of(tenant_b, "admin").user
    for intent_id in (intent.pk, "abc", None, 10**12):
        with pytest.raises(errors.NotFound):
            services.intent_undo(tenant=tenant_b, intent_id=intent_id, actor=other)
    assert with_state(intent).state == "queued"


def test_undo_keeps_the_author_so_four_eyes_lets_the_approver_approve_again(live, member_of):
    with_hold(live, 30)
    Tenant.objects.filter(pk=live.tenant.pk).update(second_approver_on_edit=True)
    live.tenant.refresh_from_db()
    writer = member_of(live.tenant, "approver").user
    intent = live.approved(actor_user=writer)
    draft = undo(live, intent)
    copy = DraftVersion.objects.get(draft=draft, number=2)
    assert (copy.author_kind, copy.author_user) == ("person", writer)
    again = services.draft_approve(
        tenant=live.tenant,
        draft_id=draft.pk,
        version=2,
        content_hash=copy.content_hash,
        actor=live.approver,
    )
    assert again.pk != intent.pk and again.idempotency_key != intent.idempotency_key


def test_undo_twice_is_refused_the_second_time(live):
    with_hold(live, 30)
    intent = live.approved()
    undo(live, intent)
    with pytest.raises(errors.IntentError) as refused:
        undo(live, intent)
    assert refused.value.code == "undo_not_sent"
    assert "nothing was sent" in refused.value.message
    assert DraftVersion.objects.filter(draft=intent.draft_id).count() == 2
    assert calls(live.sandbox, intent) == []


def test_an_undo_that_lost_to_a_colleagues_cancel_names_them_and_when(live, member_of):
    """Found by probe 4 (two approvers): the undo that came second was told only that the send
    is cancelled and nothing was sent, not who stopped it or when."""
    with_hold(live, 30)
    ana = member_of(live.tenant, "approver", user__full_name="Ana Lima").user
    intent = live.approved()
    services.intent_cancel(tenant=live.tenant, intent_id=intent.pk, actor=ana)

    with pytest.raises(errors.IntentError) as refused:
        undo(live, intent)

    event = IntentEvent.objects.get(intent=intent, action="intent.cancelled")
    assert refused.value.code == "undo_not_sent"
    assert refused.value.message == (
        f"Ana Lima cancelled send #{intent.pk} at {zoned(event.created_at, 'j M, H:i')}: "
        "nothing was sent."
    )


def test_an_undo_that_lost_to_a_colleagues_undo_names_them_and_when(live, member_of):
    with_hold(live, 30)
    ana = member_of(live.tenant, "approver", user__full_name="Ana Lima").user
    intent = live.approved()
    undo(live, intent, actor=ana)

    with pytest.raises(errors.IntentError) as refused:
        undo(live, intent)

    event = IntentEvent.objects.get(intent=intent, action="intent.undone")
    assert refused.value.message == (
        f"Ana Lima undid send #{intent.pk} at {zoned(event.created_at, 'j M, H:i')}: "
        "nothing was sent."
    )


# --- not_after inside the undo window ------------------------------------------------------------


def test_undo_after_not_after_passed_keeps_it_and_a_reapproval_is_refused(live):
    """The undo window outlasts the agent's not_after, which passes while the send is held; the
    approver undoes it. The undo stops the send; it does not extend the agent's send-by time:
    the draft keeps it, so approving the copied version again is refused and nothing goes out
    (it was cleared, and an ordinary re-approval sent the reply after its send-by time)."""
    with_hold(live, 120)
    intent = approve(live, draft_sending_by(live, db_now() + timedelta(minutes=10)))
    not_after_passes(intent)
    agents_not_after = Draft.objects.get(pk=intent.draft_id).not_after

    draft = undo(live, intent)

    assert (draft.status, draft.current_version) == ("pending", 2)
    assert draft.not_after == agents_not_after
    with_hold(live, 0)
    with pytest.raises(errors.NotPending) as refused:
        approve(live, draft)
    assert refused.value.code == "not_after_passed"
    assert not SendIntent.objects.filter(draft=draft).exclude(pk=intent.pk).exists()
    assert step_now() == 0
    tasks.sweep_once()
    assert sends(live.sandbox, intent) == []
    assert live.sandbox.ledger(inbox_id=live.mailbox.inbox_id) == []


def test_undo_of_a_send_that_expired_inside_its_window_says_nothing_was_sent(live):
    """The sweep expired the held send (its not_after passed inside the undo window). An undo
    clicked then, still inside the window, is refused saying nothing was sent: not "too late,
    it is on its way"."""
    with_hold(live, 120)
    intent = approve(live, draft_sending_by(live, db_now() + timedelta(minutes=10)))
    not_after_passes(intent)
    tasks.sweep_once()
    assert with_state(intent).state == "expired"
    events = IntentEvent.objects.count()

    with pytest.raises(errors.IntentError) as refused:
        undo(live, intent)

    assert refused.value.code == "undo_not_sent"
    assert refused.value.message == (
        f"Nothing to undo: send #{intent.pk} is expired and nothing was sent."
    )
    assert IntentEvent.objects.count() == events
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"
    assert step_now() == 0
    assert calls(live.sandbox, intent) == []
