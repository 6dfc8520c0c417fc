"""A claim that waited for a throttle row must judge the bucket by a clock read after the wait.

Another claimer that held the row wrote ``refilled_at`` from its own, later, clock reading. Judged
by the clock read before the wait, that refill looks like a 429's pause: the claim skipped the
intent and postponed it, though the bucket was full (found by profiling the dispatch benchmark).
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections, transaction
from django.db.models.functions import Now

from intents import sending
from intents.models import ProviderThrottle, SendIntent
from tests.intents.helpers import blocked_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_refill_by_a_concurrent_claimer_is_not_taken_for_a_pause(intent, local_mailbox, settings):
    settings.SEND_RATE_PER_KEY = 10
    settings.SEND_BURST_PER_KEY = 10
    key = sending.throttle_key(local_mailbox)
    ProviderThrottle.objects.create(key_ref=key, tokens=10, refilled_at=Now())
    claimed: list = []

    def claim() -> None:
        try:
            claimed.extend(sending.intent_claim(worker="second", limit=1))
        finally:
            connections.close_all()

    with transaction.atomic():
        # The first claimer: holds the bucket, then refills it with its own (later) reading.
        ProviderThrottle.objects.select_for_update().get(key_ref=key)
        second = threading.Thread(target=claim)
        second.start()
        assert blocked_on_a_lock(), "the second claim never waited for the row"
        time.sleep(0.05)
        ProviderThrottle.objects.filter(key_ref=key).update(refilled_at=Now())
    second.join(30)

    intent.refresh_from_db()
    assert [c.intent_id for c in claimed] == [intent.pk]
    assert intent.state == SendIntent.State.SENDING
