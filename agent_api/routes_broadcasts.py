"""The agent API's broadcasts: post one (with its recipients, as JSON or CSV), replace the
recipients while it waits for review, read its state and progress. Agents never approve, pause
or cancel a broadcast: a person does, in the review pages."""

from __future__ import annotations

import json
from typing import Any

from django.urls import reverse
from ninja import Router, Schema
from pydantic import ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from agent_api.auth import DRAFTS_READ, DRAFTS_WRITE, AgentRequest
from agent_api.idempotency import run_idempotent
from agent_api.queries import mailbox_resolve, mailboxes_in_scope
from agent_api.routes import ERRORS_READ, ERRORS_WRITE, _ok
from agent_api.schemas import MailboxRef
from intents.selectors.broadcasts import broadcast_get, broadcast_progress
from intents.services.broadcasts import broadcast_create, broadcast_replace_recipients

router = Router()

MAX_CSV = 5_000_000


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
    progress: dict


def broadcast_document(broadcast) -> bytes:
    progress = broadcast_progress(broadcast)
    document = {
        "id": broadcast.pk,
        "name": broadcast.name,
        "state": broadcast.state,
        "mailbox": {"id": broadcast.mailbox_id, "address": broadcast.mailbox.address},
        "subject": broadcast.subject,
        "recipient_count": broadcast.recipient_count,
        "content_hash": broadcast.content_hash,
        "rate_per_second": broadcast.rate_per_second,
        "progress": {
            "sends": progress.by_state,
            "deliveries": progress.deliveries,
            "skipped": progress.skipped,
        },
    }
    return json.dumps(document).encode()


def _in_scope(token, broadcast_id):
    ids = set(mailboxes_in_scope(token).values_list("pk", flat=True))
    return broadcast_get(tenant=token.tenant, broadcast_id=broadcast_id, mailbox_ids=ids)


def _location(status: int, body: bytes) -> str | None:
    if status != 201:
        return None
    return reverse("api:get_broadcast", kwargs={"broadcast_id": json.loads(body)["id"]})


@router.post(
    "/broadcasts",
    auth=DRAFTS_WRITE,
    response={201: BroadcastOut, **ERRORS_WRITE},
    summary="Post a broadcast (one message to many recipients) for review",
    tags=["broadcasts"],
    operation_id="broadcast_create",
)
def create_broadcast(request: AgentRequest, payload: BroadcastCreateIn):
    """A broadcast pending review. Placeholders `{{ name }}` take each recipient's variables
    (nothing else is template syntax). Every recipient row is validated; any bad row refuses
    the whole upload with 422 `recipients_invalid`, whose `errors` name each row and field.
    Requires `Idempotency-Key`."""
    token = request.auth

    def work():
        broadcast = broadcast_create(
            tenant=token.tenant,
            mailbox=mailbox_resolve(token, payload.mailbox),
            name=payload.name,
            subject=payload.subject,
            text=payload.text,
            html=payload.html,
            rate_per_second=payload.rate_per_second,
            recipients=payload.recipients,
            recipients_csv=payload.recipients_csv,
            agent_token=token,
        )
        return 201, broadcast_document(broadcast)

    return run_idempotent(request, tenant=token.tenant, required=True, work=work, locate=_location)


@router.put(
    "/broadcasts/{broadcast_id}/recipients",
    auth=DRAFTS_WRITE,
    response={200: BroadcastOut, **ERRORS_WRITE},
    summary="Replace a pending broadcast's recipients",
    tags=["broadcasts"],
    operation_id="broadcast_replace_recipients",
)
def replace_broadcast_recipients(
    request: AgentRequest, broadcast_id: int, payload: BroadcastRecipientsIn
):
    """Only while pending review (409 otherwise: what each customer receives is fixed at
    approval). The hash changes, so a reviewer's page opened before must be reloaded."""
    token = request.auth

    def work():
        broadcast = _in_scope(token, broadcast_id)
        broadcast = broadcast_replace_recipients(
            tenant=token.tenant,
            broadcast_id=broadcast.pk,
            recipients=payload.recipients,
            recipients_csv=payload.recipients_csv,
            agent_token=token,
        )
        return 200, broadcast_document(broadcast)

    return run_idempotent(request, tenant=token.tenant, required=False, work=work)


@router.get(
    "/broadcasts/{broadcast_id}",
    auth=DRAFTS_READ,
    response={200: BroadcastOut, **ERRORS_READ},
    summary="Read a broadcast: state, sends, deliveries and filtered recipients",
    tags=["broadcasts"],
    operation_id="broadcast_get",
)
def get_broadcast(request: AgentRequest, broadcast_id: int):
    return _ok(broadcast_document(_in_scope(request.auth, broadcast_id)))
