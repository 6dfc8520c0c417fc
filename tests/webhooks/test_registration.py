"""The tenant's pod webhook at the sandbox AgentMail, registered again after AgentMail's webhook was
replaced (deleted and created anew, as an operator does when its secret leaked): the new secret
verifies at once, and the one it replaced no longer does."""

from __future__ import annotations

import json

import pytest

from intents.models import Suppression
from tests.webhooks.conftest import Hook, delivery_payload, new_svix_id
from webhooks import registration
from webhooks.models import RecipientDelivery, WebhookEvent

pytestmark = pytest.mark.django_db


def test_a_secret_replaced_at_agentmail_stops_verifying_when_the_new_one_is_stored(
    client, sandbox, tenant_a, mailbox_row, intent_row
):
    endpoint = registration.webhook_register(tenant=tenant_a)
    leaked = endpoint.secrets.get().plaintext()
    org = sandbox.sdk()
    org.pods.webhooks.delete(tenant_a.agentmail_pod_id, endpoint.provider_webhook_id)
    endpoint = registration.webhook_register(tenant=tenant_a)
    (current,) = [h.secret for h in org.pods.webhooks.list(tenant_a.agentmail_pod_id).webhooks]
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    body = json.dumps(delivery_payload("bounced", intent), separators=(",", ":"))
    hook = Hook(endpoint, current)

    forged = hook.post_raw(
        client, body.encode(), hook.headers(body, svix_id=new_svix_id(), secret=leaked)
    )
    stored_after_forgery = (
        WebhookEvent.objects.count(),
        RecipientDelivery.objects.count(),
        Suppression.objects.count(),
    )
    genuine = hook.post_raw(client, body.encode(), hook.headers(body, svix_id=new_svix_id()))

    assert current != leaked
    assert (forged.status_code, forged.json()["detail"]) == (400, "bad_signature")
    assert stored_after_forgery == (0, 0, 0)
    assert genuine.status_code == 200
    assert list(endpoint.secrets.filter(retired_at__isnull=True).values_list("pk", flat=True)) == [
        s.pk for s in endpoint.secrets.all() if s.plaintext() == current
    ]
