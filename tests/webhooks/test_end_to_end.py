"""The sandbox's real Svix-signed deliveries reach our receiver through a live server: the
provisioning flow registers the endpoint, the intents worker sends, delivery is tracked."""

from __future__ import annotations

import pytest
from django.db import connections

from intents import sending
from intents import services as intent_services
from intents.models import Suppression
from webhooks import registration
from webhooks.models import InboundMessage, RecipientDelivery, WebhookEvent


@pytest.fixture
def short_lived_connections(monkeypatch):
    """The sandbox keeps its HTTP connections to the live server alive, so a request thread can
    outlive the test; close its database connection after each request, or the test database
    cannot be dropped at the end of the session."""
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)


def states(intent):
    return dict(RecipientDelivery.objects.filter(intent=intent).values_list("address", "state"))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sandbox_webhooks_track_delivery_bounce_and_reply_end_to_end(
    live_server,
    short_lived_connections,
    sandbox,
    settings,
    tenant_a,
    member_of,
    mailbox_factory,
):
    settings.PUBLIC_BASE_URL = live_server.url
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    endpoint = registration.webhook_register(tenant=tenant_a)
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["jane@customer.test"],
        cc=["ops@customer.test"],
        subject="Your refund",
        text="We refunded your order.",
        actor_user=approver,
    )
    version = draft.versions.get(number=1)
    intent = intent_services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=version.content_hash,
        actor=approver,
    )

    sending.run_once(intent_id=intent.pk)
    intent.refresh_from_db()
    delivered = sandbox.wait_for(
        lambda: (
            states(intent) == {"jane@customer.test": "delivered", "ops@customer.test": "delivered"}
        ),
        timeout=15,
    )
    sandbox.trigger(intent.provider_message_id, "message.bounced", recipients=["ops@customer.test"])
    bounced = sandbox.wait_for(
        lambda: Suppression.objects.filter(tenant=tenant_a, address="ops@customer.test").exists(),
        timeout=15,
    )
    reply = sandbox.inbound(
        mailbox.inbox_id,
        from_="Jane Doe <jane@customer.test>",
        subject="Re: Your refund",
        text="Thanks! One more question.",
        in_reply_to=intent.provider_message_id,
    )
    recorded = sandbox.wait_for(
        lambda: InboundMessage.objects.filter(message_id=reply["message_id"]).first(), timeout=15
    )

    assert (intent.state, delivered, bounced) == ("accepted", True, True)
    assert states(intent) == {"jane@customer.test": "delivered", "ops@customer.test": "bounced"}
    assert (recorded.thread_id, recorded.sender) == (
        intent.provider_thread_id,
        "Jane Doe <jane@customer.test>",
    )
    assert sorted(
        WebhookEvent.objects.filter(endpoint=endpoint).values_list("event_type", "state")
    ) == [
        ("message.bounced", "applied"),
        ("message.delivered", "applied"),
        ("message.received", "applied"),
        ("message.sent", "applied"),
    ]
    endpoint.refresh_from_db()
    attempts = sandbox.wait_for(
        lambda: (
            len(sandbox.deliveries(webhook_id=endpoint.provider_webhook_id)) == 4
            and sandbox.deliveries(webhook_id=endpoint.provider_webhook_id)
        )
    )
    assert sorted(a["status_code"] for a in attempts) == [200, 200, 200, 200]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sandbox_redelivery_is_answered_2xx_and_stored_once(
    live_server,
    short_lived_connections,
    sandbox,
    settings,
    tenant_a,
    member_of,
    mailbox_factory,
):
    settings.PUBLIC_BASE_URL = live_server.url
    mailbox = mailbox_factory(tenant_a)
    endpoint = registration.webhook_register(tenant=tenant_a)
    first = sandbox.inbound(
        mailbox.inbox_id, from_="jane@customer.test", subject="Hello", text="Hi"
    )
    sandbox.wait_for(lambda: InboundMessage.objects.filter(message_id=first["message_id"]).exists())

    queued = sandbox.redeliver(event_id=first["event_id"])
    attempts = sandbox.wait_for(
        lambda: (
            len(sandbox.deliveries(event_id=first["event_id"])) == 2
            and sandbox.deliveries(event_id=first["event_id"])
        )
    )

    assert queued == 1
    assert [a["status_code"] for a in attempts] == [200, 200]
    assert WebhookEvent.objects.filter(endpoint=endpoint).count() == 1
    assert InboundMessage.objects.count() == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_webhooks_that_beat_the_worker_are_applied_when_reconciliation_records_the_message(
    live_server,
    short_lived_connections,
    sandbox,
    settings,
    tenant_a,
    member_of,
    mailbox_factory,
):
    """The provider sends and answers 500: its message.sent and message.delivered reach us while
    the intent is uncertain (no message id), so they wait; reconciliation records the message id
    and the worker's on-commit hand-over applies them."""
    settings.PUBLIC_BASE_URL = live_server.url
    settings.SEND_BACKOFF_BASE_SECONDS = 0.01
    settings.SEND_BACKOFF_CAP_SECONDS = 0.05
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["jane@customer.test"],
        subject="Your refund",
        text="We refunded your order.",
        actor_user=approver,
    )
    intent = intent_services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=approver,
    )
    sandbox.fault("sends", "500_after")

    sending.run_once(intent_id=intent.pk, limit=1)
    intent.refresh_from_db()
    waiting = sandbox.wait_for(
        lambda: WebhookEvent.objects.filter(state="deferred").count() == 2, timeout=15
    )
    before = states(intent)
    reconciled = sandbox.wait_for(
        lambda: sending.run_once(intent_id=intent.pk) or states(intent), timeout=15
    )
    intent.refresh_from_db()

    assert (waiting, before) == (True, {})
    assert intent.state == "accepted"
    assert reconciled is not None
    assert states(intent) == {"jane@customer.test": "delivered"}
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    assert len(sandbox.ledger(idempotency_key=intent.idempotency_key)) == 1
