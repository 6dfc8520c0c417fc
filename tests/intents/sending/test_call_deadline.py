"""A worker's batch is not held by one call whose answer comes a byte at a time: the call ends at
its deadline (connect + read timeouts, mailboxes.provider.deadline) as uncertain, the rest of the
batch is recorded, and the replay with the same key finds the send made. Before, the worker waited
for the dripped answer to end, and with it the whole batch (its records wait for every call) and
the lease arithmetic, which counts on a call ending within those two timeouts."""

import time

import pytest
from django.db.models.functions import Now

from intents import sending
from intents.models import SendAttempt, SendIntent

pytestmark = pytest.mark.django_db(transaction=True)

# The sandbox's answer (about 400 bytes) dripped at this pace takes about 40 s.
DRIP_SECONDS = 0.1
BOUND = 10.0


@pytest.fixture
def short_calls(fast_send):
    fast_send.AGENTMAIL_CONNECT_TIMEOUT = 0.3  # with fast_send's read timeout of 1 s: 1.3 s a call
    return fast_send


def test_a_dripped_answer_holds_its_batch_no_longer_than_the_call_deadline(live, short_calls):
    intents = [live.approved(to=[f"customer{n}@example.com"]) for n in range(3)]
    live.sandbox.fault("sends", "drip_after", delay=DRIP_SECONDS)
    started = time.monotonic()
    assert sending.run_rounds(worker="w", limit=3, most=3) == 3
    assert time.monotonic() - started < BOUND
    states = {}
    for intent in intents:
        intent.refresh_from_db()
        states[intent.pk] = intent.state
    assert sorted(states.values()) == ["accepted", "accepted", "uncertain"]
    dripped = next(i for i in intents if states[i.pk] == "uncertain")
    attempt = SendAttempt.objects.get(intent=dripped)
    assert (attempt.outcome, attempt.error_code) == ("uncertain", "ReadTimeout")

    # The replay with the same key adopts the send the provider made: one send each in all.
    SendIntent.objects.filter(pk=dripped.pk).update(next_attempt_at=Now())
    sending.run_once(worker="w", limit=1)
    dripped.refresh_from_db()
    assert dripped.state == "accepted"
    for intent in intents:
        assert len(live.sandbox.ledger(idempotency_key=intent.idempotency_key)) == 1
