"""Acceptance (issue 17): an agent's draft goes through a person's edit, approval, the worker's
send through the sandbox and a sandbox bounce; a receiver on loopback verifies every delivery with
the ``standardwebhooks`` library and sees each event exactly once, in order, also after it
failed for a while, and across a secret rotation."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connections
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from config.clock import db_now
from intents import sending
from intents import services as intent_services
from intents.events.delivery import deliver_due
from intents.models import AgentEventDelivery, AgentEventEndpoint
from intents.services.event_endpoints import endpoint_rotate_secret, new_secret
from tenants.models import AgentToken
from tenants.tokens import token_create
from tests.factories import make_local_mailbox
from webhooks import registration
from webhooks.models import RecipientDelivery


@pytest.fixture
def short_lived_connections(monkeypatch):
    # As tests/webhooks/test_end_to_end.py: the live server's request threads must not keep a
    # database connection past the test.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)


def agent_token(tenant, admin) -> AgentToken:
    token, _ = token_create(
        tenant=tenant,
        name=f"agent-{uuid.uuid4().hex[:6]}",
        scopes=["drafts:write", "drafts:read"],
        actor=admin,
    )
    return token


def drive_draft_to_bounce(tenant, mailbox, approver, sandbox, token):
    """Agent writes v1, a person edits to v2, approves v2, the worker sends, the sandbox tells us
    delivered then bounced (for ``ops``, the recipient the person added). The addresses are
    new each time: the sandbox remembers its bounces across tests."""
    jane, ops = (f"{who}-{uuid.uuid4().hex[:6]}@customer.test" for who in ("jane", "ops"))
    draft = intent_services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=[jane],
        subject="Your refund",
        text="We refunded your order today.",
        agent_token=token,
    )
    edited = intent_services.draft_add_version(
        tenant=tenant,
        draft_id=draft.pk,
        to=[jane, ops],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="We refunded your whole order today.",
        html="",
        actor_user=approver,
        base_version=1,
    )
    intent = intent_services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=2,
        content_hash=edited.content_hash,
        actor=approver,
    )
    sending.run_once(intent_id=intent.pk)
    intent.refresh_from_db()
    sandbox.wait_for(
        lambda: RecipientDelivery.objects.filter(intent=intent, state="delivered").count() == 2,
        timeout=45,
    )
    sandbox.trigger(intent.provider_message_id, "message.bounced", recipients=[ops])
    sandbox.wait_for(
        lambda: RecipientDelivery.objects.filter(intent=intent, state="bounced").exists(),
        timeout=45,
    )
    return draft, intent, jane, ops


EXPECTED = [
    "draft.edited",
    "draft.approved",
    "send.accepted",
    "send.delivered",
    "send.bounced",
]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_each_event_arrives_once_in_order_verified_by_the_library(
    live_server,
    short_lived_connections,
    sandbox,
    settings,
    tenant_a,
    member_of,
    mailbox_factory,
    receiver,
    subscribe,
):
    settings.PUBLIC_BASE_URL = live_server.url
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    subscribe(tenant_a, receiver)
    token = agent_token(tenant_a, admin)

    draft, intent, jane, ops = drive_draft_to_bounce(tenant_a, mailbox, approver, sandbox, token)
    attempts = deliver_due()
    again = deliver_due()

    assert receiver.types == EXPECTED
    assert (attempts, again, receiver.refused) == (5, 0, [])
    assert len({h["webhook-id"] for h in receiver.headers}) == 5
    edited, approved, accepted, delivered, bounced = (e["data"] for e in receiver.accepted)
    assert edited["draft"] == {
        "id": draft.pk,
        "version": 2,
        "status": "pending",
        "mailbox": {"id": mailbox.pk, "address": mailbox.address},
        "agent_token_id": token.pk,
        "thread_id": "",
    }
    assert edited["change"]["recipients"]["to"] == {"added": [ops], "removed": []}
    assert edited["change"]["text"]["ops"] == [
        {"op": "insert", "at": 17, "before": "", "after": "whole "}
    ]
    assert (edited["change"]["from_version"], edited["change"]["to_version"]) == (1, 2)
    assert approved["change"] == edited["change"]
    assert (approved["draft"]["status"], approved["intent"]) == (
        "approved",
        {"id": intent.pk, "state": "queued"},
    )
    assert accepted["provider_message_id"] == intent.provider_message_id
    assert (accepted["draft"]["version"], accepted["intent"]["state"]) == (2, "accepted")
    assert sorted(delivered["recipients"]) == sorted([jane, ops])
    assert (bounced["recipients"], bounced["suppressed"]) == ([ops], [ops])
    assert set(AgentEventDelivery.objects.values_list("status", "attempts")) == {("delivered", 1)}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_receiver_that_fails_for_a_while_gets_every_event_after_in_order(
    live_server,
    short_lived_connections,
    sandbox,
    settings,
    tenant_a,
    member_of,
    mailbox_factory,
    receiver,
    subscribe,
):
    settings.PUBLIC_BASE_URL = live_server.url
    settings.AGENT_EVENTS_RETRY_DELAYS = [0.0] * 8
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    subscribe(tenant_a, receiver)
    receiver.fail_next = 6

    drive_draft_to_bounce(tenant_a, mailbox, approver, sandbox, agent_token(tenant_a, admin))
    attempts = deliver_due()

    assert receiver.types == EXPECTED
    assert (attempts, receiver.fail_next, receiver.refused) == (11, 0, [])
    # The first delivery took the six failures (it held the others back, to keep the order).
    assert list(AgentEventDelivery.objects.order_by("id").values_list("attempts", flat=True)) == [
        7,
        1,
        1,
        1,
        1,
    ]


@pytest.mark.django_db(transaction=True)
def test_a_forged_or_stale_signature_is_refused_by_the_library(
    tenant_a, member_of, receiver, subscribe
):
    """A captured delivery verifies; the same bytes with one character changed, signed with
    another secret, or presented six minutes later, are refused by standardwebhooks itself."""
    approver = member_of(tenant_a, "approver").user
    mailbox = make_local_mailbox(tenant_a)
    subscribe(tenant_a, receiver, types=["draft.rejected"])
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
    intent_services.draft_reject(
        tenant=tenant_a, draft_id=draft.pk, reason="Wrong tone", actor=approver
    )
    deliver_due()
    headers = receiver.headers[0]
    raw = receiver.raw[0]
    other = Webhook(new_secret())
    forged_body = raw.replace(b"Wrong tone", b"Right tone")
    resigned = {
        **headers,
        "webhook-signature": other.sign(headers["webhook-id"], datetime.now(UTC), raw.decode()),
    }

    assert receiver.accepted[0]["data"]["reason"] == "Wrong tone"
    assert Webhook(receiver.secret).verify(raw, headers)["type"] == "draft.rejected"
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(receiver.secret).verify(forged_body, headers)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(receiver.secret).verify(raw, resigned)
    with (
        time_machine.travel(datetime.now(UTC) + timedelta(minutes=6)),
        pytest.raises(WebhookVerificationError, match="too old"),
    ):
        Webhook(receiver.secret).verify(raw, headers)


@pytest.mark.django_db(transaction=True)
def test_after_a_rotation_both_secrets_verify_until_the_grace_ends_then_only_the_new(
    tenant_a, member_of, receiver, subscribe
):
    endpoint = subscribe(tenant_a, receiver, types=["draft.rejected"])
    old = receiver.secret
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    mailbox = make_local_mailbox(tenant_a)

    def reject_one() -> None:
        draft = intent_services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["jane@customer.test"],
            subject="Hi",
            text="Hello",
            actor_user=approver,
        )
        intent_services.draft_reject(
            tenant=tenant_a, draft_id=draft.pk, reason="No", actor=approver
        )

    _, new = endpoint_rotate_secret(tenant=tenant_a, endpoint_id=endpoint.pk, actor=admin)
    receiver.secret = new
    reject_one()
    deliver_due()
    AgentEventEndpoint.objects.filter(pk=endpoint.pk).update(
        previous_secret_expires_at=db_now() - timedelta(seconds=1)
    )
    reject_one()
    deliver_due()
    (during, after), headers = receiver.raw, receiver.headers

    assert len(receiver.accepted) == 2
    assert len(headers[0]["webhook-signature"].split()) == 2
    assert Webhook(old).verify(during, headers[0])["type"] == "draft.rejected"
    assert Webhook(new).verify(during, headers[0])["type"] == "draft.rejected"
    assert len(headers[1]["webhook-signature"].split()) == 1
    assert Webhook(new).verify(after, headers[1])["type"] == "draft.rejected"
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(old).verify(after, headers[1])
