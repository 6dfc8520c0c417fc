"""A misbehaving provider's bounce or complaint that names no recipient we can read: it is news
about someone, not about everyone. Read as concerning the whole message (as a rejection does),
it bounced and suppressed every recipient of the send, the ones it delivered to included."""

from __future__ import annotations

import pytest

from intents.models import Suppression
from tests.webhooks.conftest import delivery_payload
from webhooks.models import RecipientDelivery, WebhookEvent


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.mark.parametrize("kind", ["bounced", "complained"])
@pytest.mark.parametrize("recipients", [[], [{"status": "5.1.1"}], ["not an address"]])
def test_a_bounce_or_complaint_naming_nobody_suppresses_nobody(
    client, hook, tenant_a, mailbox_row, intent_row, kind, recipients
):
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"], cc=["ops@customer.test"])
    hook.post(client, delivery_payload("delivered", intent))
    payload = delivery_payload(kind, intent)
    payload["bounce" if kind == "bounced" else "complaint"]["recipients"] = recipients

    response = hook.post(client, payload)

    assert response.status_code == 200
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    assert set(RecipientDelivery.objects.values_list("state", flat=True)) == {"delivered"}
    assert not Suppression.objects.exists()
