"""Outsider probe: two agents of one tenant (a support agent restricted to the mailbox, and an
agent of every mailbox; or one agent that retried its POST with a new Idempotency-Key) each post
a reply to Kenji's one message. A reviewer approves the first, and it goes out. Another opens
the second: its page showed Kenji's message marked "this draft answers it", and nothing of the
reply already sent to it (the thread shows the customer's messages only), and bulk approval sent
it too. Kenji got two answers to one question. The page names the other reply to the same
message; bulk approval, whose rows show one subject and one address, leaves it out."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from intents import sending
from intents.models import Draft, SendIntent
from tenants.tokens import token_create
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import agent_drafts, agent_token, customer_writes
from tests.webhooks.conftest import hook_for  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.mark.django_db(transaction=True)
def test_a_second_reply_to_an_answered_message_is_named_and_left_out_of_bulk_approval(
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
    every_mailbox = agent_token(tenant_a, admin)
    _, support_only = token_create(
        tenant=tenant_a,
        name="support agent",
        scopes=("drafts:write", "drafts:read"),
        mailbox_ids=[mailbox.pk],
        expires_at=None,
        actor=admin,
    )
    kenji = customer_writes(
        sandbox, hook, client, mailbox, "Kenji <kenji@customer.test>", "Where is order 77?"
    )
    reply = {"mailbox": mailbox.address, "in_reply_to": kenji["message_id"]}
    first = agent_drafts(
        client, support_only, "k-1", {**reply, "to": ["kenji@customer.test"], "text": "Monday."}
    )
    second = agent_drafts(
        client, every_mailbox, "k-2", {**reply, "to": ["kenji@customer.test"], "text": "Friday."}
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    page = client.get(reverse("draft", args=[tenant_a.slug, first["id"]])).content.decode()
    version = re.search(r'name="version" value="(\d+)"', page)
    content_hash = re.search(r'name="content_hash" value="([^"]+)"', page)
    seen = re.search(r'name="messages_seen" value="([^"]*)"', page)
    assert version and content_hash and seen
    client.post(
        reverse("draft_approve", args=[tenant_a.slug, first["id"]]),
        {
            "version": version[1],
            "content_hash": content_hash[1],
            "messages_seen": seen[1],
        },
    )
    sending.run_once(worker="t", limit=10)
    assert SendIntent.objects.get(draft_id=first["id"]).state == SendIntent.State.ACCEPTED

    second_page = client.get(reverse("draft", args=[tenant_a.slug, second["id"]])).content.decode()
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    items = re.findall(r'name="item" value="([^"]+)"', queue)
    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": items}, follow=True
    )
    sending.run_once(worker="t", limit=10)

    assert 'data-thread-warning="answered_by_another_draft"' in second_page
    assert reverse("draft", args=[tenant_a.slug, first["id"]]) in second_page
    assert "data-answered-elsewhere" in queue
    assert len(items) == 1
    assert f"Draft #{first['id']}, another reply to the same message, was approved" in (
        response.content.decode()
    )
    assert Draft.objects.get(pk=second["id"]).status == Draft.Status.PENDING
    sent = sandbox.ledger(inbox_id=mailbox.inbox_id)
    assert [(s["to"], s["text"]) for s in sent] == [(["kenji@customer.test"], "Monday.")]


@pytest.mark.django_db(transaction=True)
def test_two_pending_replies_to_one_message_go_out_once_from_a_list(
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    client,
    hook_for,  # noqa: F811
):
    """Both pending, both offered in one list: the first is approved, the second then answers an
    answered message and is left for its page, which names the first. A rejected reply answers
    nothing, and a reply to another message is another matter."""
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    admin = member_of(tenant_a, "admin").user
    token = agent_token(tenant_a, admin)
    kenji = customer_writes(sandbox, hook, client, mailbox, "kenji@customer.test", "Order 77?")
    aisha = customer_writes(sandbox, hook, client, mailbox, "aisha@customer.test", "Password")
    to_kenji = {"mailbox": mailbox.address, "in_reply_to": kenji["message_id"]}
    to_kenji.update(to=["kenji@customer.test"])
    monday = agent_drafts(client, token, "k-1", {**to_kenji, "text": "Monday."})
    friday = agent_drafts(client, token, "k-2", {**to_kenji, "text": "Friday."})
    rejected = agent_drafts(client, token, "k-3", {**to_kenji, "text": "Never."})
    Draft.objects.filter(pk=rejected["id"]).update(status=Draft.Status.REJECTED)
    password = agent_drafts(
        client,
        token,
        "a-1",
        {
            "mailbox": mailbox.address,
            "in_reply_to": aisha["message_id"],
            "to": ["aisha@customer.test"],
            "text": "Reset.",
        },
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    monday_page = client.get(reverse("draft", args=[tenant_a.slug, monday["id"]]))
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    items = re.findall(r'name="item" value="([^"]+)"', queue)

    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": items}, follow=True
    )
    friday_page = client.get(reverse("draft", args=[tenant_a.slug, friday["id"]]))

    assert [d.pk for d in monday_page.context["answered_elsewhere"]] == [friday["id"]]
    assert "data-answered-elsewhere" not in queue
    assert len(items) == 3
    assert "Approved 2 drafts" in response.content.decode()
    approved = Draft.objects.filter(status=Draft.Status.APPROVED).order_by("pk")
    assert list(approved.values_list("pk", flat=True)) == [monday["id"], password["id"]]
    [other] = friday_page.context["answered_elsewhere"]
    assert (other.pk, other.latest_intent.state) == (monday["id"], SendIntent.State.QUEUED)
