"""A broadcast's approval gets the tenant's undo window, as a reply's does: no send of it exists
before the window ends (database clock), and an approver may take the approval back until then.
On real PostgreSQL, with the real worker loop (a subprocess) against the sandbox over HTTP; every
test counts what the sandbox's ledger received."""

import time

import pytest

from config.clock import db_now
from intents import errors, tasks
from intents.models import Broadcast, IntentEvent, SendIntent
from intents.sending.fanout import broadcast_run
from intents.sending.sweep import seconds_until_next_due
from intents.services.broadcast_controls import (
    broadcast_cancel,
    broadcast_pause,
    broadcast_undo,
)
from intents.services.broadcasts import broadcast_approve, broadcast_create
from tenants.models import Tenant
from tests.intents.conftest import start_worker, wait_until_polling
from tests.intents.helpers import drain_sends, run_concurrently

pytestmark = pytest.mark.django_db(transaction=True)

RECIPIENTS = 3


def with_hold(live, seconds):
    Tenant.objects.filter(pk=live.tenant.pk).update(send_hold_seconds=seconds)
    live.tenant.refresh_from_db()
    return live


def create(live, subject="Your order is delayed"):
    return broadcast_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        subject=subject,
        text="Hello {{ name }}, it ships next week.",
        recipients=[
            {"address": f"customer{i}@example.com", "variables": {"name": f"Kunde {i}"}}
            for i in range(RECIPIENTS)
        ],
    )


def approve(live, broadcast, actor=None):
    return broadcast_approve(
        tenant=live.tenant,
        broadcast_id=broadcast.pk,
        content_hash=broadcast.content_hash,
        actor=actor or live.approver,
    )


def undo(live, broadcast, actor=None):
    return broadcast_undo(
        tenant=live.tenant, broadcast_id=broadcast.pk, actor=actor or live.approver
    )


def sent(live, broadcast):
    """What the sandbox accepted for this broadcast (its sends' keys are derived from its id and
    the address, so a later approval's sends are counted too)."""
    keys = set(
        SendIntent.objects.filter(broadcast=broadcast).values_list("idempotency_key", flat=True)
    )
    return [s for s in live.sandbox.ledger() if s.get("idempotency_key") in keys]


def sleep_until(moment, margin=0.0):
    left = (moment - db_now()).total_seconds() - margin
    if left > 0:
        time.sleep(left)


def actions(broadcast):
    return list(
        IntentEvent.objects.filter(broadcast=broadcast)
        .order_by("id")
        .values_list("action", flat=True)
    )


def fresh(broadcast):
    return Broadcast.objects.get(pk=broadcast.pk)


# --- the window ----------------------------------------------------------------------------------


def test_the_approval_fixes_the_window_and_nothing_is_made_inside_it(live):
    with_hold(live, 10)
    b = approve(live, create(live))
    assert (b.hold_until - b.approved_at).total_seconds() == 10
    with_hold(live, 300)  # a later change of the setting does not move it
    broadcast_run(b.pk)
    drain_sends(1)
    assert fresh(b).hold_until == b.hold_until
    assert (fresh(b).state, fresh(b).fanout_position) == ("approved", -1)
    assert not SendIntent.objects.filter(broadcast=b).exists()
    assert 8 < seconds_until_next_due() <= 10
    approved = IntentEvent.objects.get(broadcast=b, action="broadcast.approved")
    assert approved.data["hold_until"] == b.hold_until.isoformat()


def test_undo_inside_the_window_sends_nothing_and_puts_it_back_in_review(live, member_of):
    with_hold(live, 10)
    b = approve(live, create(live))
    colleague = member_of(live.tenant, "approver").user  # any approver of the mailbox may
    undone = undo(live, b, actor=colleague)
    assert (undone.state, undone.approved_by, undone.approved_hash, undone.hold_until) == (
        "pending_review",
        None,
        "",
        None,
    )
    row = IntentEvent.objects.get(broadcast=b, action="broadcast.approval_undone")
    assert (row.actor_user, row.from_state, row.to_state) == (
        colleague,
        "approved",
        "pending_review",
    )
    assert row.data["content_hash"] == b.content_hash and 0 < row.data["seconds_left"] <= 10
    broadcast_run(b.pk)
    drain_sends(1)
    assert not SendIntent.objects.filter(broadcast=b).exists()
    assert sent(live, b) == []
    # A fresh approval is needed, and works as any first one.
    with_hold(live, 0)
    approve(live, fresh(b))
    broadcast_run(b.pk)
    drain_sends()
    assert len(sent(live, b)) == RECIPIENTS


