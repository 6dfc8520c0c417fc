"""The suite's shared fixtures (tests/conftest.py) hand each test a clean start."""

from __future__ import annotations

import uuid

import pytest
from agentmail.inboxes import CreateInboxRequest

from intents import sending
from intents import services as intent_services


@pytest.mark.django_db
def test_a_test_gets_a_sandbox_without_what_an_earlier_test_left_in_it(
    request, sandbox_server, tenant_a, member_of
):
    """One sandbox AgentMail serves the whole session (one per xdist worker). An earlier test
    bounced a send to ops@customer.test, which AgentMail suppresses for the organization, switched
    webhooks off and moved the provider's clock: the backfill tests' sends to that address ended
    ``failed`` (403 message_rejected) after the webhook end-to-end test, in one session."""
    earlier = sandbox_server.sdk()
    inbox = earlier.inboxes.create(
        request=CreateInboxRequest(username=f"earlier-{uuid.uuid4().hex[:8]}")
    )
    bounced = earlier.inboxes.messages.send(
        inbox.inbox_id, to="ops@customer.test", subject="Hello", text="Hello"
    )
    sandbox_server.trigger(bounced.message_id, "message.bounced")
    sandbox_server.config(webhooks_enabled=False)
    sandbox_server.advance_clock(3600)

    sandbox = request.getfixturevalue("sandbox")
    mailbox = request.getfixturevalue("mailbox_factory")(tenant_a)
    approver = member_of(tenant_a, "approver").user
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["ops@customer.test"],
        subject="Your refund",
        text="We refunded your order.",
        actor_user=approver,
    )
    intent = intent_services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=approver,
    )
    sending.run_once(intent_id=intent.pk)
    intent.refresh_from_db()

    assert (
        intent.state,
        sandbox.suppressions(),
        sandbox.config()["webhooks_enabled"],
        sandbox.clock()["offset_seconds"],
    ) == ("accepted", [], True, 0.0)
