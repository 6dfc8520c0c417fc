"""Fault: applying has to wait for a lock another transaction holds. The receiver still answers
2xx at once (it only stores), the applier gives up after its lock timeout and keeps the event
pending, and the sweep applies it afterwards."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from tests.webhooks.conftest import apply_stored, delivery_payload
from webhooks.models import RecipientDelivery, WebhookEvent
from webhooks.services import applier, apply


@pytest.mark.django_db(transaction=True)
def test_lock_contention_leaves_the_event_pending_and_the_sweep_applies_it(
    client, tenant_a, hook_for, mailbox_row, intent_row, monkeypatch
):
    monkeypatch.setattr(applier, "APPLY_LOCK_TIMEOUT_MS", 200)
    hook = hook_for(tenant_a)
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    hook.post(client, delivery_payload("sent", intent))
    locked, release = threading.Event(), threading.Event()
    held_until_released = []

    def hold_the_row():
        try:
            with transaction.atomic():
                list(RecipientDelivery.objects.select_for_update().filter(intent=intent))
                locked.set()
                held_until_released.append(release.wait(60))
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    locked.wait(5)
    response = hook.post(client, delivery_payload("delivered", intent), apply=False)
    finished_while_locked = apply_stored()
    pending = WebhookEvent.objects.get(event_type="message.delivered").state
    release.set()
    holder.join()

    moved = apply.events_replay_pending()

    assert (response.status_code, response.json()["state"], pending) == (200, "pending", "pending")
    assert finished_while_locked == 0
    # The answer and the applier's give-up came while the row was still locked (the holder was
    # let go by us, not by its own timeout).
    assert held_until_released == [True]
    assert moved == 1
    assert RecipientDelivery.objects.get(intent=intent).state == "delivered"
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
