"""The worker's rounds (``run_rounds``, what ``intents_worker`` and the ``drain`` task run): the
next batch is claimed and begun while the calls of the one before it are at the provider, and a
call that could not start inside its lease is not made. Every test counts the sandbox's ledger."""

from __future__ import annotations

import dataclasses
import time

import pytest
from django.db.models import Max, Min

from intents import sending
from intents.models import ProviderThrottle, SendAttempt, SendIntent
from intents.sending.lease import CALL_TOO_LATE
from tests.intents.helpers import run_concurrently

pytestmark = pytest.mark.django_db(transaction=True)

State = SendIntent.State


def _sends(live, intent) -> int:
    return len(live.sandbox.ledger(idempotency_key=intent.idempotency_key))


def _approved(live, n: int) -> list[SendIntent]:
    return [live.approved(to=[f"customer{i}@example.com"]) for i in range(n)]


def test_the_next_batch_is_begun_while_the_calls_of_the_one_before_are_out(live):
    intents = _approved(live, 6)
    live.sandbox.config(latency_ms=400)

    done = sending.run_rounds(worker="rounds", limit=3)

    assert done == 6
    assert [_sends(live, i) for i in intents] == [1] * 6
    assert set(SendIntent.objects.values_list("state", flat=True)) == {State.ACCEPTED}
    # Batches are claimed oldest first: the first three intents, then the last three.
    first = SendAttempt.objects.filter(intent__in=intents[:3])
    second = SendAttempt.objects.filter(intent__in=intents[3:])
    # The second batch's attempt rows were committed before the first batch's calls had
    # answered (each takes 400 ms here); one batch at a time, they would come after.
    began_second = second.aggregate(t=Min("started_at"))["t"]
    first_answered = first.aggregate(t=Max("finished_at"))["t"]
    assert began_second < first_answered
    # And no call went out before its own attempt row: every row is one accepted call.
    assert SendAttempt.objects.filter(outcome=SendAttempt.Outcome.ACCEPTED).count() == 6


def test_most_bounds_the_rounds_and_nothing_due_ends_them(live):
    intents = _approved(live, 5)

    assert sending.run_rounds(worker="rounds", limit=2, most=3) == 3
    assert sum(_sends(live, i) for i in intents) == 3
    assert sending.run_rounds(worker="rounds", limit=2) == 2
    assert sending.run_rounds(worker="rounds", limit=2) == 0
    assert [_sends(live, i) for i in intents] == [1] * 5


def test_no_time_left_still_runs_one_round_and_claims_no_other(live):
    """``intents_worker`` gives its rounds the time left before its next sweep, which may be
    none at all: one round still goes (as one ``run_once`` did), never a second."""
    intents = _approved(live, 3)

    assert sending.run_rounds(worker="rounds", limit=2, for_seconds=0) == 2
    assert [_sends(live, i) for i in intents] == [1, 1, 0]
    assert SendIntent.objects.get(pk=intents[2].pk).attempts == 0


def test_a_stop_during_a_claim_hands_that_batch_back_and_finishes_the_one_in_flight(live):
    intents = _approved(live, 4)
    asked = []

    def stopping() -> bool:
        # Asked before and after each claim (both batches are full, so never in between):
        # the stop arrives right after the second batch was claimed.
        asked.append(True)
        return len(asked) >= 4

    assert sending.run_rounds(worker="rounds", limit=2, stopping=stopping) == 2

    for intent in intents:
        intent.refresh_from_db()
    assert [i.state for i in intents] == [State.ACCEPTED] * 2 + [State.QUEUED] * 2
    assert [_sends(live, i) for i in intents] == [1, 1, 0, 0]
    # Handed back as if never claimed: no attempt counted, no lease left.
    assert [(i.attempts, i.lease_token) for i in intents[2:]] == [(0, None), (0, None)]
    assert not SendAttempt.objects.filter(intent__in=intents[2:]).exists()


def test_a_call_that_could_not_start_inside_its_lease_is_not_made(live):
    intent = live.approved()
    (claim,) = sending.intent_claim(worker="late", limit=1)
    late = dataclasses.replace(claim, call_by=time.monotonic() - 0.001)

    assert sending.execute_claims([late]) == [State.QUEUED]

    assert _sends(live, intent) == 0
    attempt = SendAttempt.objects.get(intent=intent)
    assert (attempt.outcome, attempt.error_code) == (SendAttempt.Outcome.RETRY, CALL_TOO_LATE)
    assert attempt.finished_at is not None
    intent.refresh_from_db()
    assert intent.last_error_code == CALL_TOO_LATE
    # The journal says so in words a reviewer reads, the fixed reason kept in the tooltip.
    from review.journal_words import reason_words

    event = intent.events.get(action="intent.retry_scheduled")
    assert "too many calls ahead of this one" in reason_words(event)
    # The attempt row says the same, so the page shows it once.
    assert attempt.error_detail == event.reason == intent.last_error_detail
    # Nothing reached the provider, so the retry is a plain send under the same key.
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=attempt.started_at)
    assert sending.run_rounds(worker="again", limit=1) == 1
    intent.refresh_from_db()
    assert intent.state == State.ACCEPTED
    assert _sends(live, intent) == 1


