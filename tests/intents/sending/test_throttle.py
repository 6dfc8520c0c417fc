"""The circuit breaker must not hold a recovered provider's backlog for the probe's whole lease.

Found by `python -m bench --only recovery` (BENCHMARKS.md): while a half-open probe was in flight,
every other due intent of the key was postponed until the probe's lease expiry (60 s), so sending
stalled for up to a minute after the provider came back.
"""

import time

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from intents import sending
from intents.models import ProviderThrottle, SendIntent

pytestmark = pytest.mark.django_db(transaction=True)


def test_others_wait_for_the_probe_by_the_cooldown_not_the_lease(live, settings):
    settings.SEND_CIRCUIT_FAILURES = 1
    settings.SEND_CIRCUIT_COOLDOWN_SECONDS = 0.5
    settings.SEND_LEASE_SECONDS = 60
    first, *backlog = [live.approved(subject=f"Order {i}") for i in range(4)]
    live.sandbox.fault("sends", "503_before", times=1)
    assert sending.run_once(worker="w", limit=1) == 1  # one 503 opens the circuit
    assert ProviderThrottle.objects.get().circuit == ProviderThrottle.Circuit.OPEN
    # End the cool-down by the database clock (the one the claim reads) instead of sleeping past
    # it: a sleep of 0.6 s against 0.5 s raced the clocks on a loaded machine.
    ProviderThrottle.objects.update(opened_until=Now())
    SendIntent.objects.filter(pk=first.pk).update(next_attempt_at=Now())

    [probe] = sending.intent_claim(worker="probe", limit=1)
    assert ProviderThrottle.objects.get().circuit == ProviderThrottle.Circuit.HALF_OPEN
    assert sending.intent_claim(worker="other", limit=5) == []
    others = SendIntent.objects.filter(pk__in=[i.pk for i in backlog]).exclude(pk=probe.intent_id)
    waits = [(i.next_attempt_at - timezone.now()).total_seconds() for i in others]
    assert len(waits) == 2
    assert max(waits) <= settings.SEND_CIRCUIT_COOLDOWN_SECONDS

    assert sending.execute_claim(probe) == "accepted"
    deadline = time.monotonic() + 10
    while SendIntent.objects.filter(pk__in=[i.pk for i in backlog], state="accepted").count() < 3:
        assert time.monotonic() < deadline, "backlog not sent after the probe closed the circuit"
        sending.run_once(worker="other", limit=5)
        time.sleep(0.05)
    assert [len(live.sandbox.ledger(idempotency_key=i.idempotency_key)) for i in backlog] == [
        1,
        1,
        1,
    ]
