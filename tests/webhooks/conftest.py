"""Test data for webhook tests: a tenant's endpoint with a sealed signing secret, mailbox rows, and
accepted send intents created directly with the ORM (data setup, not a mock of any service)."""

from __future__ import annotations

import base64
import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from django.urls import reverse
from django.utils import timezone
from svix.webhooks import Webhook

from intents.hashing import content_hash
from intents.models import Draft, DraftVersion, SendIntent
from mailboxes.models import Mailbox
from tests.factories import UserFactory, make_local_mailbox
from webhooks.models import WebhookEndpoint, WebhookSecret
from webhooks.services import applier

_seq = count(1)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def add_secret(
    endpoint: WebhookEndpoint, plaintext: str, *, retired: bool = False
) -> WebhookSecret:
    secret = WebhookSecret(endpoint=endpoint)
    secret.sealed = secret.seal(plaintext)
    secret.retired_at = timezone.now() if retired else None
    secret.save()
    return secret


class Hook:
    """One tenant's receiver: its endpoint, current secret and a signed poster."""

    def __init__(self, endpoint: WebhookEndpoint, secret: str):
        self.endpoint = endpoint
        self.secret = secret
        self.tenant = endpoint.tenant

    @property
    def url(self) -> str:
        return reverse("webhooks_agentmail", kwargs={"endpoint_id": self.endpoint.public_id})

    def headers(self, body: str | bytes, *, svix_id: str, secret: str | None = None, at=None):
        at = at or datetime.now(UTC)
        text = body if isinstance(body, str) else body.decode("utf-8", "replace")
        signature = Webhook(secret or self.secret).sign(svix_id, at, text)
        return {
            "svix-id": svix_id,
            "svix-timestamp": str(int(at.timestamp())),
            "svix-signature": signature,
        }

    def post(
        self,
        client,
        payload: dict,
        *,
        svix_id: str | None = None,
        url: str | None = None,
        apply: bool = True,
    ):
        body = json.dumps(payload, separators=(",", ":"))
        svix_id = svix_id or new_svix_id()
        return self.post_raw(
            client, body.encode(), self.headers(body, svix_id=svix_id), url=url, apply=apply
        )

    def post_raw(
        self, client, body: bytes, headers: dict, *, url: str | None = None, apply: bool = True
    ):
        """Post a delivery; with ``apply``, then run the batch applier as the task the receiver
        wakes would (a test's on-commit callbacks do not run inside its transaction)."""
        response = client.post(
            url or self.url,
            data=body,
            content_type="application/json",
            headers=headers,
        )
        if apply:
            apply_stored()
        return response


def apply_stored() -> int:
    """What the woken ``webhooks.tasks.apply_pending`` does: batches until nothing is pending."""
    return applier.events_apply_pending(settle=0)


def new_svix_id() -> str:
    return "msg_" + uuid.uuid4().hex


@pytest.fixture
def hook_for(db):
    """hook_for(tenant) -> Hook with an active endpoint and one sealed secret."""

    def make(tenant) -> Hook:
        endpoint = WebhookEndpoint.objects.create(
            tenant=tenant, status=WebhookEndpoint.Status.ACTIVE, provider_webhook_id="ep_test"
        )
        secret = new_secret()
        add_secret(endpoint, secret)
        return Hook(endpoint, secret)

    return make


@pytest.fixture
def mailbox_row(db):
    """mailbox_row(tenant, username) -> an active Mailbox with a sealed dummy key."""

    return make_local_mailbox


