"""Outside probe: a customer's message whose Reply-To is not its From. AgentMail gives it
(``reply_to``); an agent that answers where the message asks for replies writes to an address
that wrote nothing in the thread, and the reviewer, told only "Not a participant of this
thread", must see that the message itself asked for it (or that it went elsewhere), hostile
characters and all, to judge the reply."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.review.threads import agent_drafts, agent_token
from tests.webhooks.conftest import hook_for  # noqa: F401
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


def customer_writes(sandbox, hook, client, mailbox, **fields) -> dict:
    """Mail into the sandbox inbox, and the very message.received event the sandbox made of it,
    signed and posted to our receiver."""
    sent = sandbox.inbound(mailbox.inbox_id, subject="Refund", text="Refund me", **fields)
    [event] = [e for e in sandbox.events() if e["event_id"] == sent["event_id"]]
    hook.post(client, event["payload"])
    return sent


@pytest.fixture
def shop(tenant_a, member_of, mailbox_factory, hook_for):  # noqa: F811
    admin = member_of(tenant_a, "admin").user
    return mailbox_factory(tenant_a), hook_for(tenant_a), admin, agent_token(tenant_a, admin)


def draft_page(client, admin, tenant, mailbox, token, message_id, to) -> str:
    body = {"mailbox": mailbox.address, "in_reply_to": message_id, "to": [to], "text": "Done."}
    draft = agent_drafts(client, token, "reply", body)
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    return client.get(reverse("draft", args=[tenant.slug, draft["id"]])).content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_reviewer_sees_where_the_customers_message_asks_replies_to_go(
    tenant_a, sandbox, client, shop
):
    mailbox, hook, admin, token = shop
    sent = customer_writes(
        sandbox,
        hook,
        client,
        mailbox,
        from_='"support@yourshop.test" <jane@customer.test>',
        reply_to=["Refunds <refunds@elsewhere.test>", "JANE@customer.test"],
    )

    page = draft_page(
        client, admin, tenant_a, mailbox, token, sent["message_id"], "refunds@elsewhere.test"
    )

    assert InboundMessage.objects.get().reply_to == ["refunds@elsewhere.test"]
    assert "Not a participant of this thread" in page
    assert "data-reply-to" in page
    assert "This message asks for replies to" in page
    assert ">refunds@elsewhere.test</bdi>" in page


@pytest.mark.django_db(transaction=True)
def test_a_reply_to_with_hidden_characters_is_shown_by_their_code_points(
    tenant_a, sandbox, client, shop
):
    mailbox, hook, admin, token = shop
    sent = customer_writes(
        sandbox,
        hook,
        client,
        mailbox,
        from_="Jane <jane@customer.test>",
        reply_to=["jane@customer.test\u202e"] + [f"r{n}@many.test" for n in range(5000)],
    )

    page = draft_page(
        client, admin, tenant_a, mailbox, token, sent["message_id"], "jane@customer.test"
    )

    stored = InboundMessage.objects.get().reply_to
    assert stored == ["jane@customer.test\u202e"] + [f"r{n}@many.test" for n in range(9)]
    assert "\u202e" not in page
    assert "U+202E" in page


@pytest.mark.django_db(transaction=True)
def test_no_word_of_a_reply_to_that_is_the_sender(tenant_a, sandbox, client, shop):
    mailbox, hook, admin, token = shop
    sent = customer_writes(
        sandbox,
        hook,
        client,
        mailbox,
        from_="Jane <jane@customer.test>",
        reply_to="Jane@Customer.TEST",
    )

    page = draft_page(
        client, admin, tenant_a, mailbox, token, sent["message_id"], "jane@customer.test"
    )

    assert InboundMessage.objects.get().reply_to == []
    assert "data-reply-to" not in page


@pytest.mark.django_db(transaction=True)
def test_a_reply_to_whose_display_name_is_an_address_is_shown_by_its_real_address(
    tenant_a, sandbox, client, shop
):
    """Found by an outside probe: a Reply-To as AgentMail writes one, "name <address>", whose
    name is itself an address ("ceo@yourshop.test <evil@x.test>") is ambiguous to the standard
    library's parser, which read it as nobody: the page said nothing of it, while an agent that
    answered where the message asked wrote to evil@x.test. It is read as a From is (the address
    in its last angle brackets)."""
    mailbox, hook, admin, token = shop
    sent = customer_writes(
        sandbox,
        hook,
        client,
        mailbox,
        from_="Jane <jane@customer.test>",
        reply_to=["ceo@yourshop.test <Evil@X.test>", "Refunds <refunds@elsewhere.test>"],
    )

    page = draft_page(client, admin, tenant_a, mailbox, token, sent["message_id"], "evil@x.test")

    assert InboundMessage.objects.get().reply_to == ["evil@x.test", "refunds@elsewhere.test"]
    assert ">evil@x.test</bdi>" in page
    assert ">ceo@yourshop.test</bdi>" not in page
