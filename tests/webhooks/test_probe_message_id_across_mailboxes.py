"""Outsider probes: a customer's mail under a Message-ID that names another message.

Ana writes to mailbox A under a Message-ID. Mallory, who knows it (copied on her message, or a
guess), writes under the same Message-ID: into mailbox B (another tenant's, or another of Ana's
tenant), with In-Reply-To naming Ana's message and a webhook naming Ana's thread id (a provider
whose thread disagrees with the In-Reply-To the sandbox threads by); or into Ana's own thread,
as her broken client may too. Ana's record, her draft's page and her reply as sent must not
change, and a message nobody recorded must still stop the reply approved before it; B's agent,
B's reviewer and B's reply see and send only what B received."""

from __future__ import annotations

import pytest
from django.urls import reverse

from intents.models import DraftVersion, SendIntent
from tests.review.threads import agent_drafts, agent_token
from tests.webhooks.conftest import hook_for, received_payload  # noqa: F401

SHARED_ID = "<order-7781.1@customer.test>"
ANA = "Ana Lima <ana@customer.test>"
MALLORY = "Mallory <mallory@evil.test>"
ANA_SUBJECT = "Contract 7781: confidential terms"
MALLORY_SUBJECT = "Quick question"


def _writes(sandbox, hook, client, mailbox, sender, subject, *, thread_id=None, in_reply_to=None):
    """Mail under SHARED_ID into the sandbox inbox, and its signed message.received to our
    receiver; ``thread_id``: the one the webhook names instead of the sandbox's."""
    message = sandbox.inbound(
        mailbox.inbox_id, from_=sender, subject=subject, text=subject, message_id=SHARED_ID
    )
    payload = received_payload(
        mailbox,
        thread_id=thread_id or message["thread_id"],
        message_id=SHARED_ID,
        subject=subject,
        sender=sender,
        preview=subject,
        text=subject,
    )
    if in_reply_to:
        payload["message"]["in_reply_to"] = in_reply_to
        payload["message"]["references"] = [in_reply_to]
    hook.post(client, payload)
    return message


def _approve(client, user, tenant, draft_id) -> None:
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    version = DraftVersion.objects.filter(draft_id=draft_id).latest("number")
    response = client.post(
        reverse("draft_approve", args=[tenant.slug, draft_id]),
        {"version": version.number, "content_hash": version.content_hash},
    )
    assert response.status_code == 302, response.content


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sender", [ANA, MALLORY], ids=["her client again", "another sender"])
def test_another_message_under_the_answered_message_id_holds_the_queued_reply(
    sender,
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    client,
    hook_for,  # noqa: F811
):
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    admin = member_of(tenant_a, "admin").user
    ana = _writes(sandbox, hook, client, mailbox, ANA, "Ship order 7781")
    to_ana = agent_drafts(
        client,
        agent_token(tenant_a, admin),
        "to-ana",
        {
            "mailbox": mailbox.address,
            "in_reply_to": SHARED_ID,
            "to": ["ana@customer.test"],
            "text": "It ships today.",
        },
    )
    _approve(client, admin, tenant_a, to_ana["id"])

    hook.post(
        client,
        received_payload(
            mailbox,
            thread_id=ana["thread_id"],
            message_id=SHARED_ID,
            subject="Re: Ship order 7781",
            sender=sender,
            preview="Cancel it, do not ship.",
            text="Cancel it, do not ship.",
        ),
    )

    held = SendIntent.objects.get(draft_id=to_ana["id"])
    assert (held.state, held.held_reason[:20]) == ("queued", "customer wrote again")