def test_a_reconciliation_whose_lookup_is_too_late_stays_uncertain_uncalled(live):
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(state=State.UNCERTAIN, attempts=1)
    (claim,) = sending.intent_claim_uncertain(worker="late", limit=1)
    late = dataclasses.replace(claim, call_by=time.monotonic() - 0.001)
    calls_before = len(live.sandbox.requests())

    assert sending.execute_claims([late]) == [State.UNCERTAIN]

    assert len(live.sandbox.requests()) == calls_before
    attempt = SendAttempt.objects.get(intent=intent)
    # Nothing was asked, so nothing is uncertain about the lookup itself: a retry.
    assert (attempt.outcome, attempt.error_code) == (SendAttempt.Outcome.RETRY, CALL_TOO_LATE)


def test_calls_queued_on_the_pool_past_their_deadline_are_not_made(live, settings):
    """Through the real pool: more calls than its threads, each slow enough that the last ones
    would start after their claim's deadline (half of a 3 s lease here: the claim and the
    re-check have 1.5 s, the first calls end after 1.8 s)."""
    from intents.sending.worker import _call_pool

    threads = _call_pool()._max_workers
    intents = _approved(live, threads + 2)
    settings.SEND_LEASE_SECONDS = 3
    settings.AGENTMAIL_READ_TIMEOUT = 5
    live.sandbox.config(latency_ms=1800)

    claims = sending.intent_claim(worker="queued", limit=len(intents))
    states = sending.execute_claims(claims)

    assert sorted(states).count(State.ACCEPTED) == threads
    sent = [_sends(live, i) for i in intents]
    assert sent.count(1) == threads and sent.count(0) == 2
    skipped = SendAttempt.objects.filter(error_code=CALL_TOO_LATE)
    assert skipped.count() == 2
    assert {a.intent.state for a in skipped} == {State.QUEUED}


def _late(claims):
    return [dataclasses.replace(c, call_by=time.monotonic() - 0.001) for c in claims]


def test_calls_not_made_do_not_count_against_the_keys_circuit(live, settings):
    """Nothing reached AgentMail: the key's circuit breaker must not read a skipped call as the
    provider failing (a slow but working provider, calls queued past their deadline, opened it)."""
    settings.SEND_CIRCUIT_FAILURES = 2
    intents = _approved(live, 3)
    claims = sending.intent_claim(worker="late", limit=3)

    assert sending.execute_claims(_late(claims)) == [State.QUEUED] * 3

    assert [_sends(live, i) for i in intents] == [0, 0, 0]
    (row,) = ProviderThrottle.objects.all()
    assert (row.circuit, row.consecutive_failures) == (ProviderThrottle.Circuit.CLOSED, 0)


def test_a_send_not_made_uses_up_no_attempt(live, settings):
    """As a hand-back or a release: a call never made is not one of the send's attempts, so a
    worker's backlog cannot fail a reply for max_attempts that AgentMail never saw."""
    settings.SEND_MAX_ATTEMPTS = 1
    intent = live.approved()
    (claim,) = sending.intent_claim(worker="late", limit=1)

    assert sending.execute_claims(_late([claim])) == [State.QUEUED]

    intent.refresh_from_db()
    assert (intent.state, intent.attempts) == (State.QUEUED, 0)
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=intent.created_at)
    assert sending.run_rounds(worker="again", limit=1) == 1
    intent.refresh_from_db()
    assert intent.state == State.ACCEPTED
    assert _sends(live, intent) == 1


def test_a_lookup_not_made_does_not_hand_the_intent_to_a_person(live, settings):
    """A reconciliation past its attempts whose lookup was skipped stays uncertain, its count
    unchanged: a lookup that never ran says nothing about the send."""
    settings.SEND_MAX_ATTEMPTS = 2
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(state=State.UNCERTAIN, attempts=4)
    (claim,) = sending.intent_claim_uncertain(worker="late", limit=1)

    assert sending.execute_claims(_late([claim])) == [State.UNCERTAIN]

    intent.refresh_from_db()
    assert (intent.state, intent.attempts) == (State.UNCERTAIN, 4)
    assert SendAttempt.objects.get(intent=intent).kind == SendAttempt.Kind.LOOKUP


def test_a_reply_only_rounds_calls_do_not_queue_behind_the_general_rounds_calls(live, settings):
    """``intents_worker --reply-threads``: the reply lane's calls went to the same per-process
    pool as the general loops' and waited behind up to two of their batches (here one batch of
    two rounds of calls, 1 s each): the reply was answered after the general batch's last call,
    not alongside its first."""
    from intents.sending.worker import _call_pool

    threads = _call_pool()._max_workers
    settings.SEND_RATE_PER_KEY = 1000
    settings.SEND_BURST_PER_KEY = 1000
    settings.SEND_LEASE_SECONDS = 20
    settings.AGENTMAIL_READ_TIMEOUT = 5
    general = _approved(live, 2 * threads)
    live.sandbox.config(latency_ms=1000)
    replies: list[SendIntent] = []

    def loop(i: int) -> int:
        if i == 0:
            return sending.run_rounds(worker="general", limit=2 * threads, most=2 * threads)
        # The reply is approved once every general call is on the pool, then sent by a
        # reply-only round, as a --reply-threads loop does.
        deadline = time.monotonic() + 30
        while SendAttempt.objects.filter(outcome="pending").count() < 2 * threads:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        replies.append(live.approved(to=["asker@example.com"]))
        return sending.run_rounds(worker="replies", limit=1, replies_only=True)

    assert run_concurrently(loop, 2) == [2 * threads, 1]

    (reply,) = replies
    assert _sends(live, reply) == 1
    assert [_sends(live, i) for i in general] == [1] * (2 * threads)
    answered = SendAttempt.objects.get(intent=reply).finished_at
    general_answered = SendAttempt.objects.filter(intent__in=general).aggregate(
        t=Max("finished_at")
    )["t"]
    assert answered < general_answered
