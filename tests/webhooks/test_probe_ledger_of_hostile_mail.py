"""Outside probe: the ledger keeps of a received message only what applying it again needs
(DESIGN, "Store only what recovery and audit need"). A customer's message to five thousand
addresses in To and Cc, with as many labels and a 100 KB subject, stayed in the ledger whole
until the retention purge: a quarter of a megabyte per event, of which the inbound message
keeps 999 characters of subject and no recipient at all."""

from __future__ import annotations

import json

import pytest

from intents import errors
from tests.webhooks.conftest import received_payload
from webhooks.models import InboundMessage, WebhookEvent
from webhooks.normalize import normalize

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


def hostile(mailbox) -> dict:
    payload = received_payload(
        mailbox,
        thread_id="thr-many",
        message_id="<" + "m" * 5000 + "@customer.test>",
        subject="Refund " * 15_000,
        sender="Jane " * 5000 + "<jane@customer.test>",
    )
    message = payload["message"]
    message["to"] = [mailbox.address] + [f"to{n}@spam.test" for n in range(5000)]
    message["cc"] = [f"cc{n}@spam.test" for n in range(5000)]
    message["labels"] = ["received"] + [f"label-{n}" for n in range(5000)]
    message["reply_to"] = [f"rt{n}@spam.test" for n in range(5000)]
    message["in_reply_to"] = "<" + "r" * 50_000 + "@x.test>"
    return payload


def test_a_message_to_thousands_keeps_a_small_ledger_row_and_the_same_inbound_message(
    client, hook, mailbox_a
):
    payload = hostile(mailbox_a)

    response = hook.post(client, payload)

    event = WebhookEvent.objects.get()
    stored = InboundMessage.objects.get()
    assert response.status_code == 200
    assert event.state == "applied"
    assert len(json.dumps(event.payload)) < 20_000
    assert normalize(event.payload).inbound == normalize(payload).inbound
    assert normalize(event.payload).message_id == stored.message_id
    assert len(stored.subject) == 999
    assert stored.sender.endswith("<jane@customer.test>")
    # What it was addressed to is still said: the first addresses, and how many there were.
    assert event.payload["message"]["to"][:2] == [mailbox_a.address, "to0@spam.test"]
    assert event.payload["message"]["cs_counts"] == {"to": 5001, "cc": 5000, "labels": 5001}


def test_a_reply_to_its_subject_is_still_refused_as_too_long(client, hook, mailbox_a, make_draft):
    hook.post(client, hostile(mailbox_a))
    message_id = InboundMessage.objects.get().message_id

    with pytest.raises(errors.InvalidInput) as refused:
        make_draft(mailbox_a, in_reply_to=message_id, to=["jane@customer.test"], subject="")

    assert (refused.value.code, refused.value.field) == ("reply_subject_invalid", "in_reply_to")