def test_undo_of_a_broadcast_paused_inside_its_window(live):
    with_hold(live, 10)
    b = approve(live, create(live))
    broadcast_pause(tenant=live.tenant, broadcast_id=b.pk, actor=live.approver)
    assert undo(live, b).state == "pending_review"
    assert actions(b)[-2:] == ["broadcast.paused", "broadcast.approval_undone"]


def test_undo_after_the_window_is_refused_and_changes_nothing(live):
    with_hold(live, 1)
    b = approve(live, create(live))
    sleep_until(b.hold_until)
    time.sleep(0.05)
    before = IntentEvent.objects.count()
    with pytest.raises(errors.NotPending) as refused:
        undo(live, b)
    assert refused.value.code == "undo_too_late"
    assert "Too late to undo" in refused.value.message
    assert IntentEvent.objects.count() == before
    assert fresh(b).state == "approved"
    broadcast_run(b.pk)
    drain_sends()
    assert len(sent(live, b)) == RECIPIENTS
    with pytest.raises(errors.NotPending) as again:
        undo(live, b)
    assert again.value.code == "undo_too_late"


def test_undo_after_the_window_of_a_broadcast_paused_inside_it_says_it_is_paused(live):
    """Paused inside its window, nothing of the broadcast goes out after it closes; a late undo
    said its sends were on their way and to pause it, of a paused broadcast."""
    with_hold(live, 1)
    b = approve(live, create(live))
    broadcast_pause(tenant=live.tenant, broadcast_id=b.pk, actor=live.approver)
    sleep_until(b.hold_until)
    time.sleep(0.05)
    broadcast_run(b.pk)
    before = IntentEvent.objects.count()

    with pytest.raises(errors.NotPending) as refused:
        undo(live, b)

    assert refused.value.code == "undo_too_late"
    assert refused.value.message == (
        "Too late to undo: the undo window of this broadcast has closed. It is paused: cancel "
        "it to send nothing more, or resume it to send the rest."
    )
    assert IntentEvent.objects.count() == before
    assert fresh(b).state == "paused"
    assert sent(live, b) == []


def test_a_window_of_zero_fans_out_at_once_and_has_nothing_to_undo(live):
    with_hold(live, 0)
    b = approve(live, create(live))
    assert b.hold_until is None
    broadcast_run(b.pk)
    assert SendIntent.objects.filter(broadcast=b).count() == RECIPIENTS
    with pytest.raises(errors.NotPending) as refused:
        undo(live, b)
    assert refused.value.code == "undo_no_window"
    drain_sends()
    assert len(sent(live, b)) == RECIPIENTS


def test_a_second_undo_names_who_undid_it_first(live, member_of):
    with_hold(live, 10)
    b = approve(live, create(live))
    undo(live, b)
    with pytest.raises(errors.NotPending) as refused:
        undo(live, b, actor=member_of(live.tenant, "approver").user)
    assert "undid the approval of this broadcast at" in refused.value.message
    assert live.approver.display_name in refused.value.message


def test_undo_of_a_cancelled_broadcast_names_the_cancellation(live):
    with_hold(live, 10)
    b = approve(live, create(live))
    broadcast_cancel(tenant=live.tenant, broadcast_id=b.pk, actor=live.approver)
    with pytest.raises(errors.NotPending) as refused:
        undo(live, b)
    assert "cancelled this broadcast at" in refused.value.message


@pytest.mark.parametrize(
    ("role", "kwargs"), [("viewer", {}), ("approver", {"approve_all_mailboxes": False})]
)
def test_a_viewer_or_an_approver_without_the_right_cannot_undo(live, member_of, role, kwargs):
    with_hold(live, 10)
    b = approve(live, create(live))
    outsider = member_of(live.tenant, role, **kwargs).user
    with pytest.raises(errors.NoRight):
        undo(live, b, actor=outsider)
    assert fresh(b).state == "approved"


