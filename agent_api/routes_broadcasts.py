"""The agent API's broadcasts: post one (with its recipients, as JSON or CSV), replace the
recipients while it waits for review, read its state and progress, list them. Agents never
approve, pause or cancel a broadcast: a person does, in the review pages. The MCP tools run the
same operations (``operations.py``) with the same schemas (``schemas_broadcasts.py``)."""

from __future__ import annotations

import json

from django.urls import reverse
from ninja import Query, Router

from agent_api import operations
from agent_api.auth import (
    DRAFTS_READ,
    DRAFTS_WRITE,
    NO_QUERY,
    AgentRequest,
    refuse_unknown_query,
)
from agent_api.idempotency import run_idempotent
from agent_api.routes import ERRORS_READ, ERRORS_WRITE, PAGE_LIMIT, _ok
from agent_api.schemas import DigitsInt
from agent_api.schemas_broadcasts import (
    BroadcastCreateIn,
    BroadcastOut,
    BroadcastPage,
    BroadcastRecipientsIn,
)

router = Router()


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
    (nothing else is template syntax). In `html` a placeholder may sit only in text or in a
    quoted attribute value (422 `template_invalid` names it and where); one that begins a link
    or image address (`href="{{ link }}"`) takes only http(s) or mailto URLs. Every recipient
    row is validated; any bad row refuses the whole upload with 422 `recipients_invalid`, whose
    `errors` name each row and field. Requires `Idempotency-Key`."""
    refuse_unknown_query(request, NO_QUERY)
    token = request.auth
    return run_idempotent(
        request,
        tenant=token.tenant,
        required=True,
        work=lambda: operations.create_broadcast(token, payload),
        authorize=lambda: operations.reach_mailbox(token, payload.mailbox),
        locate=_location,
    )


@router.get(
    "/broadcasts",
    auth=DRAFTS_READ,
    response={200: BroadcastPage, **ERRORS_READ},
    summary="List broadcasts, newest first",
    tags=["broadcasts"],
    operation_id="broadcast_list",
)
def list_broadcasts(
    request: AgentRequest,
    cursor: str | None = Query(None, max_length=200, description="From `next_cursor`."),
    limit: DigitsInt = PAGE_LIMIT,
):
    refuse_unknown_query(request, frozenset({"cursor", "limit"}))
    return _ok(operations.list_broadcasts(request.auth, cursor=cursor, limit=limit))


@router.put(
    "/broadcasts/{broadcast_id}/recipients",
    auth=DRAFTS_WRITE,
    response={200: BroadcastOut, **ERRORS_WRITE},
    summary="Replace a pending broadcast's recipients",
    tags=["broadcasts"],
    operation_id="broadcast_replace_recipients",
)
def replace_broadcast_recipients(
    request: AgentRequest, broadcast_id: DigitsInt, payload: BroadcastRecipientsIn
):
    """Only while pending review (409 otherwise: what each customer receives is fixed at
    approval), and only of a broadcast an agent posted (403 `broadcast_posted_by_person`: a
    person's list stays theirs). The hash changes, so a reviewer's page opened before must be
    reloaded."""
    refuse_unknown_query(request, NO_QUERY)
    token = request.auth
    return run_idempotent(
        request,
        tenant=token.tenant,
        required=False,
        work=lambda: operations.replace_broadcast_recipients(token, broadcast_id, payload),
        authorize=lambda: operations.reach_broadcast(token, broadcast_id),
    )


@router.get(
    "/broadcasts/{broadcast_id}",
    auth=DRAFTS_READ,
    response={200: BroadcastOut, **ERRORS_READ},
    summary="Read a broadcast: state, sends, deliveries and filtered recipients",
    tags=["broadcasts"],
    operation_id="broadcast_get",
)
def get_broadcast(request: AgentRequest, broadcast_id: DigitsInt):
    refuse_unknown_query(request, NO_QUERY)
    return _ok(operations.read_broadcast(request.auth, broadcast_id))
