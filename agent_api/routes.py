"""The agent API's routes: post, revise, read and withdraw drafts; list mailboxes.

Agents can never approve, edit an approval or send: there is no route for any of it. Each route
is thin: the token (``request.auth``) names the tenant, and one operation (``operations.py``,
shared with the MCP tools) resolves the mailbox or draft inside that tenant and the token's
mailbox restriction and calls one intents service, inside ``run_idempotent``.
"""

from __future__ import annotations

import json

from django.http import HttpResponse
from django.urls import reverse
from ninja import Query, Router

from agent_api import operations
from agent_api.auth import (
    DRAFTS_READ,
    DRAFTS_WRITE,
    NO_QUERY,
    AgentRequest,
    refuse_body,
    refuse_unknown_query,
)
from agent_api.idempotency import run_idempotent
from agent_api.schemas import (
    DigitsInt,
    DraftCreateIn,
    DraftOut,
    DraftPage,
    DraftStatus,
    MailboxList,
    Problem,
    VersionIn,
)
from intents.attachments import Upload
from tenants.models import AgentToken

ERRORS_READ = {401: Problem, 403: Problem, 404: Problem, 422: Problem, 429: Problem}
ERRORS_WRITE = {
    400: Problem,
    401: Problem,
    403: Problem,
    404: Problem,
    409: Problem,
    413: Problem,
    415: Problem,
    422: Problem,
    429: Problem,
}

router = Router()

DRAFT_LIST_PARAMETERS = frozenset({"status", "cursor", "limit"})
# A page's size, in ASCII digits (``DigitsInt``).
PAGE_LIMIT = Query(20, ge=1, le=100)


def _token(request: AgentRequest) -> AgentToken:
    return request.auth


def _created_draft_location(status: int, body: bytes) -> str | None:
    """Location of a created draft (RFC 9110 §10.2.2): read from the stored body, so a replayed
    201 points at the same draft as the first."""
    if status != 201:
        return None
    return reverse("api:get_draft", kwargs={"draft_id": json.loads(body)["id"]})


def _ok(body: bytes, status: int = 200) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="application/json")


@router.post(
    "/drafts",
    auth=DRAFTS_WRITE,
    response={201: DraftOut, **ERRORS_WRITE},
    summary="Post a draft reply for review",
    tags=["drafts"],
    operation_id="draft_create",
)
def create_draft(request: AgentRequest, payload: DraftCreateIn):
    """Creates a pending draft (version 1) in the review queue. Requires `Idempotency-Key`."""
    refuse_unknown_query(request, NO_QUERY)
    token = _token(request)
    forwarded: list[Upload] = []
    return run_idempotent(
        request,
        tenant=token.tenant,
        required=True,
        # Network, so before the transaction; after the key's check, so never for a replay.
        prepare=lambda: forwarded.extend(operations.forwarded_for_create(token, payload)),
        work=lambda: operations.create_draft(token, payload, forwarded),
        authorize=lambda: operations.reach_mailbox(token, payload.mailbox),
        locate=_created_draft_location,
    )


@router.get(
    "/drafts",
    auth=DRAFTS_READ,
    response={200: DraftPage, **ERRORS_READ},
    summary="List drafts, newest first",
    tags=["drafts"],
    operation_id="draft_list",
)
def list_drafts(
    request: AgentRequest,
    status: DraftStatus | None = None,
    cursor: str | None = Query(None, max_length=200, description="From `next_cursor`."),
    limit: DigitsInt = PAGE_LIMIT,
):
    refuse_unknown_query(request, DRAFT_LIST_PARAMETERS)
    return _ok(operations.list_drafts(_token(request), status=status, cursor=cursor, limit=limit))


@router.get(
    "/drafts/{draft_id}",
    auth=DRAFTS_READ,
    response={200: DraftOut, **ERRORS_READ},
    summary="Read a draft: status, current version, send intent and delivery",
    tags=["drafts"],
    operation_id="draft_get",
)
def get_draft(request: AgentRequest, draft_id: DigitsInt):
    refuse_unknown_query(request, NO_QUERY)
    return _ok(operations.read_draft(_token(request), draft_id))


@router.post(
    "/drafts/{draft_id}/versions",
    auth=DRAFTS_WRITE,
    response={201: DraftOut, **ERRORS_WRITE},
    summary="Revise a pending draft (adds a version)",
    tags=["drafts"],
    operation_id="draft_add_version",
)
def add_version(request: AgentRequest, draft_id: DigitsInt, payload: VersionIn):
    """Only while the draft is pending (409 `not_pending` otherwise). Reviewers see the new version;
    an approval of an older version is refused. With `base_version`, a revision of a draft that
    changed since is refused (409 `version_conflict`). `Idempotency-Key` is optional but
    recommended."""
    refuse_unknown_query(request, NO_QUERY)
    token = _token(request)
    forwarded: list[Upload] = []
    return run_idempotent(
        request,
        tenant=token.tenant,
        required=False,
        prepare=lambda: forwarded.extend(
            operations.forwarded_for_revision(token, draft_id, payload)
        ),
        work=lambda: operations.revise_draft(token, draft_id, payload, forwarded),
        authorize=lambda: operations.reach_draft(token, draft_id),
    )


@router.post(
    "/drafts/{draft_id}/withdraw",
    auth=DRAFTS_WRITE,
    response={200: DraftOut, **ERRORS_WRITE},
    summary="Withdraw a pending draft",
    tags=["drafts"],
    operation_id="draft_withdraw",
)
def withdraw_draft(request: AgentRequest, draft_id: DigitsInt):
    """Takes the draft out of the review queue (409 `not_pending` if it was already decided).
    No body (an empty object is accepted too). `Idempotency-Key` is optional."""
    refuse_unknown_query(request, NO_QUERY)
    token = _token(request)
    refuse_body(request)
    return run_idempotent(
        request,
        tenant=token.tenant,
        required=False,
        work=lambda: operations.withdraw_draft(token, draft_id),
        authorize=lambda: operations.reach_draft(token, draft_id),
    )


@router.get(
    "/mailboxes",
    auth=DRAFTS_READ,
    response={200: MailboxList, **ERRORS_READ},
    summary="Mailboxes this token may draft from",
    tags=["mailboxes"],
    operation_id="mailbox_list",
)
def list_mailboxes(request: AgentRequest):
    refuse_unknown_query(request, NO_QUERY)
    return _ok(operations.list_mailboxes(_token(request)))
