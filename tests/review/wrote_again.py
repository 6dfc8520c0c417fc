"""What the tests of a customer who writes again share (tests/review/test_customer_wrote_again.py
and test_release_held.py): messages stored as the webhook applier stores them, a message that
reaches the sandbox inbox and the receiver through its signed webhook, and the hidden fields of a
page's form as the browser posts them."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from tests.webhooks.conftest import received_payload
from webhooks.models import InboundMessage


def hidden_fields(page: str, form: str) -> dict:
    """The hidden fields of the first ``<form`` whose opening tag matches ``form`` (a regex)."""
    found = re.search(rf"<form[^>]*{form}.*?</form>", page, re.S)
    assert found, f"the page offers no form matching {form!r}"
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', found.group(0)))


def approve_form(page: str) -> dict:
    return hidden_fields(page, "data-approve-form")


def release_form(page: str) -> dict:
    return hidden_fields(page, 'action="[^"]*/release/"')


def customer_wrote(tenant, mailbox, thread: str, n: int, received_at) -> InboundMessage:
    """A stored customer message, as the webhook applier stores it (data setup)."""
    return InboundMessage.objects.create(
        tenant=tenant,
        mailbox=mailbox,
        thread_id=thread,
        message_id=f"<q{n}@customer.test>",
        sender="c@example.com",
        subject=f"Message {n}",
        received_at=received_at,
    )


def draft_answering(tenant, mailbox, make_draft, thread: str):
    """A pending reply to the customer's first message in ``thread``."""
    customer_wrote(tenant, mailbox, thread, 1, timezone.now() - timedelta(minutes=30))
    return make_draft(
        mailbox,
        thread_id=thread,
        in_reply_to="<q1@customer.test>",
        to=["c@example.com"],
        subject=None,
    )


def customer_writes(
    sandbox, hook, client, mailbox, subject: str, in_reply_to: str | None = None
) -> dict:
    """Mail from jane@customer.test reaches the sandbox inbox, and its message.received webhook
    reaches the receiver (``hook``: tests.webhooks.conftest's ``hook_for(tenant)``)."""
    message = sandbox.inbound(
        mailbox.inbox_id,
        from_="jane@customer.test",
        subject=subject,
        text=subject,
        in_reply_to=in_reply_to,
    )
    hook.post(
        client,
        received_payload(
            mailbox,
            thread_id=message["thread_id"],
            message_id=message["message_id"],
            subject=subject,
            sender="jane@customer.test",
        ),
    )
    return message
