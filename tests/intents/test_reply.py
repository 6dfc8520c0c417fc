"""Issue 14 item 2: a reply goes out with the subject and thread that were approved.

AgentMail's reply route takes no subject: it answers the message named by `in_reply_to`, joins its
thread and derives "Re: <its subject>". So that message must be an inbound message of the same
mailbox (and thread), and the subject stored, shown and hashed is the derived one.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from intents import errors, sending, services
from intents.hashing import content_hash, version_hash
from intents.models import Draft, DraftVersion, IntentEvent
from tests.factories import make_local_mailbox
from tests.intents.helpers import set_state
from webhooks.models import InboundMessage
from webhooks.normalize import normalize

pytestmark = pytest.mark.django_db


def inbound(mailbox, *, message_id, thread_id="thr-kenji", subject="Where is my order?"):
    return InboundMessage.objects.create(
        tenant=mailbox.tenant,
        mailbox=mailbox,
        thread_id=thread_id,
        message_id=message_id,
        sender="Kenji <kenji@example.com>",
        subject=subject,
        received_at=timezone.now() - timedelta(minutes=5),
    )


def nothing_written():
    return (Draft.objects.count(), DraftVersion.objects.count(), IntentEvent.objects.count()) == (
        0,
        0,
        0,
    )


# --- in_reply_to must name an inbound message of this mailbox and thread -------------------------


def test_reply_to_an_unknown_message_is_refused_naming_in_reply_to(new_draft):
    with pytest.raises(errors.InvalidInput) as refused:
        new_draft(subject="", in_reply_to="<nobody@example.com>")
    assert refused.value.status == 422
    assert refused.value.field == "in_reply_to"
    assert "<nobody@example.com>" in refused.value.message
    assert nothing_written()


def test_reply_to_another_mailboxs_message_is_refused(new_draft, tenant_a):
    other = make_local_mailbox(tenant_a, username="billing")
    inbound(other, message_id="<aisha@example.com>", subject="My password")
    with pytest.raises(errors.InvalidInput) as refused:
        new_draft(in_reply_to="<aisha@example.com>")
    assert refused.value.field == "in_reply_to"
    assert nothing_written()


def test_reply_to_another_tenants_message_is_refused(new_draft, tenant_b):
    inbound(make_local_mailbox(tenant_b), message_id="<other-tenant@example.com>")
    with pytest.raises(errors.InvalidInput) as refused:
        new_draft(in_reply_to="<other-tenant@example.com>")
    assert refused.value.field == "in_reply_to"
    assert nothing_written()


def test_reply_to_a_message_of_another_thread_is_refused(new_draft, local_mailbox):
    inbound(local_mailbox, message_id="<kenji@example.com>", thread_id="thr-kenji")
    inbound(local_mailbox, message_id="<aisha@example.com>", thread_id="thr-aisha")
    with pytest.raises(errors.InvalidInput) as refused:
        new_draft(in_reply_to="<aisha@example.com>", thread_id="thr-kenji")
    assert refused.value.field == "in_reply_to"
    assert "thr-kenji" in refused.value.message
    assert nothing_written()


def test_a_new_message_naming_a_thread_is_refused_naming_thread_id(new_draft, local_mailbox):
    """AgentMail's send route starts a new thread: filed under Kenji's, the reviewer would see
    his conversation beside a message that is not part of it."""
    inbound(local_mailbox, message_id="<kenji@example.com>", thread_id="thr-kenji")

    with pytest.raises(errors.InvalidInput) as refused:
        new_draft(thread_id="thr-kenji")

    assert refused.value.status == 422
    assert refused.value.code == "thread_id_without_in_reply_to"
    assert refused.value.field == "thread_id"
    assert "in_reply_to" in refused.value.message
    assert nothing_written()


def test_the_database_refuses_a_new_message_in_a_thread(new_draft):
    """The same rule as a constraint (draft_thread_only_for_replies): no path, the service's or
    a bulk write's, leaves a new message filed under a thread."""
    from django.db import IntegrityError, transaction

    draft = new_draft()

    with (
        pytest.raises(IntegrityError, match="draft_thread_only_for_replies"),
        transaction.atomic(),
    ):
        Draft.objects.filter(pk=draft.pk).update(thread_id="thr-kenji")
    draft.refresh_from_db()
    assert draft.thread_id == ""


