"""The agent API's routes: post, revise, read and withdraw drafts; list mailboxes.

Agents can never approve, edit an approval or send: there is no route for any of it. Each route
is thin: the token (``request.auth``) names the tenant, the mailbox or draft is resolved inside
that tenant and the token's mailbox restriction (``queries.py``), then one intents service does
the write, inside ``run_idempotent``.
"""

from __future__ import annotations

import json
from typing import cast

from django.http import HttpResponse
from django.urls import reverse
from ninja import Query, Router

from agent_api import queries
from agent_api.auth import DRAFTS_READ, DRAFTS_WRITE, AgentRequest
from agent_api.idempotency import run_idempotent
from agent_api.schemas import (
    DraftCreateIn,
    DraftOut,
    DraftPage,
    DraftStatus,
    MailboxList,
    MailboxOut,
    MailboxStatus,
    Problem,
    VersionIn,
)
from intents import services
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


def _token(request: AgentRequest) -> AgentToken:
    return request.auth


def _draft_bytes(draft_id: int) -> bytes:
    return (
        DraftOut.model_validate(queries.draft_document_by_id(draft_id)).model_dump_json().encode()
    )


def _created_draft_location(status: int, body: bytes) -> str | None:
    """Location of a created draft (RFC 9110 §10.2.2): read from the stored body, so a replayed
    201 points at the same draft as the first."""
    if status != 201:
        return None
    return reverse("api:get_draft", kwargs={"draft_id": json.loads(body)["id"]})


def _content(payload: DraftCreateIn | VersionIn) -> dict:
    """What a person approves of a version, as the draft services take it."""
    return {
        "to": payload.to,
        "cc": payload.cc,
        "bcc": payload.bcc,
        "subject": payload.subject,
        "text": payload.text,
        "html": payload.html,
    }


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
    token = _token(request)

    def work() -> tuple[int, bytes]:
        mailbox = queries.mailbox_resolve(token, payload.mailbox)
        draft = services.draft_create(
            tenant=token.tenant,
            mailbox=mailbox,
            **_content(payload),
            in_reply_to=payload.in_reply_to,
            thread_id=payload.thread_id,
            provenance=payload.provenance,
            not_after=payload.not_after,
            priority=payload.priority,
            agent_token=token,
        )
        return 201, _draft_bytes(draft.pk)

    return run_idempotent(
        request, tenant=token.tenant, required=True, work=work, locate=_created_draft_location
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
    limit: int = Query(20, ge=1, le=100),
):
    page = queries.draft_page(_token(request), status=status, cursor=cursor, limit=limit)
    return _ok(DraftPage.model_validate(page).model_dump_json().encode())


@router.get(
    "/drafts/{draft_id}",
    auth=DRAFTS_READ,
    response={200: DraftOut, **ERRORS_READ},
    summary="Read a draft: status, current version, send intent and delivery",
    tags=["drafts"],
    operation_id="draft_get",
)
def get_draft(request: AgentRequest, draft_id: int):
    draft = queries.draft_in_scope(_token(request), draft_id)
    return _ok(DraftOut.model_validate(queries.draft_document(draft)).model_dump_json().encode())


@router.post(
    "/drafts/{draft_id}/versions",
    auth=DRAFTS_WRITE,
    response={201: DraftOut, **ERRORS_WRITE},
    summary="Revise a pending draft (adds a version)",
    tags=["drafts"],
    operation_id="draft_add_version",
)
def add_version(request: AgentRequest, draft_id: int, payload: VersionIn):
    """Only while the draft is pending (409 `not_pending` otherwise). Reviewers see the new version;
    an approval of an older version is refused. With `base_version`, a revision of a draft that
    changed since is refused (409 `version_conflict`). `Idempotency-Key` is optional but
    recommended."""
    token = _token(request)

    def work() -> tuple[int, bytes]:
        draft = queries.draft_in_scope(token, draft_id)
        services.draft_add_version(
            tenant=token.tenant,
            draft_id=draft.pk,
            **_content(payload),
            agent_token=token,
            base_version=payload.base_version,
        )
        return 201, _draft_bytes(draft.pk)

    return run_idempotent(request, tenant=token.tenant, required=False, work=work)


@router.post(
    "/drafts/{draft_id}/withdraw",
    auth=DRAFTS_WRITE,
    response={200: DraftOut, **ERRORS_WRITE},
    summary="Withdraw a pending draft",
    tags=["drafts"],
    operation_id="draft_withdraw",
)
def withdraw_draft(request: AgentRequest, draft_id: int):
    """Takes the draft out of the review queue (409 `not_pending` if it was already decided).
    No body. `Idempotency-Key` is optional."""
    token = _token(request)

    def work() -> tuple[int, bytes]:
        draft = queries.draft_in_scope(token, draft_id)
        services.draft_withdraw(tenant=token.tenant, draft_id=draft.pk, agent_token=token)
        return 200, _draft_bytes(draft.pk)

    return run_idempotent(request, tenant=token.tenant, required=False, work=work)


@router.get(
    "/mailboxes",
    auth=DRAFTS_READ,
    response={200: MailboxList, **ERRORS_READ},
    summary="Mailboxes this token may draft from",
    tags=["mailboxes"],
    operation_id="mailbox_list",
)
def list_mailboxes(request: AgentRequest):
    mailboxes = queries.mailboxes_in_scope(_token(request)).order_by("address")
    # status is a choices column (Mailbox.Status); MailboxOut validates the value again.
    items = [
        MailboxOut(
            id=m.pk,
            address=m.address,
            display_name=m.display_name,
            status=cast(MailboxStatus, m.status),
        )
        for m in mailboxes
    ]
    return _ok(MailboxList(items=items).model_dump_json().encode())
