"""Outsider probe: two customers of one mailbox, Ana and Ben, each in a thread of their own. An
agent (confused, or talked into it) drafts a reply in Ana's thread, with Ana's subject and Ana's
file, to Ben. The draft page says "Not a participant of this thread" and the queue row "check
recipients"; bulk approval, whose rows show one subject and one address, must leave it out."""

from __future__ import annotations

import base64
import json
import re

import pytest
from django.urls import reverse

from intents import sending
from intents.models import Draft, SendIntent
from tenants.tokens import token_create
from tests.intents.conftest import fast_send  # noqa: F401
from tests.webhooks.conftest import hook_for, received_payload  # noqa: F401

pytestmark = pytest.mark.django_db

PASSPORT = b"%PDF-1.4 Ana Lima, passport P1234567"


def _customer_writes(sandbox, hook, client, mailbox, sender: str, subject: str, files=()) -> dict:
    """Mail into the sandbox inbox, and its signed message.received webhook to our receiver."""
    extra = {"attachments": list(files)} if files else {}
    message = sandbox.inbound(
        mailbox.inbox_id, from_=sender, subject=subject, text=subject, **extra
    )
    payload = received_payload(
        mailbox,
        thread_id=message["thread_id"],
        message_id=message["message_id"],
        subject=subject,
        sender=sender,
    )
    hook.post(client, payload)
    return message


def _agent_drafts(client, token: str, key: str, body: dict) -> dict:
    response = client.post(
        "/api/v1/drafts",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
    )
    assert response.status_code == 201, response.content
    return response.json()


@pytest.mark.django_db(transaction=True)
def test_bulk_approval_leaves_out_a_reply_in_anas_thread_addressed_to_ben(
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    fast_send,  # noqa: F811
    client,
    hook_for,  # noqa: F811
):
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    admin = member_of(tenant_a, "admin").user
    _, token = token_create(
        tenant=tenant_a,
        name="agent",
        scopes=("drafts:write", "drafts:read"),
        mailbox_ids=[],
        expires_at=None,
        actor=admin,
    )
    passport = {
        "filename": "passport.pdf",
        "content_type": "application/pdf",
        "content": base64.b64encode(PASSPORT).decode(),
    }
    ana = _customer_writes(
        sandbox, hook, client, mailbox, "Ana <ana@customer.test>", "Refund 4711", [passport]
    )
    _customer_writes(sandbox, hook, client, mailbox, "Ben <ben@other.test>", "Opening hours?")
    [file] = sandbox.sdk().inboxes.messages.get(mailbox.inbox_id, ana["message_id"]).attachments
    reply = {"mailbox": mailbox.address, "in_reply_to": ana["message_id"]}
    to_ben = _agent_drafts(
        client,
        token,
        "to-ben",
        {
            **reply,
            "to": ["ben@other.test"],
            "text": "Your refund is on its way; your passport is attached.",
            "forward_attachments": [file.attachment_id],
        },
    )
    to_ana = _agent_drafts(
        client, token, "to-ana", {**reply, "to": ["ana@customer.test"], "text": "Refunded."}
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    items = re.findall(r'name="item" value="([^"]+)"', queue)

    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": items}, follow=True
    )
    sending.run_once(worker="t", limit=10)

    said = response.content.decode()
    assert len(items) == 2 and "data-check-recipients" in queue
    assert "Approved 1 draft" in said
    assert "ben@other.test wrote none of the customer messages" in said
    assert Draft.objects.get(pk=to_ben["id"]).status == Draft.Status.PENDING
    assert not SendIntent.objects.filter(draft_id=to_ben["id"]).exists()
    sent = sandbox.ledger(inbox_id=mailbox.inbox_id)
    assert [(s["to"], s["subject"]) for s in sent] == [(["ana@customer.test"], "Re: Refund 4711")]
    assert Draft.objects.get(pk=to_ana["id"]).status == Draft.Status.APPROVED