def test_a_reply_naming_its_own_thread_is_kept_in_it(new_draft, local_mailbox):
    inbound(local_mailbox, message_id="<kenji@example.com>", thread_id="thr-kenji")

    draft = new_draft(subject=None, in_reply_to="<kenji@example.com>", thread_id="thr-kenji")

    assert (draft.thread_id, draft.in_reply_to) == ("thr-kenji", "<kenji@example.com>")


# --- the subject of a reply is the one AgentMail will use ----------------------------------------


def test_reply_subject_and_thread_come_from_the_message_answered(new_draft, local_mailbox):
    inbound(local_mailbox, message_id="<kenji@example.com>", subject="Where is my order?")

    draft = new_draft(subject=None, in_reply_to="<kenji@example.com>")

    version = draft.versions.get()
    assert version.subject == "Re: Where is my order?"
    assert draft.thread_id == "thr-kenji"
    assert version.content_hash == content_hash(
        mailbox_id=local_mailbox.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Re: Where is my order?",
        text="We refunded your order.",
        html="",
        in_reply_to="<kenji@example.com>",
    )
    assert version_hash(version) == version.content_hash


def test_reply_subject_is_not_prefixed_twice(new_draft, local_mailbox):
    inbound(local_mailbox, message_id="<k2@example.com>", subject="RE: Where is my order?")

    draft = new_draft(subject="RE: Where is my order?", in_reply_to="<k2@example.com>")

    assert draft.versions.get().subject == "RE: Where is my order?"


def test_reply_accepts_the_derived_subject_written_out(new_draft, local_mailbox):
    inbound(local_mailbox, message_id="<kenji@example.com>")

    draft = new_draft(subject="Re: Where is my order?", in_reply_to="<kenji@example.com>")

    assert draft.versions.get().subject == "Re: Where is my order?"


def test_reply_with_another_subject_is_refused_naming_subject(new_draft, local_mailbox):
    inbound(local_mailbox, message_id="<kenji@example.com>")

    with pytest.raises(errors.InvalidInput) as refused:
        new_draft(subject="Re: My password", in_reply_to="<kenji@example.com>")

    assert refused.value.status == 422
    assert refused.value.field == "subject"
    assert "Re: Where is my order?" in refused.value.message
    assert nothing_written()


def test_a_new_message_still_needs_its_own_subject(new_draft):
    with pytest.raises(errors.InvalidInput) as refused:
        new_draft(subject=None)
    assert refused.value.field == "subject"
    assert nothing_written()


# --- later versions keep the derived subject -----------------------------------------------------


def test_a_new_version_of_a_reply_keeps_the_derived_subject(
    new_draft, local_mailbox, tenant_a, approver
):
    inbound(local_mailbox, message_id="<kenji@example.com>")
    draft = new_draft(in_reply_to="<kenji@example.com>", subject=None)

    version = services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject=None,
        text="Your parcel arrives tomorrow.",
        html="",
        actor_user=approver,
    )

    assert version.subject == "Re: Where is my order?"
    assert version_hash(version) == version.content_hash
    with pytest.raises(errors.InvalidInput) as refused:
        services.draft_add_version(
            tenant=tenant_a,
            draft_id=draft.pk,
            to=["customer@example.com"],
            cc=[],
            bcc=[],
            subject="Something else",
            text="Your parcel arrives tomorrow.",
            html="",
            actor_user=approver,
        )
    assert refused.value.field == "subject"
    assert DraftVersion.objects.filter(draft=draft).count() == 2


