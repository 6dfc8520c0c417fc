"""Outsider probe: Ana asks where her order is; the agent's reply ("it ships today, here is your
tracking link") is approved. AgentMail fails the call before processing it (a 5xx, a dropped
connection), so the send is uncertain, and the worker's reconciliation repeats the identical
request with the same key, which performs the first send when the original never landed. Ana
writes again meanwhile ("cancel it, I ordered twice by mistake"). A queued send is held for a
person when the customer writes again (intents_hold_stale); an uncertain one was not, and the
replay sent a reply nobody had checked against her new message. The sandbox's ledger counts
what went out."""

from __future__ import annotations

import pytest
from django.db.models.functions import Now
from django.urls import reverse

from intents import errors, sending, services
from intents.models import DraftVersion, IntentEvent, SendAttempt, SendIntent
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import agent_drafts, agent_token, customer_writes
from tests.webhooks.conftest import hook_for  # noqa: F401
from webhooks.models import InboundMessage


def _approved_reply(tenant, admin, mailbox, sandbox, client, hook, text="It ships today."):
    """Ana writes to the mailbox, the agent drafts a reply to her, and the admin approves it
    from the draft page: (Ana's message, the draft as the agent API answered it)."""
    ana = customer_writes(sandbox, hook, client, mailbox, "Ana <ana@customer.test>", "Order 77")
    draft = agent_drafts(
        client,
        agent_token(tenant, admin),
        "reply-to-ana",
        {
            "mailbox": mailbox.address,
            "in_reply_to": ana["message_id"],
            "to": ["ana@customer.test"],
            "text": text,
        },
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    version = DraftVersion.objects.get(draft_id=draft["id"])
    approved = client.post(
        reverse("draft_approve", args=[tenant.slug, draft["id"]]),
        {"version": version.number, "content_hash": version.content_hash},
    )
    assert approved.status_code == 302
    return ana, draft


def _approved_reply_left_uncertain(tenant, member_of, mailbox, sandbox, client, hook):
    admin = member_of(tenant, "admin").user
    ana, draft = _approved_reply(
        tenant, admin, mailbox, sandbox, client, hook, "It ships today; here is your tracking link."
    )
    sandbox.fault("sends", "drop_before")
    sending.run_once(worker="w", limit=1)
    intent = SendIntent.objects.get(draft_id=draft["id"])
    assert intent.state == SendIntent.State.UNCERTAIN
    return ana, intent


@pytest.fixture
def inbox(tenant_a, mailbox_factory, hook_for):  # noqa: F811
    """(tenant A's mailbox, its webhook). The mailbox first: provisioning it registers the
    tenant's webhook, with its own secret."""
    mailbox = mailbox_factory(tenant_a)
    return mailbox, hook_for(tenant_a)


def _reconcile(intent: SendIntent) -> SendIntent:
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
    sending.run_once(worker="w", limit=1)
    intent.refresh_from_db()
    return intent


@pytest.mark.django_db(transaction=True)
def test_a_reply_left_uncertain_is_not_sent_after_the_customer_wrote_again(
    tenant_a,
    member_of,
    inbox,
    sandbox,
    fast_send,  # noqa: F811
    client,
):
    mailbox, hook = inbox
    ana, intent = _approved_reply_left_uncertain(
        tenant_a, member_of, mailbox, sandbox, client, hook
    )
    customer_writes(
        sandbox,
        hook,
        client,
        mailbox,
        "Ana <ana@customer.test>",
        "Re: Order 77",
        in_reply_to=ana["message_id"],
    )

    intent = _reconcile(intent)

    assert sandbox.ledger(inbox_id=mailbox.inbox_id) == []
    assert intent.state == SendIntent.State.NEEDS_ATTENTION
    kinds = SendAttempt.objects.filter(intent=intent).order_by("number")
    assert list(kinds.values_list("kind", flat=True)) == ["send", "lookup"]


@pytest.mark.django_db(transaction=True)
def test_a_reply_left_uncertain_is_replayed_when_nobody_wrote_since(
    tenant_a,
    member_of,
    inbox,
    sandbox,
    fast_send,  # noqa: F811
    client,
):
    mailbox, hook = inbox
    _, intent = _approved_reply_left_uncertain(tenant_a, member_of, mailbox, sandbox, client, hook)

    intent = _reconcile(intent)

    [sent] = sandbox.ledger(inbox_id=mailbox.inbox_id)
    assert (sent["idempotency_key"], intent.state) == (intent.idempotency_key, "accepted")


@pytest.mark.django_db(transaction=True)
def test_a_message_the_release_of_its_hold_showed_does_not_stop_the_replay(
    tenant_a,
    member_of,
    inbox,
    sandbox,
    fast_send,  # noqa: F811
    client,
):
    mailbox, hook = inbox
    admin = member_of(tenant_a, "admin").user
    ana, draft = _approved_reply(tenant_a, admin, mailbox, sandbox, client, hook)
    again = customer_writes(
        sandbox,
        hook,
        client,
        mailbox,
        "Ana <ana@customer.test>",
        "Re: Order 77",
        in_reply_to=ana["message_id"],
    )
    intent = SendIntent.objects.get(draft_id=draft["id"])
    assert intent.held_reason
    read = InboundMessage.objects.get(message_id=again["message_id"])
    released = client.post(
        reverse("intent_release", args=[tenant_a.slug, intent.pk]), {"messages_seen": str(read.pk)}
    )
    assert released.status_code == 302
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
    sandbox.fault("sends", "drop_before")
    sending.run_once(worker="w", limit=1)
    intent.refresh_from_db()
    assert intent.state == SendIntent.State.UNCERTAIN

    intent = _reconcile(intent)

    [sent] = sandbox.ledger(inbox_id=mailbox.inbox_id)
    assert (sent["idempotency_key"], intent.state) == (intent.idempotency_key, "accepted")
    kinds = SendAttempt.objects.filter(intent=intent).order_by("number")
    assert list(kinds.values_list("kind", flat=True)) == ["send", "replay"]


@pytest.mark.django_db(transaction=True)
def test_a_reply_is_held_when_the_customer_wrote_while_a_worker_held_it(
    tenant_a,
    member_of,
    inbox,
    sandbox,
    fast_send,  # noqa: F811
    client,
):
    """The same gap while a worker holds the send (claimed, its call about to start or in
    flight): the send is not queued, so Ana's message held nothing, and the call went out (or,
    answered 429, the send went back to the queue unheld and its next attempt did). The
    pre-call check holds it for a person instead."""
    mailbox, hook = inbox
    admin = member_of(tenant_a, "admin").user
    ana, draft = _approved_reply(tenant_a, admin, mailbox, sandbox, client, hook)
    states: list[str] = []

    def ana_writes_once_the_send_is_claimed() -> bool:
        # run_once asks this before and after each claim: after the first, the send is leased
        # (sending), and Ana's message arrives then.
        states.append(SendIntent.objects.get(draft_id=draft["id"]).state)
        if states.count(SendIntent.State.SENDING) == 1 and states[-1] == SendIntent.State.SENDING:
            customer_writes(
                sandbox,
                hook,
                client,
                mailbox,
                "Ana <ana@customer.test>",
                "Re: Order 77",
                in_reply_to=ana["message_id"],
            )
        return False

    sending.run_once(worker="w", limit=1, stopping=ana_writes_once_the_send_is_claimed)
    intent = SendIntent.objects.get(draft_id=draft["id"])

    assert SendIntent.State.SENDING in states
    assert sandbox.ledger(inbox_id=mailbox.inbox_id) == []
    assert intent.state == SendIntent.State.QUEUED
    assert intent.held_reason.startswith("customer wrote again")
    held = IntentEvent.objects.get(intent=intent, action="intent.held")
    assert (held.actor_kind, held.from_state, held.to_state) == ("worker", "sending", "queued")


@pytest.mark.django_db(transaction=True)
def test_the_customers_message_is_not_taken_as_proof_that_the_reply_went_out(
    tenant_a,
    member_of,
    inbox,
    sandbox,
    fast_send,  # noqa: F811
    client,
):
    """The reply above, left to a person (needs attention: nothing carries its label). Looking
    for proof that it went out, they paste the message id the draft's page shows, which is
    Ana's own message, the one the reply answers. It was taken: the send marked accepted, the
    draft closed as sent, and Ana, who got nothing (the sandbox's ledger is empty), was never
    answered. It is refused naming what that id is."""
    mailbox, hook = inbox
    ana, intent = _approved_reply_left_uncertain(
        tenant_a, member_of, mailbox, sandbox, client, hook
    )
    again = customer_writes(
        sandbox,
        hook,
        client,
        mailbox,
        "Ana <ana@customer.test>",
        "Re: Order 77",
        in_reply_to=ana["message_id"],
    )
    intent = _reconcile(intent)
    assert intent.state == SendIntent.State.NEEDS_ATTENTION

    for pasted in (ana["message_id"], again["message_id"]):
        with pytest.raises(errors.InvalidInput) as refused:
            services.intent_resolve_accepted(
                tenant=tenant_a,
                intent_id=intent.pk,
                actor=intent.approver,
                provider_message_id=pasted,
                evidence="found it in the inbox",
            )
        assert (refused.value.code, refused.value.field) == (
            "message_id_received",
            "provider_message_id",
        )
        assert pasted in refused.value.message

    intent.refresh_from_db()
    assert sandbox.ledger(inbox_id=mailbox.inbox_id) == []
    assert (intent.state, intent.provider_message_id) == (SendIntent.State.NEEDS_ATTENTION, "")
