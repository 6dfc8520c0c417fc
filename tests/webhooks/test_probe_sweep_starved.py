"""The sweep takes deferred events only when the intent they wait for is recorded in their own
mailbox: events naming a message id that an intent of another mailbox of the tenant recorded
were taken on every run (the sweep matched the tenant alone), stayed deferred (the apply step
looks in the event's mailbox), and, oldest first and enough of them, filled every batch, so a
pending event behind them was never applied (found by probe 7, webhooks and delivery events)."""

from __future__ import annotations

from intents.models import SendIntent
from tests.webhooks.conftest import delivery_payload
from webhooks.models import RecipientDelivery, WebhookEvent
from webhooks.services import apply

FOREIGN = "<sent-by-the-other-mailbox@sandbox.test>"


def test_deferred_events_of_another_mailboxs_message_do_not_starve_the_sweep(
    client, tenant_a, hook_for, mailbox_row, intent_row
):
    hook = hook_for(tenant_a)
    support, sales = mailbox_row(tenant_a, "support"), mailbox_row(tenant_a, "sales")
    intent_row(sales, message_id=FOREIGN)
    for _ in range(3):
        hook.post(client, delivery_payload("delivered", (support.inbox_id, FOREIGN, "t", [])))
    ours = intent_row(support, to=["jane@customer.test"])
    hook.post(client, delivery_payload("delivered", ours), apply=False)

    moved = [apply.events_replay_pending(batch=3) for _ in range(2)]

    assert moved == [1, 0]
    assert list(WebhookEvent.objects.order_by("id").values_list("message_id", "state")) == [
        (FOREIGN, "deferred")
    ] * 3 + [(ours.provider_message_id, "applied")]
    assert RecipientDelivery.objects.get().state == "delivered"
    assert SendIntent.objects.filter(provider_message_id=FOREIGN).count() == 1


def test_the_sweep_still_applies_a_deferred_event_once_its_own_mailbox_records_it(
    client, tenant_a, hook_for, mailbox_row, intent_row
):
    hook = hook_for(tenant_a)
    support, sales = mailbox_row(tenant_a, "support"), mailbox_row(tenant_a, "sales")
    intent_row(sales, message_id=FOREIGN)
    hook.post(client, delivery_payload("delivered", (support.inbox_id.upper(), FOREIGN, "t", [])))
    intent_row(support, to=["jane@customer.test"], message_id=FOREIGN)

    moved = apply.events_replay_pending()

    assert moved == 1
    assert WebhookEvent.objects.get().state == "applied"