def test_a_reopened_reply_keeps_the_derived_subject(new_draft, local_mailbox, tenant_a, approver):
    inbound(local_mailbox, message_id="<kenji@example.com>")
    draft = new_draft(in_reply_to="<kenji@example.com>", subject=None)
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=approver,
    )
    set_state(intent, "failed")

    services.draft_reopen(tenant=tenant_a, draft_id=draft.pk, actor=approver, reason="Try again")

    assert draft.versions.get(number=2).subject == "Re: Where is my order?"


# --- what the provider received is what was approved ---------------------------------------------


def ledger_view(send):
    return {
        "subject": send["subject"],
        "thread_id": send["thread_id"],
        "in_reply_to": send["in_reply_to"],
        "to": send["to"],
        "cc": send["cc"],
        "bcc": send["bcc"],
        "text": send["text"],
    }


def approved_view(intent, thread_id):
    version = DraftVersion.objects.get(pk=intent.draft_version_id)
    return {
        "subject": version.subject,
        "thread_id": thread_id,
        "in_reply_to": intent.draft.in_reply_to or None,
        "to": version.to,
        "cc": version.cc,
        "bcc": version.bcc,
        "text": version.text,
    }


@pytest.mark.django_db(transaction=True)
def test_the_provider_sends_exactly_the_approved_new_message(live):
    intent = live.approved(cc=["boss@example.com"], bcc=["audit@example.com"])

    assert sending.run_once(worker="w", limit=1) == 1

    intent.refresh_from_db()
    [sent] = live.sandbox.ledger(idempotency_key=intent.idempotency_key)
    assert sent["route"] == "send"
    assert intent.provider_thread_id == sent["thread_id"]
    assert ledger_view(sent) == approved_view(intent, intent.provider_thread_id)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("Where is my order #77?", "Re: Where is my order #77?"),
        ("RE: Where is my order #77?", "RE: Where is my order #77?"),
        ("", "Re: "),
        # Stored stripped, the subject was hashed as "Re: re: ..." while AgentMail sent
        # "Re:   re: ..." (an outside probe): it is stored as the customer wrote it.
        ("  re: where is my order", "Re:   re: where is my order"),
    ],
)
def test_the_provider_sends_exactly_the_approved_reply(live, asked, answered):
    kenji = live.sandbox.inbound(
        live.mailbox.inbox_id,
        from_="Kenji <kenji@example.com>",
        subject=asked,
        text="It has not arrived.",
    )
    aisha = live.sandbox.inbound(
        live.mailbox.inbox_id,
        from_="Aisha <aisha@example.com>",
        subject="Password reset",
        text="I cannot sign in.",
    )
    for message, subject in ((kenji, asked), (aisha, "Password reset")):
        received = {"event_type": "message.received", "message": {"subject": subject}}
        InboundMessage.objects.create(
            tenant=live.tenant,
            mailbox=live.mailbox,
            thread_id=message["thread_id"],
            message_id=message["message_id"],
            sender="customer",
            # Through the receiver's own normalisation, as a webhook stores it.
            subject=normalize(received).inbound.subject,
            received_at=timezone.now(),
        )
    with pytest.raises(errors.InvalidInput) as refused:
        live.approved(
            to=["kenji@example.com"],
            subject=answered,
            in_reply_to=aisha["message_id"],
            thread_id=kenji["thread_id"],
        )
    assert refused.value.field == "in_reply_to"

    intent = live.approved(
        to=["kenji@example.com"],
        subject=None,
        text="It arrives tomorrow.",
        in_reply_to=kenji["message_id"],
    )
    assert sending.run_once(worker="w", limit=1) == 1

    intent.refresh_from_db()
    [sent] = live.sandbox.ledger(idempotency_key=intent.idempotency_key)
    assert sent["route"] == "reply"
    assert sent["thread_id"] == kenji["thread_id"] == intent.draft.thread_id
    assert ledger_view(sent) == approved_view(intent, kenji["thread_id"])
    assert sent["subject"] == answered
