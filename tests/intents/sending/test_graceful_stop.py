"""A worker asked to stop (SIGTERM) finishes or hands back its batch and exits 0; a worker whose
round raises anything goes on with the next round. Every test counts the sandbox's ledger."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from datetime import timedelta

import pytest
from django.db.models.functions import Now

from intents import sending, tasks
from intents.models import IntentEvent, SendAttempt, SendIntent
from tests.intents.conftest import start_worker
from tests.intents.helpers import run_concurrently

pytestmark = pytest.mark.django_db(transaction=True)

State = SendIntent.State


def _sends(live, intent) -> int:
    return len(live.sandbox.ledger(idempotency_key=intent.idempotency_key))


def _wait_until(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _exited(worker, *, timeout: float) -> str:
    """The worker's stderr once it has exited; if it has not within ``timeout``, fail with every
    thread's stack (SIGUSR1, which the worker hands to faulthandler) rather than a bare timeout."""
    try:
        return worker.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        worker.send_signal(signal.SIGUSR1)
        time.sleep(2)
        worker.kill()
        err = worker.communicate()[1]
        pytest.fail(f"the worker did not exit within {timeout} s; its threads:\n{err[-12000:]}")


@pytest.mark.slow
def test_sigterm_mid_batch_finishes_the_batches_in_flight_and_exits_0(live):
    intents = [live.approved(to=[f"customer{i}@example.com"]) for i in range(16)]
    # Each call takes 1.5 s, so the signal lands while both threads' rounds have two batches each
    # at the provider (the next batch is begun while the calls of the one before it are out).
    live.sandbox.config(latency_ms=1500)
    worker = start_worker(
        live.sandbox, "--threads", "2", "--batch", "3", "--poll", "0.1", AGENTMAIL_READ_TIMEOUT=10
    )

    # More than one batch per thread begun (the next claimed while the calls of the one before
    # it are out), every lease with its attempt row: the signal lands with two batches in flight
    # in at least one thread. How many a claim gets depends on its competitor's locked
    # candidates, so the test does not wait for an exact count; it records which were out.
    def settled() -> bool:
        pending = SendAttempt.objects.filter(outcome="pending").count()
        return pending > 6 and SendIntent.objects.filter(state=State.SENDING).count() == pending

    _wait_until(settled)
    out = set(SendAttempt.objects.filter(outcome="pending").values_list("intent_id", flat=True))
    worker.send_signal(signal.SIGTERM)
    err = _exited(worker, timeout=60)
    live.sandbox.config(latency_ms=0)

    assert worker.returncode == 0, err[-2000:]
    accepted = set(SendIntent.objects.filter(state=State.ACCEPTED).values_list("pk", flat=True))
    # Every batch that was out finished and was recorded (a claim racing the signal may have
    # been begun and finished too), each exactly once.
    assert out <= accepted
    assert {i.pk: _sends(live, i) for i in intents if i.pk in accepted} == dict.fromkeys(
        accepted, 1
    )
    # The ones it never claimed (or handed back): queued, no lease, no attempt, no send.
    untouched = SendIntent.objects.exclude(pk__in=accepted)
    assert set(untouched.values_list("state", "lease_token", "attempts")) == {
        (State.QUEUED, None, 0)
    }
    assert not SendAttempt.objects.filter(intent__in=untouched).exists()
    assert all(_sends(live, i) == 0 for i in intents if i.pk not in accepted)
    assert not SendAttempt.objects.filter(outcome="pending").exists()
    # A worker started afterwards sends the rest at once, each exactly once.
    while sending.run_once(worker="next", limit=10):
        pass
    assert set(SendIntent.objects.values_list("state", flat=True)) == {State.ACCEPTED}
    assert [_sends(live, i) for i in intents] == [1] * 16


def test_a_batch_claimed_as_the_stop_arrives_is_handed_back_unsent(live):
    intents = [live.approved(to=[f"customer{i}@example.com"]) for i in range(3)]

    # The stop arrives while the claim is in the database: not set before it, set after it.
    answers = iter([False])
    done = sending.run_once(worker="stopping", limit=3, stopping=lambda: next(answers, True))

    assert done == 0
    rows = SendIntent.objects.order_by("id")
    assert [(r.state, r.lease_token, r.lease_owner, r.attempts) for r in rows] == [
        (State.QUEUED, None, "", 0)
    ] * 3
    assert not SendAttempt.objects.exists()
    assert [_sends(live, i) for i in intents] == [0, 0, 0]
    handed = IntentEvent.objects.filter(action="intent.handed_back")
    assert sorted(handed.values_list("intent_id", "from_state", "to_state")) == [
        (i.pk, State.SENDING, State.QUEUED) for i in intents
    ]
    # Due again at once, not after a lease: the next worker sends each exactly once.
    assert sending.run_once(worker="next", limit=3) == 3
    assert [_sends(live, i) for i in intents] == [1, 1, 1]
    assert set(SendIntent.objects.values_list("attempts", flat=True)) == {1}


