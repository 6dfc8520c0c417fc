"""Retention: payloads past each tenant's retention period are dropped, the ledger rows stay, and
events that never became applicable are closed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webhooks.conftest import delivery_payload
from webhooks.models import WebhookEvent
from webhooks.services import retention


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


def test_purge_drops_payloads_past_each_tenants_retention(
    client, hook_for, mailbox_row, intent_row, tenant_a, tenant_b
):
    tenant_a.retention_days = 7
    tenant_a.save(update_fields=["retention_days"])
    hook_a, hook_b = hook_for(tenant_a), hook_for(tenant_b)
    intent_a = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    intent_b = intent_row(mailbox_row(tenant_b), to=["jane@customer.test"])
    hook_a.post(client, delivery_payload("delivered", intent_a))
    hook_b.post(client, delivery_payload("delivered", intent_b))
    WebhookEvent.objects.update(received_at=timezone.now() - timedelta(days=8))

    purged = retention.events_purge_payloads()

    assert purged == 1
    assert WebhookEvent.objects.get(tenant=tenant_a).payload is None
    assert WebhookEvent.objects.get(tenant=tenant_b).payload is not None
    assert WebhookEvent.objects.count() == 2


def test_purge_closes_events_that_never_became_applicable(client, hook, mailbox, sending, tenant_a):
    hook.post(client, early("delivered", mailbox))
    WebhookEvent.objects.update(received_at=timezone.now() - timedelta(days=91))

    retention.events_purge_payloads()

    event = WebhookEvent.objects.get()
    assert (event.state, event.payload) == ("ignored", None)
