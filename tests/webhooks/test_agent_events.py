"""Delivery webhooks become agent events (send.delivered, send.bounced, send.complained) only
when they move a recipient forward: a replayed webhook (same svix-id), a second bounce of the same
address and a late "delivered" after a bounce emit nothing."""

from __future__ import annotations

import pytest

from intents.models import AgentEvent, AgentEventDelivery
from intents.services.event_endpoints import endpoint_create
from tests.webhooks.conftest import delivery_payload, new_svix_id

pytestmark = pytest.mark.django_db


def test_a_replayed_or_repeated_bounce_webhook_emits_nothing_more(
    client, tenant_a, member_of, hook_for, mailbox_row, intent_row
):
    admin = member_of(tenant_a, "admin").user
    hook = hook_for(tenant_a)
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    endpoint_create(
        tenant=tenant_a,
        url="https://a.example.com/",
        event_types=["send.bounced", "send.delivered"],
        actor=admin,
    )
    bounce = delivery_payload("bounced", intent)
    svix_id = new_svix_id()

    first = hook.post(client, bounce, svix_id=svix_id)
    replayed = hook.post(client, bounce, svix_id=svix_id)
    repeated = hook.post(client, delivery_payload("bounced", intent))
    late_delivered = hook.post(client, delivery_payload("delivered", intent))

    assert [r.status_code for r in (first, replayed, repeated, late_delivered)] == [200] * 4
    event = AgentEvent.objects.get()
    assert (event.type, event.intent_id, event.payload["recipients"]) == (
        "send.bounced",
        intent.pk,
        ["jane@customer.test"],
    )
    assert AgentEventDelivery.objects.count() == 1