def test_hand_back_leaves_a_begun_attempt_and_a_lease_taken_over(live):
    begun, taken, free = (live.approved(to=[f"customer{i}@example.com"]) for i in range(3))
    claims = {c.intent_id: c for c in sending.intent_claim(worker="stopping", limit=3)}
    # One attempt row is committed (its call may be on the way); one lease is another worker's.
    sending.intent_begin_attempt(claims[begun.pk])
    other = uuid.uuid4()
    SendIntent.objects.filter(pk=taken.pk).update(lease_token=other)

    assert sending.intents_hand_back(list(claims.values())) == 1

    by_id = {r.pk: r for r in SendIntent.objects.all()}
    assert (by_id[free.pk].state, by_id[free.pk].lease_token) == (State.QUEUED, None)
    assert (by_id[begun.pk].state, by_id[begun.pk].lease_token) == (
        State.SENDING,
        claims[begun.pk].lease_token,
    )
    assert (by_id[taken.pk].state, by_id[taken.pk].lease_token) == (State.SENDING, other)
    assert [_sends(live, i) for i in (begun, taken, free)] == [0, 0, 0]


@pytest.mark.slow
def test_the_loop_survives_a_round_that_raises_and_sends_the_rest(live, mailbox_factory):
    broken_box = mailbox_factory(live.tenant)
    bad = live.approved(mailbox=broken_box)
    # Its sealed key no longer opens: precheck raises SecretUnreadable (not a database error)
    # for the round that claims it, which used to end the worker thread.
    sealed = broken_box.api_key_sealed
    broken_box.api_key_sealed = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    broken_box.save(update_fields=["api_key_sealed"])
    good = [live.approved(to=[f"customer{i}@example.com"]) for i in range(3)]
    worker = start_worker(
        live.sandbox, "--threads", "1", "--batch", "1", "--poll", "0.1", "--seconds", "60"
    )
    try:
        _wait_until(
            lambda: (
                worker.poll() is not None
                or SendIntent.objects.filter(state=State.ACCEPTED).count() == 3
            )
        )
        alive = worker.poll() is None
        worker.send_signal(signal.SIGTERM)
        err = _exited(worker, timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert alive, err[-2000:]
    assert worker.returncode == 0, err[-2000:]
    assert "intents.worker.round_failed" in err
    assert "SecretUnreadable" in err
    assert [_sends(live, i) for i in good] == [1, 1, 1]
    assert _sends(live, bad) == 0
    assert {SendIntent.objects.get(pk=i.pk).state for i in good} == {State.ACCEPTED}


def test_hand_back_racing_the_sweep_on_an_expired_lease_moves_it_once(live):
    intents = [live.approved(to=[f"customer{i}@example.com"]) for i in range(5)]
    claims = sending.intent_claim(worker="stopping", limit=5)
    # The stopping worker was slow: its leases expired just as it hands them back.
    SendIntent.objects.update(lease_expires_at=Now() - timedelta(seconds=1))

    results = run_concurrently(
        lambda i: sending.intents_hand_back(claims) if i == 0 else tasks.sweep_once(), 2
    )

    assert not [r for r in results if isinstance(r, BaseException)], results
    rows = SendIntent.objects.order_by("id")
    assert [(r.state, r.lease_token) for r in rows] == [(State.QUEUED, None)] * 5
    moves = IntentEvent.objects.filter(action__in=("intent.handed_back", "intent.lease_expired"))
    # Each intent left `sending` once, by one of the two.
    assert sorted(moves.values_list("intent_id", flat=True)) == sorted(i.pk for i in intents)
    assert [_sends(live, i) for i in intents] == [0] * 5


def test_sigusr1_writes_every_threads_stack_and_the_worker_goes_on(live):
    first, second = (live.approved(to=[f"customer{i}@example.com"]) for i in range(2))
    worker = start_worker(live.sandbox, "--threads", "2", "--poll", "0.1", "--seconds", "600")
    try:
        _wait_until(lambda: SendIntent.objects.get(pk=first.pk).state == State.ACCEPTED)
        worker.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        assert worker.poll() is None, "SIGUSR1 ended the worker"
        # Still working after the dump: an intent approved now is sent.
        third = live.approved(to=["customer9@example.com"])
        _wait_until(lambda: SendIntent.objects.get(pk=third.pk).state == State.ACCEPTED)
        worker.send_signal(signal.SIGTERM)
        err = _exited(worker, timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err[-2000:]
    # faulthandler's dump: one block per thread, the two loops' among them.
    assert err.count("(most recent call first)") >= 3, err[-2000:]
    assert "intents_worker.py" in err
    assert [_sends(live, i) for i in (first, second, third)] == [1, 1, 1]


def _tgkill(pid: int, tid: int, sig: int) -> None:
    """Linux's tgkill(2): a signal to one thread of a process (os.kill's go to the process and the
    kernel picks the thread)."""
    import ctypes
    import platform

    number = {"x86_64": 234, "aarch64": 131}[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


def test_a_sigterm_the_kernel_gives_to_another_thread_still_stops_the_worker(live):
    """The case behind a rare 60 s stop timeout: SIGTERM delivered to a thread other than the main
    one, whose handler must still run (on the main thread) and stop the loops."""
    intent = live.approved(to=["customer1@example.com"])
    worker = start_worker(live.sandbox, "--threads", "2", "--poll", "0.1", "--seconds", "120")
    try:
        _wait_until(lambda: SendIntent.objects.get(pk=intent.pk).state == State.ACCEPTED)
        others = [int(t) for t in os.listdir(f"/proc/{worker.pid}/task") if int(t) != worker.pid]
        assert others, "the worker runs its loops in threads"
        _tgkill(worker.pid, others[0], signal.SIGTERM)
        err = _exited(worker, timeout=20)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err[-2000:]
    assert _sends(live, intent) == 1
