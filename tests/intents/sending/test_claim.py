"""A claim that waited for a throttle row must judge the bucket by a clock read after the wait.

Another claimer that held the row wrote ``refilled_at`` from its own, later, clock reading. Judged
by the clock read before the wait, that refill looks like a 429's pause: the claim skipped the
intent and postponed it, though the bucket was full (found by profiling the dispatch benchmark).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.db.models.functions import Now

from intents import sending
from intents.models import ProviderThrottle, SendIntent
from tests.intents.helpers import blocked_on_a_lock, held_open

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


def queue_in_order(live, boxes: list) -> list[SendIntent]:
    """One due intent per mailbox given, in that order of due time."""
    intents = [live.approved(mailbox=box, subject=f"Order {i}") for i, box in enumerate(boxes)]
    for i, intent in enumerate(intents):
        SendIntent.objects.filter(pk=intent.pk).update(
            next_attempt_at=Now() - timedelta(minutes=len(intents) - i)
        )
    return intents


@pytest.mark.parametrize(
    ("order", "after"),
    [
        # The oldest two are the empty key's: the claim reads further (up to 3 x its limit),
        # leases the next two of the other key and postpones each of the empty key's it passed.
        ("EEFEFF", ["later", "later", "sending", "later", "sending", "queued"]),
        # The same, when the other key is among the first two already.
        ("EFEFFE", ["later", "sending", "later", "sending", "queued", "queued"]),
    ],
)
def test_a_key_without_budget_does_not_starve_the_others(
    live, mailbox_factory, settings, order, after
):
    settings.SEND_RATE_PER_KEY = 0.01
    settings.SEND_BURST_PER_KEY = 10
    boxes = {"E": live.mailbox, "F": mailbox_factory(live.tenant)}
    ProviderThrottle.objects.create(
        key_ref=sending.throttle_key(boxes["E"]), tokens=0, refilled_at=Now()
    )
    intents = queue_in_order(live, [boxes[c] for c in order])

    claims = sending.intent_claim(worker="w", limit=2)

    states = dict(SendIntent.objects.values_list("pk", "state"))
    later = set(SendIntent.objects.filter(next_attempt_at__gt=Now()).values_list("pk", flat=True))
    seen = [
        "later" if i.pk in later and states[i.pk] == "queued" else states[i.pk] for i in intents
    ]
    assert seen == after
    assert sorted(c.intent_id for c in claims) == sorted(
        i.pk for i, state in zip(intents, after, strict=True) if state == "sending"
    )


def test_a_claim_whose_keys_have_budget_locks_only_what_it_leases(live, settings):
    # Locked but not leased, the rest of a claim's candidates were written for nothing (a row
    # lock each) and skipped by every other claimer until the claim committed.
    settings.SEND_RATE_PER_KEY = settings.SEND_BURST_PER_KEY = 100
    queue_in_order(live, [live.mailbox] * 6)
    outcome: list = []
    with (
        held_open(lambda: sending.intent_claim(worker="w", limit=2), outcome),
        transaction.atomic(),
    ):
        free = list(
            SendIntent.objects.select_for_update(skip_locked=True)
            .filter(state="queued")
            .values_list("pk", flat=True)
        )
    assert len(outcome[0]) == 2
    assert len(free) == 4
