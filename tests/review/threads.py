"""What the tests of a thread's customers and the agent's replies share
(tests/review/test_thread_strangers.py, test_probe_sender_forms.py): a customer's message that
reaches the sandbox inbox and our receiver through its signed webhook, and an agent's draft posted
with a token through the JSON API."""

from __future__ import annotations

import json
import re

from django.urls import reverse

from intents import sending
from intents.models import Draft, DraftVersion
from tenants.tokens import token_create
from tests.webhooks.conftest import received_payload


def customer_writes(
    sandbox, hook, client, mailbox, sender: str, subject: str, files=(), in_reply_to=None
) -> dict:
    """Mail into the sandbox inbox, and its signed message.received webhook to our receiver.
    ``in_reply_to``: a message it answers (the sandbox threads it there, as AgentMail does)."""
    extra = {"attachments": list(files)} if files else {}
    message = sandbox.inbound(
        mailbox.inbox_id,
        from_=sender,
        subject=subject,
        text=subject,
        in_reply_to=in_reply_to,
        **extra,
    )
    payload = received_payload(
        mailbox,
        thread_id=message["thread_id"],
        message_id=message["message_id"],
        subject=subject,
        sender=sender,
    )
    hook.post(client, payload)
    return message


def agent_drafts(client, token: str, key: str, body: dict) -> dict:
    """``body`` posted to /api/v1/drafts with the token and idempotency key; the draft (201)."""
    response = client.post(
        "/api/v1/drafts",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
    )
    assert response.status_code == 201, response.content
    return response.json()


def agent_token(tenant, admin) -> str:
    """A token that may write and read drafts of every mailbox of the tenant."""
    _, token = token_create(
        tenant=tenant,
        name="agent",
        scopes=("drafts:write", "drafts:read"),
        mailbox_ids=[],
        expires_at=None,
        actor=admin,
    )
    return token


def agent_drafts_to_ana(client, tenant, mailbox, admin, key: str, **content) -> dict:
    """One draft of ``mailbox`` to one customer (``content``: its subject, text and html),
    posted by the agent with a token ``admin`` made; then ``admin`` is signed in to review it
    (tests/review/test_probe_*: what the draft page and bulk approval make of one content)."""
    draft = agent_drafts(
        client,
        agent_token(tenant, admin),
        key,
        {"mailbox": mailbox.address, "to": ["ana@customer.test"], **content},
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    return draft


def page_and_bulk_approval(client, tenant, draft_id) -> tuple[str, str, str]:
    """The draft's page, the queue, and the page bulk approval of every draft in the queue
    ends on."""
    page = client.get(reverse("draft", args=[tenant.slug, draft_id])).content.decode()
    queue = client.get(reverse("tenant_home", args=[tenant.slug])).content.decode()
    items = re.findall(r'name="item" value="([^"]+)"', queue)
    from_list = client.post(
        reverse("bulk_approve", args=[tenant.slug]), {"item": items}, follow=True
    ).content.decode()
    return page, queue, from_list


def approved_on_its_page_and_sent(client, tenant, draft_id, sandbox, mailbox) -> dict:
    """The draft's newest version approved on its own page (what bulk approval leaves out is
    approved there) and sent by a worker: the one message the sandbox's ledger holds."""
    version = DraftVersion.objects.filter(draft_id=draft_id).latest("number")
    response = client.post(
        reverse("draft_approve", args=[tenant.slug, draft_id]),
        {"version": version.number, "content_hash": version.content_hash},
    )
    sending.run_once(worker="t", limit=10)
    assert response.status_code == 302, response.content
    assert Draft.objects.get(pk=draft_id).status == Draft.Status.APPROVED
    [sent] = sandbox.ledger(inbox_id=mailbox.inbox_id)
    return sent
