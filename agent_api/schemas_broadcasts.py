"""Request and response shapes of the agent API's broadcasts (the JSON routes and the MCP tools
take the same ones): unknown fields refused, strict types, the same limits."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from ninja import Schema
from pydantic import ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from agent_api.schemas import MailboxBrief, MailboxRef

# The limit of review's recipients file too (settings, "Request bodies").
MAX_CSV = settings.BROADCAST_RECIPIENTS_MAX_BYTES


class BroadcastRecipientsIn(Schema):
    model_config = ConfigDict(extra="forbid")

    recipients: list[Any] | None = Field(
        None,
        description='[{"address": "...", "variables": {"name": "..."}}, ...] (or plain addresses)',
    )
    recipients_csv: StrictStr | None = Field(
        None,
        max_length=MAX_CSV,
        description="CSV text instead of `recipients`: a header with `address` (or `email`) "
        "and one column per variable.",
    )


class BroadcastCreateIn(BroadcastRecipientsIn):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "mailbox": "support@acme.agentmail.to",
                    "name": "Warehouse outage",
                    "subject": "Your order {{ order }} is delayed",
                    "text": "Hello {{ name }}, your order {{ order }} ships next week.",
                    "recipients": [
                        {"address": "a@example.com", "variables": {"name": "Ana", "order": "A1"}}
                    ],
                }
            ]
        },
    )

    mailbox: MailboxRef
    name: StrictStr = Field("", max_length=200)
    subject: StrictStr = Field(..., max_length=998)
    text: StrictStr = Field("", max_length=1_000_000)
    html: StrictStr = Field("", max_length=1_000_000)
    rate_per_second: StrictFloat | StrictInt | None = Field(None, gt=0, le=1000)


class BroadcastOut(Schema):
    id: int
    name: str
    state: str
    mailbox: dict
    subject: str
    recipient_count: int
    content_hash: str
    rate_per_second: float | None
    reject_reason: str
    progress: dict


class BroadcastSummary(Schema):
    id: int
    name: str
    state: str
    mailbox: MailboxBrief
    subject: str
    recipient_count: int
    created_at: datetime
    updated_at: datetime


class BroadcastPage(Schema):
    items: list[BroadcastSummary]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )
