"""Retention: payloads past each tenant's retention period are dropped, the ledger rows stay, and
events that never became applicable are closed."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from intents.models import Draft, IntentEvent, SendIntent, Suppression
from intents.services.intents import intent_resolve_accepted
from review.journal_words import action_words
from tests.webhooks.conftest import delivery_payload
from webhooks.models import InboundMessage, WebhookEvent
from webhooks.services import retention


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def mailbox(tenant_a, mailbox_row):
    return mailbox_row(tenant_a)


@pytest.fixture
def sending(mailbox, intent_row):
    """An intent whose send is in flight: the provider has a message id, we have not recorded it."""
    return intent_row(mailbox, to=["jane@customer.test"], message_id=None, state="uncertain")


MESSAGE_ID = "<early-bird@sandbox.test>"


def early(kind, mailbox):
    return delivery_payload(kind, (mailbox.inbox_id, MESSAGE_ID, "thr_e", ["jane@customer.test"]))


def test_purge_drops_payloads_past_each_tenants_retention(
    client, hook_for, mailbox_row, intent_row, tenant_a, tenant_b
):
    tenant_a.retention_days = 7
    tenant_a.save(update_fields=["retention_days"])
    hook_a, hook_b = hook_for(tenant_a), hook_for(tenant_b)
    intent_a = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    intent_b = intent_row(mailbox_row(tenant_b), to=["jane@customer.test"])
    hook_a.post(client, delivery_payload("delivered", intent_a))
    hook_b.post(client, delivery_payload("delivered", intent_b))
    WebhookEvent.objects.update(received_at=timezone.now() - timedelta(days=8))

    purged = retention.events_purge_payloads()

    assert purged == 1
    assert WebhookEvent.objects.get(tenant=tenant_a).payload is None
    assert WebhookEvent.objects.get(tenant=tenant_b).payload is not None
    assert WebhookEvent.objects.count() == 2


def test_purge_closes_events_that_never_became_applicable(client, hook, mailbox, sending, tenant_a):
    SendIntent.objects.filter(pk=sending.pk).update(state="cancelled")
    hook.post(client, early("delivered", mailbox))
    WebhookEvent.objects.update(received_at=timezone.now() - timedelta(days=91))

    retention.events_purge_payloads()

    event = WebhookEvent.objects.get()
    assert (event.state, event.payload) == ("ignored", None)


@pytest.mark.parametrize("inbox_case", ["as given", "capitals"])
def test_an_event_waiting_for_an_unresolved_send_outlives_the_retention(
    client,
    hook,
    mailbox,
    sending,
    tenant_a,
    member_of,
    django_capture_on_commit_callbacks,
    inbox_case,
):
    """Found by an outside probe: a bounce that beat an uncertain send's record was closed
    unapplied once the tenant's retention (1 day, say) passed while the send waited for a
    person; when they found the message and marked it sent, the address was never suppressed.
    And again (a reader of the code): for an inbox id with capitals (a custom domain), since the
    ledger holds it lower-cased and the mailbox as AgentMail gave it."""
    if inbox_case == "capitals":
        mailbox.inbox_id = "Support@Acme-Shop.Example"
        mailbox.save(update_fields=["inbox_id"])
    tenant_a.retention_days = 1
    tenant_a.save(update_fields=["retention_days"])
    SendIntent.objects.filter(pk=sending.pk).update(state="needs_attention")
    hook.post(client, early("bounced", mailbox))
    WebhookEvent.objects.update(received_at=timezone.now() - timedelta(days=3))

    assert retention.events_purge_payloads() == 0
    with django_capture_on_commit_callbacks(execute=True):
        intent_resolve_accepted(
            tenant=tenant_a,
            intent_id=sending.pk,
            actor=member_of(tenant_a, "admin").user,
            provider_message_id=MESSAGE_ID,
            evidence="Found in the sent folder",
        )

    assert WebhookEvent.objects.get().state == "applied"
    assert Suppression.objects.filter(tenant=tenant_a, address="jane@customer.test").exists()


def test_the_message_a_pending_draft_answers_keeps_its_preview(mailbox, tenant_a):
    """Found by an outside probe: shortening the retention to a day emptied the customer's
    message on the page of a draft still in review (the reviewer could not see the question)."""
    tenant_a.retention_days = 1
    tenant_a.save(update_fields=["retention_days"])
    old = timezone.now() - timedelta(days=3)

    def inbound(n: int) -> InboundMessage:
        return InboundMessage.objects.create(
            tenant=tenant_a,
            mailbox=mailbox,
            thread_id=f"thr_{n}",
            message_id=f"<q{n}@customer.test>",
            sender="jane@customer.test",
            preview="Where is my order?",
            received_at=old,
        )

    answered, forgotten = inbound(1), inbound(2)
    Draft.objects.create(
        tenant=tenant_a, mailbox=mailbox, in_reply_to=answered.message_id, thread_id="thr_1"
    )

    retention.events_purge_payloads()

    answered.refresh_from_db()
    forgotten.refresh_from_db()
    assert (answered.preview, forgotten.preview) == ("Where is my order?", "")


@pytest.mark.parametrize("state", ["queued", "uncertain", "needs_attention"])
def test_the_thread_of_a_send_still_open_keeps_its_previews(mailbox, tenant_a, intent_row, state):
    """Found by an outside probe: only a draft in review kept the customer's messages of its
    thread. A send held because the customer wrote again after the approval (released only
    once a person has read what they wrote), or one waiting for a person's decision, lost the
    previews to a short retention, and the person deciding saw empty messages."""
    tenant_a.retention_days = 1
    tenant_a.save(update_fields=["retention_days"])
    open_send = intent_row(mailbox, thread_id="thr_open", state=state)
    SendIntent.objects.filter(pk=open_send.pk).update(held_reason="The customer wrote again.")
    intent_row(mailbox, thread_id="thr_done", state="accepted")
    old = timezone.now() - timedelta(days=3)
    for thread in ("thr_open", "thr_done"):
        InboundMessage.objects.create(
            tenant=tenant_a,
            mailbox=mailbox,
            thread_id=thread,
            message_id=f"<{thread}@customer.test>",
            sender="jane@customer.test",
            preview="Cancel my order, please.",
            received_at=old,
        )

    retention.events_purge_payloads()

    assert dict(InboundMessage.objects.values_list("thread_id", "preview")) == {
        "thr_open": "Cancel my order, please.",
        "thr_done": "",
    }


CLOSED = "webhook.event_closed_unapplied"


def closing_rows():
    return IntentEvent.objects.filter(action=CLOSED)


def test_each_event_closed_unapplied_has_its_journal_row_once(
    client, hook, mailbox, intent_row, tenant_a
):
    """Found by a probe: retention moved events still waiting (or failed) to ignored in one
    bulk UPDATE and journaled none of them; every state change has its journal row."""
    known = intent_row(mailbox, to=["jane@customer.test"])
    applied_intent = intent_row(mailbox, to=["max@customer.test"])
    hook.post(client, delivery_payload("delivered", applied_intent))
    hook.post(client, early("delivered", mailbox))  # no send recorded its message id: deferred
    hook.post(client, delivery_payload("bounced", known), apply=False)
    hook.post(client, delivery_payload("complained", known), apply=False)
    failed = WebhookEvent.objects.order_by("-pk").first()
    WebhookEvent.objects.filter(pk=failed.pk).update(state="failed", apply_failures=5)
    WebhookEvent.objects.update(received_at=timezone.now() - timedelta(days=91))
    by_state = dict(WebhookEvent.objects.values_list("state", "pk"))
    applied_journal = IntentEvent.objects.filter(action__startswith="delivery.").count()

    retention.events_purge_payloads()
    retention.events_purge_payloads()

    rows = {
        (row.data["webhook_event_id"], row.from_state, row.to_state, row.intent_id, row.draft_id)
        for row in closing_rows()
    }
    assert closing_rows().count() == 3
    assert rows == {
        (by_state["pending"], "pending", "ignored", known.pk, known.draft_id),
        (by_state["deferred"], "deferred", "ignored", None, None),
        (by_state["failed"], "failed", "ignored", known.pk, known.draft_id),
    }
    assert set(closing_rows().values_list("tenant_id", "actor_kind")) == {(tenant_a.pk, "sweep")}
    assert IntentEvent.objects.filter(action__startswith="delivery.").count() == applied_journal
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied", "ignored"}
    # The send's page names the row in words (its journal lists the rows naming the send).
    assert action_words(CLOSED) == "webhook event closed unapplied"


@pytest.mark.django_db(transaction=True)
def test_an_event_the_applier_holds_is_neither_closed_nor_journaled(
    client, hook, mailbox, intent_row
):
    """The applier takes an event FOR UPDATE SKIP LOCKED and applies it; retention, running
    then, must not also close it (nor journal a close that did not happen, nor empty the payload
    it is applying): it is left for the next run."""
    sent = intent_row(mailbox, to=["jane@customer.test"])
    hook.post(client, delivery_payload("delivered", sent), apply=False)
    WebhookEvent.objects.update(received_at=timezone.now() - timedelta(days=91))
    event = WebhookEvent.objects.get()
    locked, release = threading.Event(), threading.Event()

    def hold_like_the_applier():
        try:
            with transaction.atomic():
                WebhookEvent.objects.select_for_update().get(pk=event.pk)
                locked.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_like_the_applier)
    holder.start()
    try:
        assert locked.wait(5)
        retention.events_purge_payloads()
    finally:
        release.set()
        holder.join()

    event.refresh_from_db()
    assert (event.state, event.payload is None, closing_rows().count()) == ("pending", False, 0)
