"""Replay storm (reference §2.6 W2): distinct signed events (1,000 at full size, 400 in the
suite), each posted 3 times from 8 threads, duplicates partly racing each other → one ledger row
each, each event applied once."""

from __future__ import annotations

import json
import queue
import random
import threading
import time
from collections import Counter

import pytest
from django.db import connections
from django.test import Client

from intents.models import IntentEvent, Suppression
from tests.factories import UserFactory
from tests.sizes import size
from tests.webhooks.conftest import delivery_payload, new_svix_id
from webhooks.models import RecipientDelivery, WebhookEvent

INTENTS = size(100, 250)
THREADS = 8
COPIES = 3


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_replay_storm_stores_and_applies_each_event_once(
    tenant_a, hook_for, mailbox_row, intent_row
):
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a)
    approver = UserFactory()
    intents = [
        intent_row(
            mailbox, to=[f"a{i}@customer.test"], cc=[f"b{i}@customer.test"], approver=approver
        )
        for i in range(INTENTS)
    ]
    events = []
    for i, intent in enumerate(intents):
        events += [
            delivery_payload("sent", intent),
            delivery_payload("delivered", intent),
            delivery_payload("bounced", intent, recipients=[f"b{i}@customer.test"]),
            delivery_payload("complained", intent, recipients=[f"a{i}@customer.test"]),
        ]
    bodies = [(new_svix_id(), json.dumps(p, separators=(",", ":"))) for p in events]
    rng = random.Random(6)
    rng.shuffle(bodies)
    # Half the events arrive as a burst of adjacent copies (taken by different threads at once),
    # the other half with their copies scattered through the storm.
    bursts = [copy for item in bodies[: len(bodies) // 2] for copy in [item] * COPIES]
    scattered = [item for item in bodies[len(bodies) // 2 :] for _ in range(COPIES)]
    rng.shuffle(scattered)
    work: queue.Queue = queue.Queue()
    for pair in zip(bursts, scattered, strict=False):
        work.put(pair[0])
        work.put(pair[1])
    for item in bursts[len(scattered) :] + scattered[len(bursts) :]:
        work.put(item)
    results: list[tuple[int, bool, float]] = []
    lock = threading.Lock()

    def worker():
        client = Client()
        try:
            while True:
                try:
                    svix_id, body = work.get_nowait()
                except queue.Empty:
                    return
                started = time.perf_counter()
                response = hook.post_raw(client, body.encode(), hook.headers(body, svix_id=svix_id))
                elapsed = time.perf_counter() - started
                with lock:
                    results.append((response.status_code, response.json()["duplicate"], elapsed))
        finally:
            connections.close_all()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started

    latencies = sorted(r[2] for r in results)
    print(
        f"\nreplay storm: {len(results)} requests, {len(bodies)} events, {THREADS} threads, "
        f"{wall:.1f} s wall, {len(results) / wall:.0f} requests/s, "
        f"{len(bodies) / wall:.0f} distinct events/s, "
        f"p50 {latencies[len(latencies) // 2] * 1000:.0f} ms, "
        f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:.0f} ms"
    )
    journal = Counter(
        IntentEvent.objects.filter(actor_kind="webhook").values_list("actor_label", flat=True)
    )
    assert Counter(status for status, _, _ in results) == {200: len(bodies) * COPIES}
    assert Counter(duplicate for _, duplicate, _ in results) == {
        False: len(bodies),
        True: len(bodies) * (COPIES - 1),
    }
    assert WebhookEvent.objects.count() == len(bodies)
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    assert len(journal) == len(bodies)
    assert set(journal.values()) == {1}
    assert Counter(RecipientDelivery.objects.values_list("state", flat=True)) == {
        "complained": INTENTS,
        "bounced": INTENTS,
    }
    assert Suppression.objects.filter(tenant=tenant_a).count() == 2 * INTENTS
