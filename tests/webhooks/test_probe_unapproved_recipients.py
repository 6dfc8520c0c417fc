"""Outsider probe: a reply goes out to exactly the recipients approved (the sandbox's ledger says
so), and then AgentMail's own message.sent names one more: its reply route added the customer's
Reply-To, say, which AgentMail's reference gives as the default recipient of a reply. Nobody
approved that address. The receiver logged a warning and kept only a count in the journal; the
send's page listed the approved recipients as sent, and nothing said the message went elsewhere
too. The page names each such address, and the journal row keeps them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from intents.models import IntentEvent, SendIntent
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import (
    agent_drafts,
    agent_token,
    approved_on_its_page_and_sent,
    customer_writes,
)
from tests.webhooks.conftest import delivery_payload


@pytest.mark.django_db(transaction=True)
def test_a_recipient_agentmail_names_beyond_those_approved_is_named_on_the_send_page(
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    fast_send,  # noqa: F811
    client,
    hook_for,
):
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    admin = member_of(tenant_a, "admin").user
    ana = customer_writes(sandbox, hook, client, mailbox, "Ana <ana@customer.test>", "Refund 4711")
    draft = agent_drafts(
        client,
        agent_token(tenant_a, admin),
        "reply-to-ana",
        {
            "mailbox": mailbox.address,
            "in_reply_to": ana["message_id"],
            "to": ["ana@customer.test"],
            "text": "Your refund is on its way.",
        },
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    sent = approved_on_its_page_and_sent(client, tenant_a, draft["id"], sandbox, mailbox)
    intent = SendIntent.objects.get(draft_id=draft["id"])

    hook.post(
        client,
        delivery_payload(
            "sent",
            intent,
            recipients=["Ana <ana@customer.test>", "Mallory <MALLORY@elsewhere.test>"],
        ),
    )
    page = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode()

    assert (sent["to"], sent["cc"], sent["bcc"]) == (["ana@customer.test"], [], [])
    row = IntentEvent.objects.get(intent=intent, action="delivery.sent")
    assert row.data["unknown_recipients"] == 1
    assert row.data["unapproved_recipients"] == ["mallory@elsewhere.test"]
    assert "data-unapproved-recipients" in page
    assert "mallory@elsewhere.test" in page


@pytest.mark.django_db
def test_a_send_whose_events_name_only_approved_recipients_says_nothing_of_others(
    tenant_a, mailbox_row, intent_row, hook_for, client, member_of
):
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    hook_for(tenant_a).post(client, delivery_payload("sent", intent))
    admin = member_of(tenant_a, "admin").user
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")

    page = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode()

    assert (
        IntentEvent.objects.get(intent=intent, action="delivery.sent").data["unapproved_recipients"]
        == []
    )
    assert "data-unapproved-recipients" not in page