@pytest.fixture
def intent_row(db):
    """intent_row(mailbox, to=[...], cc=[...], message_id=..., thread_id=..., state=...)"""

    def make(
        mailbox: Mailbox,
        *,
        to=("jane@customer.test",),
        cc=(),
        message_id: str | None = "",
        thread_id: str = "",
        state: str = SendIntent.State.ACCEPTED,
        in_reply_to: str = "",
        draft_created_at=None,
        approver=None,
    ) -> SendIntent:
        n = next(_seq)
        approver = approver or UserFactory()
        if message_id == "":
            message_id = f"<{uuid.uuid4()}@sandbox.test>"
        if thread_id and not in_reply_to:
            # A draft in a thread is a reply (draft_thread_only_for_replies): to the customer's
            # message that opened it, which these tests need not store.
            in_reply_to = f"<opened-{thread_id}@customer.test>"
        draft = Draft.objects.create(
            tenant=mailbox.tenant,
            mailbox=mailbox,
            thread_id=thread_id,
            in_reply_to=in_reply_to,
            status=Draft.Status.APPROVED,
        )
        if draft_created_at is not None:
            Draft.objects.filter(pk=draft.pk).update(created_at=draft_created_at)
        digest = content_hash(
            mailbox_id=mailbox.pk,
            to=list(to),
            cc=list(cc),
            bcc=[],
            subject=f"Re: order {n}",
            text="Thanks",
            html="",
            in_reply_to=in_reply_to,
        )
        version = DraftVersion.objects.create(
            draft=draft,
            tenant=mailbox.tenant,
            number=1,
            to=list(to),
            cc=list(cc),
            subject=f"Re: order {n}",
            text="Thanks",
            author_kind=DraftVersion.Author.AGENT,
            content_hash=digest,
        )
        now = timezone.now()
        return SendIntent.objects.create(
            tenant=mailbox.tenant,
            mailbox=mailbox,
            draft=draft,
            draft_version=version,
            approver=approver,
            approved_at=now,
            content_hash=digest,
            recipients={"to": list(to), "cc": list(cc), "bcc": []},
            idempotency_key=f"cs-{uuid.uuid4()}",
            state=state,
            next_attempt_at=now,
            provider_message_id=message_id or "",
            provider_thread_id=thread_id if state == SendIntent.State.ACCEPTED else "",
        )

    return make


def delivery_payload(kind: str, intent_or_ids, *, recipients=None, **extra) -> dict:
    """A real-shaped AgentMail payload (reference §5.3) for a sent message."""
    if isinstance(intent_or_ids, SendIntent):
        inbox_id = intent_or_ids.mailbox.inbox_id
        message_id = intent_or_ids.provider_message_id
        thread_id = intent_or_ids.provider_thread_id or "thr_1"
        everyone = intent_or_ids.recipients["to"] + intent_or_ids.recipients["cc"]
    else:
        inbox_id, message_id, thread_id, everyone = intent_or_ids
    recipients = list(everyone if recipients is None else recipients)
    base = {
        "inbox_id": inbox_id,
        "thread_id": thread_id,
        "message_id": message_id,
        "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    key = {
        "sent": "send",
        "delivered": "delivery",
        "bounced": "bounce",
        "complained": "complaint",
        "rejected": "reject",
    }[kind]
    if kind == "bounced":
        obj = {
            **base,
            "type": extra.get("type", "Permanent"),
            "sub_type": "General",
            "recipients": [{"address": a, "status": "5.1.1"} for a in recipients],
        }
    elif kind == "complained":
        obj = {**base, "type": "abuse", "sub_type": "spam", "recipients": recipients}
    elif kind == "rejected":
        obj = {**base, "reason": "Recipient rejected"}
    else:
        obj = {**base, "recipients": recipients}
    return {
        "type": "event",
        "event_type": f"message.{kind}",
        "event_id": "evt_" + uuid.uuid4().hex,
        key: obj,
    }


def received_payload(mailbox: Mailbox, *, thread_id: str, message_id: str | None = None, **kw):
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    message = {
        "inbox_id": mailbox.inbox_id,
        "thread_id": thread_id,
        "message_id": message_id or f"<{uuid.uuid4()}@customer.test>",
        "labels": ["received", "unread"],
        "timestamp": kw.get("timestamp", now),
        "from": kw.get("sender", "Jane Doe <jane@customer.test>"),
        "to": [mailbox.address],
        "subject": kw.get("subject", "Re: my order"),
        "preview": kw.get("preview", "Actually, please cancel the order instead."),
        "text": kw.get("text", "Actually, please cancel the order instead. " * 50),
        "html": "<p>Actually, please cancel the order instead.</p>",
        "size": 1234,
        "created_at": now,
        "updated_at": now,
    }
    return {
        "type": "event",
        "event_type": "message.received",
        "event_id": "evt_" + uuid.uuid4().hex,
        "message": message,
        "thread": {
            "inbox_id": mailbox.inbox_id,
            "thread_id": thread_id,
            "labels": ["received"],
            "timestamp": now,
            "senders": [message["from"]],
            "recipients": [mailbox.address],
            "message_count": 2,
            "last_message_id": message["message_id"],
        },
    }


def stale(minutes: float) -> datetime:
    return datetime.now(UTC) - timedelta(minutes=minutes)
