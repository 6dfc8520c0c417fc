"""A bounced recipient is suppressed for the tenant: a new draft to that address is refused."""

from __future__ import annotations

import pytest

from intents import services as intent_services
from intents.errors import DraftError
from tests.webhooks.conftest import delivery_payload


def test_bounced_recipient_cannot_be_drafted_to_again(
    client, tenant_a, hook_for, mailbox_row, intent_row, member_of
):
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a)
    intent = intent_row(mailbox, to=["jane@customer.test"])
    person = member_of(tenant_a, "approver").user
    hook.post(client, delivery_payload("bounced", intent))

    with pytest.raises(DraftError) as refused:
        intent_services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["Jane@Customer.test"],
            subject="Following up",
            text="Hello again",
            actor_user=person,
        )

    assert refused.value.code == "recipient_suppressed"
    assert "jane@customer.test" in refused.value.message.lower()


def test_bounce_in_another_tenant_does_not_suppress_here(
    client, tenant_a, tenant_b, hook_for, mailbox_row, intent_row, member_of
):
    hook_b = hook_for(tenant_b)
    intent_b = intent_row(mailbox_row(tenant_b), to=["jane@customer.test"])
    mailbox_a = mailbox_row(tenant_a)
    person = member_of(tenant_a, "approver").user
    hook_b.post(client, delivery_payload("bounced", intent_b))

    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox_a,
        to=["jane@customer.test"],
        subject="Hello",
        text="Hi",
        actor_user=person,
    )

    assert draft.pk is not None


def test_queued_intent_to_a_bounced_address_is_blocked_before_any_provider_call(
    client, sandbox, tenant_a, hook_for, mailbox_factory, intent_row, member_of
):
    from intents import sending

    # The mailbox first: provisioning registers the tenant's webhook at the sandbox, whose
    # secret replaces (retires) any stored before it, as a webhook created anew at AgentMail does.
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    person = member_of(tenant_a, "approver").user
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["jane@customer.test"],
        subject="Second reply",
        text="Hello again",
        actor_user=person,
    )
    queued = intent_services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=person,
    )
    earlier = intent_row(mailbox, to=["jane@customer.test"])
    hook.post(client, delivery_payload("bounced", earlier))

    sending.run_once(intent_id=queued.pk, limit=1)
    queued.refresh_from_db()

    assert queued.state == "blocked"
    assert sandbox.ledger(idempotency_key=queued.idempotency_key) == []
    assert sandbox.requests(idempotency_key=queued.idempotency_key) == []
