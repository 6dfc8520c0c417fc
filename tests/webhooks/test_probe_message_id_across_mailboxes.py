"""Outsider probes: a customer's mail under a Message-ID that names another message.

Ana writes to mailbox A under a Message-ID. Mallory, who knows it (copied on her message, or a
guess), writes under the same Message-ID: into mailbox B (another tenant's, or another of Ana's
tenant), with In-Reply-To naming Ana's message and a webhook naming Ana's thread id (a provider
whose thread disagrees with the In-Reply-To the sandbox threads by); or into Ana's own thread,
as her broken client may too. Ana's record, her draft's page and her reply as sent must not
change, and a message nobody recorded must still stop the reply approved before it; B's agent,
B's reviewer and B's reply see and send only what B received."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from intents import sending
from intents.models import Draft, DraftVersion, SendIntent
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import agent_drafts, agent_token
from tests.webhooks.conftest import hook_for, received_payload  # noqa: F401
from webhooks.models import InboundMessage, WebhookEvent

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
@pytest.mark.parametrize("where", ["another tenant", "another mailbox of the tenant"])
def test_a_message_naming_another_mailboxs_message_id_and_thread_stays_in_its_own_mailbox(
    where,
    tenant_a,
    tenant_b,
    member_of,
    mailbox_factory,
    sandbox,
    fast_send,  # noqa: F811
    client,
    hook_for,  # noqa: F811
):
    tenant_of_b = tenant_b if where == "another tenant" else tenant_a
    mailbox_a, mailbox_b = mailbox_factory(tenant_a), mailbox_factory(tenant_of_b)
    hook_a = hook_for(tenant_a)
    hook_b = hook_for(tenant_b) if tenant_of_b is tenant_b else hook_a
    admin_a = member_of(tenant_a, "admin").user
    admin_b = member_of(tenant_b, "admin").user if tenant_of_b is tenant_b else admin_a
    token_a = agent_token(tenant_a, admin_a)
    token_b = agent_token(tenant_b, admin_b) if tenant_of_b is tenant_b else token_a
    ana = _writes(sandbox, hook_a, client, mailbox_a, ANA, ANA_SUBJECT)
    to_ana = agent_drafts(
        client,
        token_a,
        "to-ana",
        {
            "mailbox": mailbox_a.address,
            "in_reply_to": SHARED_ID,
            "to": ["ana@customer.test"],
            "text": "Your contract is attached.",
        },
    )
    _approve(client, admin_a, tenant_a, to_ana["id"])

    _writes(
        sandbox,
        hook_b,
        client,
        mailbox_b,
        MALLORY,
        MALLORY_SUBJECT,
        thread_id=ana["thread_id"],
        in_reply_to=SHARED_ID,
    )
    to_mallory = agent_drafts(
        client,
        token_b,
        "to-mallory",
        {
            "mailbox": mailbox_b.address,
            "in_reply_to": SHARED_ID,
            "thread_id": ana["thread_id"],
            "to": ["mallory@evil.test"],
            "text": "Happy to help.",
        },
    )
    client.force_login(admin_b, backend="django.contrib.auth.backends.ModelBackend")
    b_page = client.get(reverse("draft", args=[tenant_of_b.slug, to_mallory["id"]]))
    b_queue = client.get(reverse("tenant_home", args=[tenant_of_b.slug]))
    b_api = client.get(
        f"/api/v1/drafts/{to_mallory['id']}", headers={"Authorization": f"Bearer {token_b}"}
    )
    client.force_login(admin_a, backend="django.contrib.auth.backends.ModelBackend")
    a_page = client.get(reverse("draft", args=[tenant_a.slug, to_ana["id"]]))
    _approve(client, admin_b, tenant_of_b, to_mallory["id"])
    sending.run_once(worker="t", limit=10)

    records = {
        m.mailbox_id: (m.tenant_id, m.thread_id, m.sender, m.subject)
        for m in InboundMessage.objects.all()
    }
    assert records == {
        mailbox_a.pk: (tenant_a.pk, ana["thread_id"], ANA, ANA_SUBJECT),
        mailbox_b.pk: (tenant_of_b.pk, ana["thread_id"], MALLORY, MALLORY_SUBJECT),
    }
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    assert SendIntent.objects.get(draft_id=to_ana["id"]).held_reason == ""
    # B's agent and reviewer get only what B received.
    assert b_api.status_code == 200
    assert (b_api.json()["current_version"]["subject"], b_api.json()["thread_id"]) == (
        f"Re: {MALLORY_SUBJECT}",
        ana["thread_id"],
    )
    for shown in (b_page.content.decode(), b_queue.content.decode(), json.dumps(b_api.json())):
        assert "confidential" not in shown and "ana@customer.test" not in shown
    # A's reviewer sees nothing of Mallory's message in Ana's thread.
    a_shown = a_page.content.decode()
    assert ANA_SUBJECT in a_shown
    assert "mallory" not in a_shown and MALLORY_SUBJECT not in a_shown
    # Each reply goes out from its own inbox, to its own customer, with its own thread's subject.
    sent = {s["inbox_id"]: (s["to"], s["subject"], s["in_reply_to"]) for s in sandbox.ledger()}
    assert sent == {
        mailbox_a.inbox_id: (["ana@customer.test"], f"Re: {ANA_SUBJECT}", SHARED_ID),
        mailbox_b.inbox_id: (["mallory@evil.test"], f"Re: {MALLORY_SUBJECT}", SHARED_ID),
    }
    assert [s["thread_id"] for s in sandbox.ledger(inbox_id=mailbox_a.inbox_id)] == [
        ana["thread_id"]
    ]
    assert Draft.objects.get(pk=to_ana["id"]).status == Draft.Status.APPROVED


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