def test_another_tenants_broadcast_is_not_found(live, tenant_b, member_of):
    with_hold(live, 10)
    b = approve(live, create(live))
    stranger = member_of(tenant_b, "admin").user
    with pytest.raises(errors.NotFound):
        broadcast_undo(tenant=tenant_b, broadcast_id=b.pk, actor=stranger)
    assert fresh(b).state == "approved"


def test_the_fan_out_task_waits_out_a_short_window_and_leaves_a_long_one_to_the_sweep(live):
    with_hold(live, 2)
    b = approve(live, create(live))
    tasks.fan_out_broadcast(b.pk)
    assert db_now() >= b.hold_until
    assert SendIntent.objects.filter(broadcast=b).count() == RECIPIENTS
    with_hold(live, 300)
    long = approve(live, create(live, subject="Later"))
    started = time.monotonic()
    tasks.fan_out_broadcast(long.pk)
    assert time.monotonic() - started < 5
    assert not SendIntent.objects.filter(broadcast=long).exists()


# --- races at the edge of the window -------------------------------------------------------------


def test_undo_against_the_fan_out_at_the_edge_exactly_one_wins(live):
    """Undo and two fan-outs released together around the window's end, several rounds: each
    round either puts the broadcast back in review with no send made (and none after), or is
    refused and every recipient receives one message."""
    with_hold(live, 1)
    outcomes = []
    for round_ in range(4):
        b = approve(live, create(live, subject=f"edge {round_}"))
        # Rounds straddle the end: some start just before it, some just after.
        sleep_until(b.hold_until, margin=0.03 - round_ * 0.02)

        def racer(i, b=b):
            if i == 0:
                try:
                    return undo(live, b)
                except errors.NotPending as refused:
                    return refused.code
            broadcast_run(b.pk)
            return None

        results = run_concurrently(racer, 3)
        assert not any(isinstance(r, BaseException) for r in results), results
        sleep_until(b.hold_until)
        broadcast_run(b.pk)
        drain_sends()
        b = fresh(b)
        made = SendIntent.objects.filter(broadcast=b).count()
        if b.state == "pending_review":
            assert isinstance(results[0], Broadcast)
            assert (made, len(sent(live, b))) == (0, 0)
        else:
            assert results[0] == "undo_too_late"
            assert (made, len(sent(live, b))) == (RECIPIENTS, RECIPIENTS)
        outcomes.append(b.state)
    assert set(outcomes) <= {"pending_review", "sending", "completed"}


# --- acceptance: the real worker loop over HTTP --------------------------------------------------


def test_a_worker_running_throughout_sends_nothing_inside_the_window_and_all_after_it(live):
    with_hold(live, 3)
    worker = start_worker(
        live.sandbox, "--seconds", "90", "--poll", "0.1", "--sweep-every", "0.3", LOG_LEVEL="INFO"
    )
    try:
        said = wait_until_polling(worker)
        b = approve(live, create(live))
        sleep_until(b.hold_until, margin=0.3)
        assert worker.poll() is None
        inside = (SendIntent.objects.filter(broadcast=b).count(), len(sent(live, b)))
        deadline = time.monotonic() + 60
        while len(sent(live, b)) < RECIPIENTS and time.monotonic() < deadline:
            time.sleep(0.2)
        assert worker.poll() is None
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert worker.returncode == 0, "".join(said)
    assert inside == (0, 0)
    assert len(sent(live, b)) == RECIPIENTS
    made = SendIntent.objects.filter(broadcast=b).values_list("created_at", flat=True)
    assert min(made) >= b.hold_until


def test_undo_inside_the_window_while_a_worker_runs_sends_nothing(live):
    with_hold(live, 4)
    worker = start_worker(
        live.sandbox, "--seconds", "60", "--poll", "0.1", "--sweep-every", "0.3", LOG_LEVEL="INFO"
    )
    try:
        said = wait_until_polling(worker)
        b = approve(live, create(live))
        # The worker sweeps through most of the window before the undo lands near its end.
        sleep_until(b.hold_until, margin=0.8)
        assert worker.poll() is None
        undone = undo(live, b)
        sleep_until(b.hold_until)
        time.sleep(2.0)  # well past the window, the worker still sweeping
        assert worker.poll() is None
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert worker.returncode == 0, "".join(said)
    assert undone.state == "pending_review" == fresh(b).state
    assert not SendIntent.objects.filter(broadcast=b).exists()
    assert sent(live, b) == []
    assert actions(b)[-1] == "broadcast.approval_undone"
