"""Found by an outsider probe of the backfill: AgentMail's own webhook of a rejection the
backfill had stored, arriving before the applier took either, was applied in the same batch as
the backfill's event and journaled the rejection twice."""

import pytest

from intents.models import IntentEvent
from tests.webhooks.conftest import apply_stored, delivery_payload
from webhooks.models import WebhookEvent
from webhooks.normalize import normalize
from webhooks.services.apply import backfill_svix_id
from webhooks.services.receive import event_store

pytestmark = pytest.mark.django_db


def test_a_late_webhook_of_a_backfilled_rejection_in_the_same_batch_changes_nothing(
    client, hook_for, mailbox_row, intent_row, tenant_a
):
    hook = hook_for(tenant_a)
    intent = intent_row(mailbox_row(tenant_a))
    found = delivery_payload("rejected", intent)
    found["event_id"] = backfill_svix_id("message.rejected", intent.provider_message_id)
    event_store(
        tenant=tenant_a,
        endpoint=hook.endpoint,
        svix_id=backfill_svix_id("message.rejected", intent.provider_message_id),
        event=normalize(found),
    )
    hook.post(client, delivery_payload("rejected", intent), apply=False)

    apply_stored()

    states = dict(WebhookEvent.objects.values_list("svix_id", "state"))
    rejections = IntentEvent.objects.filter(intent=intent, action="delivery.rejected")
    assert sorted(states.values()) == ["applied", "ignored"]
    assert rejections.count() == 1
