"""A canary through every place a customer or an agent can put text, then retention with every
period passed: the database and the blob store are searched for it, column by column."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.db import connection

from intents import services, tasks
from intents.models import AgentEventDelivery, Broadcast, Draft
from intents.retention import api_idempotency_purge
from intents.services.broadcasts import broadcast_reject
from intents.services.event_endpoints import endpoint_create
from intents.services.notes import draft_note_add
from tests.agent_api.conftest import draft_body
from tests.webhooks.conftest import apply_stored, hook_for, received_payload  # noqa: F401
from webhooks.models import InboundMessage
from webhooks.services.retention import events_purge_payloads

pytestmark = pytest.mark.django_db

CANARY = "CANARY-7f3a"
# The journals refuse any change (a trigger): their times stay as written.
APPEND_ONLY = {"tenants_auditevent", "intents_intentevent"}
# What stays past every retention period, and why (README "Notes", DEPLOYMENT.md "The background
# schedules"): the record of what was decided and sent (subjects, file names, a broadcast's name,
# the reasons people gave, in the rows and the append-only journal), and of the customer's
# messages what a later reply needs (its subject is the reply's, its sender and Reply-To decide
# whom a reply may go to without a warning).
KEPT = [
    "intents_broadcast.name",
    "intents_broadcast.reject_reason",
    "intents_broadcast.subject",
    "intents_draft.reject_reason",
    "intents_draftattachment.filename",
    "intents_draftversion.subject",
    "intents_intentevent.data",
    "intents_intentevent.reason",
    "webhooks_inboundmessage.reply_to",
    "webhooks_inboundmessage.sender",
    "webhooks_inboundmessage.subject",
]


def _columns():
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT table_name, column_name, data_type FROM information_schema.columns
            WHERE table_schema = current_schema()
              AND data_type IN ('text', 'character varying', 'json', 'jsonb', 'bytea')"""
        )
        return cursor.fetchall()


def holding_the_canary() -> list[str]:
    found = []
    with connection.cursor() as cursor:
        for table, column, kind in _columns():
            if kind == "bytea":
                test = f'position(%s::bytea in "{column}") > 0'
            else:
                test = f'"{column}"::text ILIKE %s'
            arg = CANARY if kind == "bytea" else f"%{CANARY}%"
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE {test}', [arg])
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column}")
    return sorted(found)


def _all_time_back(days: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT table_name, column_name FROM information_schema.columns
            WHERE table_schema = current_schema()
              AND data_type IN ('timestamp with time zone', 'timestamp without time zone')
              AND table_name NOT LIKE 'django\\_%%'"""
        )
        for table, column in cursor.fetchall():
            if table in APPEND_ONLY:
                continue
            cursor.execute(
                f'UPDATE "{table}" SET "{column}" = "{column}" - %s WHERE "{column}" IS NOT NULL',
                [timedelta(days=days)],
            )


def test_nothing_of_the_canary_outlives_the_retention(
    client,
    api,
    token_a,
    mailbox_a,
    tenant_a,
    member_of,
    hook_for,  # noqa: F811
):
    approver = member_of(tenant_a, "admin").user
    endpoint_create(
        tenant=tenant_a,
        url="https://a.example.com/",
        event_types=["draft.rejected", "draft.edited"],
        actor=approver,
    )
    hook = hook_for(tenant_a)
    message_id = "<canary-in@customer.test>"
    payload = received_payload(
        mailbox_a,
        thread_id="thr_canary",
        message_id=message_id,
        sender=f"{CANARY} Jane <jane@customer.test>",
        subject=f"Order {CANARY}",
        preview=f"preview {CANARY}",
        text=f"text {CANARY}",
    )
    payload["message"]["reply_to"] = [f"{CANARY.lower()}@customer.test"]
    hook.post(client, payload)
    apply_stored()
    assert InboundMessage.objects.count() == 1

    attachment = {
        "filename": f"{CANARY}.txt",
        "content_type": "text/plain",
        "content": base64.b64encode(f"bytes {CANARY}".encode()).decode(),
    }
    response = api.post(
        "/drafts",
        draft_body(
            mailbox_a,
            to=["jane@customer.test"],
            subject=f"Re: {CANARY}",
            text=f"text {CANARY}",
            html=f"<p>html {CANARY}</p>",
            attachments=[attachment],
        ),
        token=token_a,
        key="canary-draft",
    )
    assert response.status_code == 201, response.content
    draft = Draft.objects.get()
    draft_note_add(tenant=tenant_a, draft_id=draft.pk, author=approver, text=f"note {CANARY}")
    services.draft_reject(
        tenant=tenant_a, draft_id=draft.pk, reason=f"reason {CANARY}", actor=approver
    )

    response = api.post(
        "/broadcasts",
        {
            "mailbox": mailbox_a.address,
            "name": f"name {CANARY}",
            "subject": f"Order {{{{ order }}}} {CANARY}",
            "text": f"Hello {{{{ name }}}} {CANARY}",
            "html": f"<p>Hello {{{{ name }}}} {CANARY}</p>",
            "recipients": [
                {"address": "c@example.com", "variables": {"name": f"N {CANARY}", "order": 1}}
            ],
        },
        token=token_a,
        key="canary-broadcast",
    )
    assert response.status_code == 201, response.content
    broadcast = Broadcast.objects.get()
    broadcast_reject(
        tenant=tenant_a, broadcast_id=broadcast.pk, actor=approver, reason=f"reason {CANARY}"
    )
    # A delivery still being attempted keeps its event (README "Notes"); these ended.
    AgentEventDelivery.objects.update(status="failed")

    _all_time_back(4000)
    tasks.retention_purge()
    events_purge_payloads()
    api_idempotency_purge()
    tasks.sweep()

    assert holding_the_canary() == KEPT
