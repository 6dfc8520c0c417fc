"""Outsider probe: two customers of one mailbox, Ana and Ben, each in a thread of their own. An
agent (confused, or talked into it) drafts a reply in Ana's thread, with Ana's subject and Ana's
file, to Ben. The draft page says "Not a participant of this thread" and the queue row "check
recipients"; bulk approval, whose rows show one subject and one address, must leave it out."""

from __future__ import annotations

import base64
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from intents import sending
from intents.models import Draft, DraftAttachment, SendIntent
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import agent_drafts, agent_token, customer_writes
from tests.webhooks.conftest import hook_for  # noqa: F401
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db

PASSPORT = b"%PDF-1.4 Ana Lima, passport P1234567"


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
    token = agent_token(tenant_a, admin)
    passport = {
        "filename": "passport.pdf",
        "content_type": "application/pdf",
        "content": base64.b64encode(PASSPORT).decode(),
    }
    ana = customer_writes(
        sandbox, hook, client, mailbox, "Ana <ana@customer.test>", "Refund 4711", [passport]
    )
    customer_writes(sandbox, hook, client, mailbox, "Ben <ben@other.test>", "Opening hours?")
    [file] = sandbox.sdk().inboxes.messages.get(mailbox.inbox_id, ana["message_id"]).attachments
    reply = {"mailbox": mailbox.address, "in_reply_to": ana["message_id"]}
    to_ben = agent_drafts(
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
    to_ana = agent_drafts(
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


def _passport() -> dict:
    return {
        "filename": "passport.pdf",
        "content_type": "application/pdf",
        "content": base64.b64encode(PASSPORT).decode(),
    }


def _ben_joins_anas_thread(sandbox, hook, client, mailbox, *, ana: str, ben: str):
    """Ana writes with her passport; Ben answers her message (In-Reply-To), so AgentMail (and
    the sandbox) puts his message in her thread. Returns both messages and Ana's file id."""
    first = customer_writes(sandbox, hook, client, mailbox, ana, "Refund 4711", [_passport()])
    second = customer_writes(
        sandbox, hook, client, mailbox, ben, "Re: Refund 4711", in_reply_to=first["message_id"]
    )
    [file] = sandbox.sdk().inboxes.messages.get(mailbox.inbox_id, first["message_id"]).attachments
    assert second["thread_id"] == first["thread_id"]
    return first, second, file.attachment_id


@pytest.mark.django_db(transaction=True)
def test_a_customer_who_joined_the_thread_makes_no_reply_to_the_other_pass_bulk_approval(
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    fast_send,  # noqa: F811
    client,
    hook_for,  # noqa: F811
):
    """Ana and Ben on one freemail domain: the domain rule cannot tell them apart, so the rule
    of the answered message's author does. Ben answered Ana's message and so joined her thread;
    both count as participants. A reply answering Ben's message sent to Ana only, and one
    answering Ana's message sent to Ben with her passport, went out from the list."""
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    admin = member_of(tenant_a, "admin").user
    token = agent_token(tenant_a, admin)
    ana, ben, passport = _ben_joins_anas_thread(
        sandbox, hook, client, mailbox, ana="Ana <ana@mail.test>", ben="Ben <ben@mail.test>"
    )
    to_ana = agent_drafts(
        client,
        token,
        "to-ana",
        {
            "mailbox": mailbox.address,
            "in_reply_to": ben["message_id"],
            "to": ["ana@mail.test"],
            "text": "Ben asked about your refund.",
        },
    )
    passport_to_ben = agent_drafts(
        client,
        token,
        "passport-to-ben",
        {
            "mailbox": mailbox.address,
            "in_reply_to": ana["message_id"],
            "to": ["ben@mail.test"],
            "text": "Here is the passport.",
            "forward_attachments": [passport],
        },
    )
    agent_drafts(
        client,
        token,
        "to-ben",
        {
            "mailbox": mailbox.address,
            "in_reply_to": ben["message_id"],
            "to": ["ben@mail.test"],
            "text": "Please write to us in a thread of your own.",
        },
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    items = re.findall(r'name="item" value="([^"]+)"', queue)

    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": items}, follow=True
    )
    sending.run_once(worker="t", limit=10)

    said = response.content.decode()
    forwarded = DraftAttachment.objects.get(version__draft_id=passport_to_ben["id"])
    assert len(items) == 3 and queue.count("data-author-left-out") == 2
    assert "Approved 1 draft" in said
    assert "does not go to ben@mail.test, who wrote the message it answers" in said
    assert "does not go to ana@mail.test, who wrote the message it answers" in said
    assert Draft.objects.get(pk=to_ana["id"]).status == Draft.Status.PENDING
    assert Draft.objects.get(pk=passport_to_ben["id"]).status == Draft.Status.PENDING
    assert [s["to"] for s in sandbox.ledger(inbox_id=mailbox.inbox_id)] == [["ben@mail.test"]]
    assert (forwarded.source_message_id, forwarded.source_sender) == (
        ana["message_id"],
        "Ana <ana@mail.test>",
    )


@pytest.mark.django_db(transaction=True)
def test_a_thread_of_two_organisations_is_flagged_and_left_out_of_bulk_approval(
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    fast_send,  # noqa: F811
    client,
    hook_for,  # noqa: F811
):
    """Ben (other.test) joined Ana's (customer.test) thread. A reply to Ben answering Ben's own
    message breaks no recipient rule, yet carries Ana's subject and conversation: the page and
    the queue row say the thread holds two organisations' messages, and the list leaves it out.
    Ana's passport forwarded to Ben is named with its source on the page."""
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    admin = member_of(tenant_a, "admin").user
    token = agent_token(tenant_a, admin)
    ana, ben, passport = _ben_joins_anas_thread(
        sandbox, hook, client, mailbox, ana="Ana <ana@customer.test>", ben="ben@other.test"
    )
    to_ben = agent_drafts(
        client,
        token,
        "to-ben",
        {
            "mailbox": mailbox.address,
            "in_reply_to": ben["message_id"],
            "to": ["ben@other.test"],
            "text": "Your refund is on its way.",
        },
    )
    passport_to_ben = agent_drafts(
        client,
        token,
        "passport-to-ben",
        {
            "mailbox": mailbox.address,
            "in_reply_to": ana["message_id"],
            "to": ["ben@other.test"],
            "text": "Here is the passport.",
            "forward_attachments": [passport],
        },
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    items = re.findall(r'name="item" value="([^"]+)"', queue)
    page = client.get(reverse("draft", args=[tenant_a.slug, to_ben["id"]])).content.decode()
    files_page = client.get(
        reverse("draft", args=[tenant_a.slug, passport_to_ben["id"]])
    ).content.decode()

    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": items}, follow=True
    )
    sending.run_once(worker="t", limit=10)

    said = response.content.decode()
    [source] = re.findall(r"data-file-source>(.*?)</div>", files_page, re.S)
    assert len(items) == 2 and queue.count("data-thread-domains") == 2
    assert "This thread holds messages from <bdi>customer.test and other.test</bdi>" in page
    assert 'data-thread-warning="author_left_out"' not in page
    assert "Forwarded from the message" in source and "ana@customer.test" in source
    assert 'data-warning="file_source_left_out"' in source
    assert 'data-thread-warning="author_left_out"' in files_page
    assert "Approved" not in said
    assert "thread holds messages from customer.test and other.test" in said
    assert Draft.objects.get(pk=to_ben["id"]).status == Draft.Status.PENDING
    assert sandbox.ledger(inbox_id=mailbox.inbox_id) == []


def test_the_draft_page_reads_every_sender_of_the_thread(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The page read the senders of the ten newest messages only: Ana, who opened the thread,
    was "Not a participant" once ten later messages had come in, while the queue's flag and the
    approval from a list (every sender) found her on it."""
    now = timezone.now()
    InboundMessage.objects.bulk_create(
        InboundMessage(
            tenant=tenant_a,
            mailbox=mailbox_a,
            thread_id="t-long",
            message_id=f"<{n}@customer.test>",
            sender="Ana <ana@customer.test>" if n == 0 else "Bea <bea@customer.test>",
            subject="Help",
            received_at=now - timedelta(minutes=20 - n),
            recorded_at=now - timedelta(minutes=20 - n),
        )
        for n in range(11)
    )
    draft = make_draft(
        mailbox_a, to=["ana@customer.test"], subject=None, in_reply_to="<0@customer.test>"
    )
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"warnings": "on"})

    assert 'data-warning="not_on_thread"' not in page
    assert list(queue.context["page"].rows) == []
