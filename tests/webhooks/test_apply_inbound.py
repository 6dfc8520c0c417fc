"""message.received: a short record for reviewers, and a hold on queued replies that the
customer's new message may have made stale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from intents.models import IntentEvent, SendIntent
from tests.webhooks.conftest import received_payload
from webhooks.models import InboundMessage, WebhookEvent


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def mailbox(tenant_a, mailbox_row):
    return mailbox_row(tenant_a)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def test_received_message_is_recorded_with_a_short_preview_only(client, hook, mailbox):
    payload = received_payload(mailbox, thread_id="thr_1", message_id="<m1@customer.test>")

    response = hook.post(client, payload)

    inbound = InboundMessage.objects.get()
    assert response.status_code == 200
    assert (
        inbound.tenant_id,
        inbound.mailbox_id,
        inbound.thread_id,
        inbound.message_id,
        inbound.sender,
        inbound.subject,
    ) == (
        mailbox.tenant_id,
        mailbox.pk,
        "thr_1",
        "<m1@customer.test>",
        "Jane Doe <jane@customer.test>",
        "Re: my order",
    )
    assert inbound.preview == "Actually, please cancel the order instead."


def test_ledger_keeps_no_body_of_received_mail(client, hook, mailbox):
    hook.post(client, received_payload(mailbox, thread_id="thr_1"))

    stored = WebhookEvent.objects.get().payload["message"]
    assert {"text", "html", "size"} & set(stored) == set()
    assert len(stored["preview"]) <= 200


def test_preview_falls_back_to_the_text_and_is_cut_short(client, hook, mailbox):
    payload = received_payload(mailbox, thread_id="thr_1", preview="")
    del payload["message"]["preview"]

    hook.post(client, payload)

    # Cut at 200 characters, without the space the cut left at its end (the applier normalizes
    # the stored payload again, and must get the same preview as the receiver stored).
    text = " ".join(payload["message"]["text"].split())
    assert InboundMessage.objects.get().preview == text[:200].rstrip()
    assert len(text[:200].rstrip()) == 199


def test_a_long_display_name_is_cut_in_its_middle_and_the_senders_address_is_kept(
    client, hook, mailbox, admin_a, make_draft, signed_in
):
    """The sender was cut to its first 320 characters: a display name of that length pushed the
    address out, and the draft page showed the reviewer the name's claim ("support@acme.test")
    instead of who wrote."""
    claim = '"support@acme.test <support@acme.test> ' + "Acme Support Team " * 20 + '"'
    sender = f"{claim} <attacker@evil.test>"
    hook.post(client, received_payload(mailbox, thread_id="thr_long", sender=sender))
    draft = make_draft(
        mailbox,
        to=["attacker@evil.test"],
        subject=None,
        in_reply_to=InboundMessage.objects.get().message_id,
    )

    page = signed_in(admin_a.user).get(reverse("draft", args=[mailbox.tenant.slug, draft.pk]))

    stored = InboundMessage.objects.get().sender
    assert len(sender) > 320 >= len(stored)
    assert stored.startswith('"support@acme.test <support@acme.test> Acme')
    assert stored.endswith('Acme Support Team " <attacker@evil.test>')
    thread = page.content.decode().split('id="thread"')[1]
    assert "data-sender-address>attacker@evil.test</bdi>&gt;" in thread
    assert 'data-warning="not_on_thread"' not in page.content.decode()


def test_sender_given_as_from_underscore_list_is_accepted(client, hook, mailbox):
    payload = received_payload(mailbox, thread_id="thr_1")
    payload["message"]["from_"] = [payload["message"].pop("from")]

    hook.post(client, payload)

    assert InboundMessage.objects.get().sender == "Jane Doe <jane@customer.test>"


def test_same_message_under_two_svix_ids_is_recorded_once(client, hook, mailbox):
    payload = received_payload(mailbox, thread_id="thr_1")

    hook.post(client, payload)
    hook.post(client, payload)

    assert InboundMessage.objects.count() == 1
    assert WebhookEvent.objects.count() == 2


def test_another_message_under_a_recorded_message_id_is_named_not_taken_for_a_copy(
    client, hook, mailbox
):
    """Found by a reader of the code: a received message's Message-ID is its sender's, and a
    second, different message under one already recorded (another sender or thread: a copy
    reusing it, a broken client) was closed as "already recorded", like a redelivery. It is
    still not recorded (one row per mailbox and Message-ID), but its ledger row and the log
    say what it was."""
    hook.post(client, received_payload(mailbox, thread_id="thr_1", message_id="<m@customer.test>"))
    hook.post(client, received_payload(mailbox, thread_id="thr_1", message_id="<m@customer.test>"))
    hook.post(
        client,
        received_payload(
            mailbox,
            thread_id="thr_2",
            message_id="<m@customer.test>",
            sender="Mallory <mallory@elsewhere.test>",
        ),
    )

    outcomes = list(WebhookEvent.objects.order_by("id").values_list("state", "outcome"))
    assert InboundMessage.objects.get().sender == "Jane Doe <jane@customer.test>"
    assert outcomes[1] == ("applied", "inbound message already recorded")
    assert outcomes[2] == (
        "ignored",
        "another message under this Message-ID is recorded (other sender, thread or subject): "
        "not this one; 0 queued send(s) held",
    )


def test_customer_writing_again_holds_a_queued_reply_in_that_thread(
    client, hook, mailbox, intent_row
):
    queued = intent_row(mailbox, thread_id="thr_1", message_id=None, state="queued")

    hook.post(client, received_payload(mailbox, thread_id="thr_1"))

    queued.refresh_from_db()
    assert queued.state == "queued"
    assert queued.held_reason.startswith("customer wrote again")
    assert IntentEvent.objects.filter(intent=queued, action="intent.held").count() == 1


def test_hold_matches_the_intents_provider_thread_too(client, hook, mailbox, intent_row):
    queued = intent_row(mailbox, thread_id="", message_id=None, state="queued")
    SendIntent.objects.filter(pk=queued.pk).update(provider_thread_id="thr_9")

    hook.post(client, received_payload(mailbox, thread_id="thr_9"))

    queued.refresh_from_db()
    assert queued.held_reason != ""


def test_no_hold_for_other_threads_for_sent_replies_or_for_the_message_being_answered(
    client, hook, mailbox, intent_row
):
    other_thread = intent_row(mailbox, thread_id="thr_2", message_id=None, state="queued")
    already_sent = intent_row(mailbox, thread_id="thr_1", state="accepted")
    answers_it = intent_row(
        mailbox,
        thread_id="thr_1",
        message_id=None,
        state="queued",
        in_reply_to="<m1@customer.test>",
    )

    hook.post(client, received_payload(mailbox, thread_id="thr_1", message_id="<m1@customer.test>"))

    held = SendIntent.objects.exclude(held_reason="").values_list("pk", flat=True)
    assert list(held) == []
    assert {other_thread.pk, already_sent.pk, answers_it.pk} == set(
        SendIntent.objects.values_list("pk", flat=True)
    )


def test_no_hold_for_a_message_written_and_recorded_before_the_draft(
    client, hook, mailbox, intent_row
):
    """The agent could have had it: both its own time and ours precede the draft (here the
    draft is dated after now, as if written right after the message was stored)."""
    later = datetime.now(UTC) + timedelta(minutes=10)
    intent_row(mailbox, thread_id="thr_1", message_id=None, state="queued", draft_created_at=later)
    written = iso(datetime.now(UTC) - timedelta(hours=1))

    hook.post(client, received_payload(mailbox, thread_id="thr_1", timestamp=written))

    assert SendIntent.objects.exclude(held_reason="").count() == 0
    assert InboundMessage.objects.count() == 1


def test_a_message_written_before_the_draft_but_delivered_after_it_holds_the_reply(
    client, hook, mailbox, intent_row
):
    """Delivered late (an outage of the receiver): nobody here could have seen it."""
    queued = intent_row(mailbox, thread_id="thr_1", message_id=None, state="queued")
    written = iso(datetime.now(UTC) - timedelta(hours=1))

    hook.post(client, received_payload(mailbox, thread_id="thr_1", timestamp=written))

    queued.refresh_from_db()
    assert queued.held_reason.startswith("customer wrote again")
    message = InboundMessage.objects.get()
    assert message.recorded_at > message.received_at


def test_redelivered_received_event_does_not_hold_twice(client, hook, mailbox, intent_row):
    intent_row(mailbox, thread_id="thr_1", message_id=None, state="queued")
    payload = received_payload(mailbox, thread_id="thr_1")

    hook.post(client, payload, svix_id="msg_same")
    hook.post(client, payload, svix_id="msg_same")
    hook.post(client, payload, svix_id="msg_other")

    assert IntentEvent.objects.filter(action="intent.held").count() == 1


def test_the_migration_dates_messages_stored_before_it_by_their_own_time(mailbox, monkeypatch):
    """webhooks 0008: the column's default would make every old message newer than every
    pending draft; the back-fill (in batches) gives each its own time instead."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("webhooks.migrations.0008_inbound_message_recorded_at")
    monkeypatch.setattr(migration, "BATCH", 2)
    now = datetime.now(UTC)
    for n in range(5):
        InboundMessage.objects.create(
            tenant=mailbox.tenant,
            mailbox=mailbox,
            thread_id="thr_old",
            message_id=f"<old{n}@customer.test>",
            sender="jane@customer.test",
            received_at=now - timedelta(days=n + 1),
        )

    migration.recorded_when_received(apps, None)

    rows = list(InboundMessage.objects.values_list("recorded_at", "received_at"))
    assert len(rows) == 5 and all(recorded == received for recorded, received in rows)
