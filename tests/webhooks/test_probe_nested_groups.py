"""Outsider probe: a customer's Reply-To written as groups inside groups ("a:a:a:...").

Python's address parser (email._parseaddr) reads each "name:" group by calling itself for the
next one, so a thousand of them (2 KB of header) raise RecursionError, which is not a
ValueError: the receiver answered 500 to the signed event, and Svix retried it for a day."""

from __future__ import annotations

import pytest

from tests.webhooks.conftest import delivery_payload, received_payload
from webhooks.models import InboundMessage, WebhookEvent

NESTED = "a:" * 1000


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def mailbox(tenant_a, mailbox_row):
    return mailbox_row(tenant_a)


def test_a_reply_to_of_nested_groups_is_stored_and_applied_not_a_500(client, hook, mailbox):
    payload = received_payload(mailbox, thread_id="thr_groups")
    payload["message"]["reply_to"] = [NESTED, NESTED + " <evil@elsewhere.test>"]

    response = hook.post(client, payload)

    assert response.status_code == 200
    assert WebhookEvent.objects.get().state == WebhookEvent.State.APPLIED
    # The item ending in an address in angle brackets is read as a sender is: by that address.
    assert InboundMessage.objects.get().reply_to == ["evil@elsewhere.test"]


def test_a_delivery_naming_a_recipient_as_nested_groups_is_stored_not_a_500(
    client, hook, mailbox, intent_row
):
    intent = intent_row(mailbox, to=["jane@customer.test"])
    payload = delivery_payload("delivered", intent, recipients=[NESTED + ",jane@customer.test"])

    response = hook.post(client, payload)

    assert response.status_code == 200
    assert WebhookEvent.objects.get().state == WebhookEvent.State.APPLIED
