"""The operators' admin shows the ledger's metadata, never customer mail: no subject, no preview,
no stored payload, and no lookup that searches them."""

from html import escape

import pytest
from django.test import Client

from tenants.models import User
from tests.factories import make_local_mailbox
from tests.webhooks.conftest import received_payload
from webhooks.models import InboundMessage, WebhookEvent

pytestmark = pytest.mark.django_db

ADMIN = "/ops/admin/webhooks/"


def test_an_operator_sees_who_wrote_when_but_not_what(client, tenant_a, hook_for):
    mailbox = make_local_mailbox(tenant_a)
    payload = received_payload(
        mailbox,
        thread_id="th-1",
        subject="Card 4111 stolen",
        preview="My new card number is 5500 0000",
    )
    hook_for(tenant_a).post(client, payload)
    message, event = InboundMessage.objects.get(), WebhookEvent.objects.get()
    operator = Client()
    operator.force_login(User.objects.create_superuser("ops@countersign.test", "operator-pass-1"))

    pages = "".join(
        operator.get(url).content.decode()
        for url in [
            f"{ADMIN}inboundmessage/",
            f"{ADMIN}inboundmessage/{message.pk}/change/",
            f"{ADMIN}inboundmessage/{message.pk}/history/",
            f"{ADMIN}webhookevent/{event.pk}/change/",
        ]
    )
    searches = [
        operator.get(f"{ADMIN}inboundmessage/", {"preview__icontains": "5500"}).status_code,
        operator.get(f"{ADMIN}inboundmessage/", {"subject__icontains": "stolen"}).status_code,
        operator.get(
            f"{ADMIN}webhookevent/", {"payload__message__preview__icontains": "5500"}
        ).status_code,
    ]

    assert "jane@customer.test" in pages and escape(message.message_id) in pages
    assert "4111" not in pages and "5500" not in pages
    assert searches == [400, 400, 400]
