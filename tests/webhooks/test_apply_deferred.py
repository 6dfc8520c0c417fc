"""The webhook can beat the worker's commit: events for a message id no intent has recorded yet
are kept and applied when it is recorded (events_apply_deferred), or by the sweep."""

from __future__ import annotations

import pytest
from django.db.models.functions import Now

from intents.models import SendIntent
from tests.webhooks.conftest import delivery_payload
from webhooks.models import RecipientDelivery, WebhookEvent
from webhooks.services import apply


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def mailbox(tenant_a, mailbox_row):
    return mailbox_row(tenant_a)


@pytest.fixture
def sending(mailbox, intent_row):
    """An intent whose send is in flight: the provider has a message id, we have not recorded it."""
    return intent_row(mailbox, to=["jane@customer.test"], message_id=None, state="uncertain")


MESSAGE_ID = "<early-bird@sandbox.test>"


def early(kind, mailbox):
    return delivery_payload(kind, (mailbox.inbox_id, MESSAGE_ID, "thr_e", ["jane@customer.test"]))


def record_message_id(intent):
    SendIntent.objects.filter(pk=intent.pk).update(
        state="accepted", provider_message_id=MESSAGE_ID, updated_at=Now()
    )


def test_events_before_the_message_id_is_recorded_are_deferred(client, hook, mailbox, sending):
    hook.post(client, early("sent", mailbox))
    hook.post(client, early("delivered", mailbox))

    assert list(WebhookEvent.objects.values_list("state", flat=True)) == ["deferred", "deferred"]
    assert RecipientDelivery.objects.count() == 0


def test_apply_deferred_applies_them_once_the_intent_records_the_message_id(
    client, hook, mailbox, sending
):
    hook.post(client, early("sent", mailbox))
    hook.post(client, early("delivered", mailbox))
    record_message_id(sending)

    applied = apply.events_apply_deferred(tenant_id=sending.tenant_id, message_id=MESSAGE_ID)
    again = apply.events_apply_deferred(tenant_id=sending.tenant_id, message_id=MESSAGE_ID)

    assert (applied, again) == (2, 0)
    assert list(RecipientDelivery.objects.values_list("address", "state")) == [
        ("jane@customer.test", "delivered")
    ]
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}


def test_apply_deferred_before_the_record_leaves_them_deferred(client, hook, mailbox, sending):
    hook.post(client, early("sent", mailbox))

    applied = apply.events_apply_deferred(tenant_id=sending.tenant_id, message_id=MESSAGE_ID)

    assert applied == 0
    assert WebhookEvent.objects.get().state == "deferred"


def test_apply_deferred_is_tenant_scoped(client, hook, mailbox, sending, tenant_b):
    hook.post(client, early("sent", mailbox))
    record_message_id(sending)

    applied = apply.events_apply_deferred(tenant_id=tenant_b.pk, message_id=MESSAGE_ID)

    assert applied == 0
    assert WebhookEvent.objects.get().state == "deferred"


def test_sweep_applies_deferred_events_whose_message_id_was_recorded(
    client, hook, mailbox, sending
):
    hook.post(client, early("delivered", mailbox))
    record_message_id(sending)

    moved = apply.events_replay_pending()

    assert moved == 1
    assert WebhookEvent.objects.get().state == "applied"
    assert RecipientDelivery.objects.get().state == "delivered"


def test_sweep_leaves_deferred_events_of_unknown_messages_alone(client, hook, mailbox, sending):
    hook.post(client, early("delivered", mailbox))

    moved = apply.events_replay_pending()

    assert moved == 0
    assert WebhookEvent.objects.get().state == "deferred"


def test_sweep_applies_events_left_pending(client, hook, mailbox, intent_row):
    intent = intent_row(mailbox, to=["jane@customer.test"])
    hook.post(client, delivery_payload("delivered", intent))
    # A crash between store and apply leaves exactly this row behind.
    WebhookEvent.objects.update(state="pending", applied_at=None)

    moved = apply.events_replay_pending()

    assert moved == 1
    assert WebhookEvent.objects.get().state == "applied"


@pytest.mark.django_db(transaction=True)
def test_a_worker_batch_applies_the_deferred_events_of_every_message_it_recorded(
    client, hook, mailbox, sending, tenant_b
):
    # After the commit (autocommit): one lock statement and one look for the whole batch.
    hook.post(client, early("sent", mailbox))
    hook.post(client, early("delivered", mailbox))
    record_message_id(sending)
    batch = [
        (sending.tenant_id, "<no-early-events@sandbox.test>"),
        (sending.tenant_id, MESSAGE_ID),
        (tenant_b.pk, MESSAGE_ID),  # another tenant's message with the same id: not ours
        (sending.tenant_id, ""),
    ]

    applied = apply.events_apply_deferred_many(batch)
    again = apply.events_apply_deferred_many(batch)

    assert (applied, again) == (2, 0)
    assert list(RecipientDelivery.objects.values_list("address", "state")) == [
        ("jane@customer.test", "delivered")
    ]
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
