"""The agent API (django-ninja) under ``/api/v1/``: post, revise, read and withdraw drafts.

Agents can never approve, edit an approval or send: there is no route for any of it. Each route
is thin: the token (``request.auth``) names the tenant, the mailbox or draft is resolved inside
that tenant and the token's mailbox restriction, then one intents service does the write.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import NinjaAPI, Query

from intents import selectors, services
from intents.api_auth import DRAFTS_READ, DRAFTS_WRITE, MAX_BODY_BYTES, rate_limit_per_window
from intents.api_docs import OfflineSwagger, finish_openapi_schema
from intents.api_errors import ApiProblem, StrictJSONParser, install_exception_handlers
from intents.api_idempotency import LOCK_SECONDS, RETENTION, run_idempotent
from intents.api_schemas import (
    DraftCreateIn,
    DraftOut,
    DraftPage,
    DraftStatus,
    MailboxList,
    MailboxOut,
    Problem,
    VersionIn,
)
from intents.errors import InvalidInput, NotFound
from intents.models import Draft, DraftVersion, SendIntent
from mailboxes.models import Mailbox
from tenants.models import AgentToken

MAX_ID = 2**63 - 1

DESCRIPTION = f"""
The agent API of Countersign: AI agents post draft replies; people approve them in the browser;
workers send each approved reply exactly once. **An agent token can never approve or send.**

### Authentication
`Authorization: Bearer cs_<prefix>_<secret>` with a token a tenant admin created (Admin → Agent
tokens). The token names the tenant; a browser session cookie is not accepted (401). Scopes:
`drafts:write` (create, revise, withdraw) and `drafts:read` (read drafts and mailboxes); a missing
scope is 403. A token restricted to some mailboxes sees only those; any other mailbox or draft is
a 404, exactly like a missing one.

### Replies
A draft with `in_reply_to` is a reply to that message, which must be one this mailbox received
(and in `thread_id`, when given); otherwise **422** naming `in_reply_to`. AgentMail's reply route
takes no subject: the reply joins that message's thread and is titled "Re: " plus its subject
(no second "Re: "). That subject is the one stored, shown to the approver and hashed: leave
`subject` out, or send exactly it; any other is **422** naming `subject`. A customer's message
is known a few seconds after it arrives (our webhook); `in_reply_to_unknown` just after is worth
a retry.

### Idempotency (IETF draft-ietf-httpapi-idempotency-key-header)
Every POST accepts an `Idempotency-Key` header (1-255 of `A-Za-z0-9._~-`, a UUID is ideal; the
RFC 8941 quoted form `"…"` is accepted too); `POST /drafts` **requires** it (400 without).
Keys are scoped to the tenant; the fingerprint is the token, the method, the path and the
canonical JSON body (a key reused by another token of the tenant is a different request).

* Same key, same request, after success: the stored status and byte-identical body, with
  `Idempotent-Replayed: true`.
* Same key, different request: **422** `idempotency_key_reused`.
* Same key while the first request is still running: **409** `idempotency_key_in_flight` with
  `Retry-After`. A request that died holds its key for at most {LOCK_SECONDS} s.
* A request refused with an error (4xx, or a 5xx: nothing was written) does not consume its key:
  correct it and retry with the same key. Only successful responses are stored.
* **Retention: {int(RETENTION.total_seconds() // 3600)} hours** after completion, then the key
  is forgotten and may be used again.

### Errors
Every error is `application/problem+json` (RFC 9457): `type`, `title`, `status`, `detail`, a stable
`code`, and `errors: [{{field, message}}]`. Validation errors are 422 and name the field
(`to[2]`, `subject`); a recipient refused by the mailbox policy or the suppression list is 422
naming the address.

### Limits
Request bodies up to **{MAX_BODY_BYTES // 1024} KiB** (413 above), JSON only (415 otherwise);
at most {services.MAX_RECIPIENTS} recipients in to + cc + bcc; subject up to
{services.MAX_SUBJECT} characters on one line; bodies are stored and hashed with LF line endings
(CRLF and a lone CR become LF). **{rate_limit_per_window()} requests per minute per
token** (fixed one-minute window; 429 with `Retry-After`).
"""

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


class CountersignAPI(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        return finish_openapi_schema(schema)


api = CountersignAPI(
    title="Countersign agent API",
    version="1.0.0",
    description=DESCRIPTION,
    urls_namespace="api",
    docs=OfflineSwagger(),
    docs_url="/docs",
    openapi_url="/openapi.json",
    parser=StrictJSONParser(),
)
install_exception_handlers(api)


# --- resolution inside the token's tenant ------------------------------------------------------


def _token(request: HttpRequest) -> AgentToken:
    return request.auth


def _allowed_mailbox_ids(token: AgentToken) -> list[int]:
    return list(token.mailboxes.values_list("pk", flat=True))


def _mailboxes(token: AgentToken):
    queryset = Mailbox.objects.filter(tenant_id=token.tenant_id)
    allowed = _allowed_mailbox_ids(token)
    if allowed:
        queryset = queryset.filter(pk__in=allowed)
    return queryset


def _drafts(token: AgentToken):
    queryset = Draft.objects.filter(tenant_id=token.tenant_id)
    allowed = _allowed_mailbox_ids(token)
    if allowed:
        queryset = queryset.filter(mailbox_id__in=allowed)
    return queryset


def _as_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 0 < value <= MAX_ID:
        return value
    return None


def _resolve_mailbox(token: AgentToken, ref: int | str) -> Mailbox:
    mailboxes = _mailboxes(token)
    mailbox_id = _as_id(ref)
    if mailbox_id is not None:
        found = mailboxes.filter(pk=mailbox_id).first()
    elif isinstance(ref, str):
        found = mailboxes.filter(address__iexact=ref.strip()).first()
    else:
        found = None
    if found is None:
        raise NotFound("mailbox_not_found", "No such mailbox.", field="mailbox")
    return found


def _draft_in_scope(token: AgentToken, draft_id: int) -> Draft:
    checked = _as_id(draft_id)
    draft = _drafts(token).select_related("mailbox").filter(pk=checked).first() if checked else None
    if draft is None:
        raise NotFound("not_found", "No such draft.")
    return draft


# --- documents -----------------------------------------------------------------------------------


def _deliveries(intent: SendIntent) -> list:
    try:
        from webhooks.services import delivery_summary
    except ImportError:
        return list(intent.deliveries.order_by("address"))
    return list(delivery_summary(intent=intent))


def draft_document(draft: Draft) -> dict:
    version = DraftVersion.objects.get(draft=draft, number=draft.current_version)
    intent = (
        SendIntent.objects.filter(draft=draft)
        .select_related("draft_version")
        .order_by("-id")
        .first()
    )
    return {
        "id": draft.pk,
        "status": draft.status,
        "mailbox": {"id": draft.mailbox.pk, "address": draft.mailbox.address},
        "thread_id": draft.thread_id,
        "in_reply_to": draft.in_reply_to,
        "priority": draft.priority,
        "provenance": draft.provenance or {},
        "not_after": draft.not_after,
        "review_deadline": draft.review_deadline,
        "reject_reason": draft.reject_reason,
        "created_at": draft.created_at,
        "updated_at": draft.updated_at,
        "decided_at": draft.decided_at,
        "current_version": {
            "number": version.number,
            "to": list(version.to),
            "cc": list(version.cc),
            "bcc": list(version.bcc),
            "subject": version.subject,
            "text": version.text,
            "html": version.html,
            "content_hash": version.content_hash,
            "author": version.author_kind,
            "created_at": version.created_at,
        },
        "intent": None
        if intent is None
        else {
            "id": intent.pk,
            "state": intent.state,
            "version": intent.draft_version.number,
            "approved_at": intent.approved_at,
            "provider_message_id": intent.provider_message_id,
            "provider_thread_id": intent.provider_thread_id,
            "attempts": intent.attempts,
            "updated_at": intent.updated_at,
            "deliveries": [
                {
                    "address": d.address,
                    "state": d.state or "pending",
                    "updated_at": d.updated_at if d.pk else None,
                }
                for d in _deliveries(intent)
            ],
        },
    }


def _draft_bytes(draft_id: int) -> bytes:
    draft = Draft.objects.select_related("mailbox").get(pk=draft_id)
    return DraftOut.model_validate(draft_document(draft)).model_dump_json().encode()


def _created_draft_location(status: int, body: bytes) -> str | None:
    """Location of a created draft (RFC 9110 §10.2.2): read from the stored body, so a replayed
    201 points at the same draft as the first."""
    if status != 201:
        return None
    return reverse("api:get_draft", kwargs={"draft_id": json.loads(body)["id"]})


def _ok(body: bytes, status: int = 200) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="application/json")


# --- routes --------------------------------------------------------------------------------------


@api.post(
    "/drafts",
    auth=DRAFTS_WRITE,
    response={201: DraftOut, **ERRORS_WRITE},
    summary="Post a draft reply for review",
    tags=["drafts"],
    operation_id="draft_create",
)
def create_draft(request: HttpRequest, payload: DraftCreateIn):
    """Creates a pending draft (version 1) in the review queue. Requires `Idempotency-Key`."""
    token = _token(request)

    def work() -> tuple[int, bytes]:
        mailbox = _resolve_mailbox(token, payload.mailbox)
        draft = services.draft_create(
            tenant=token.tenant,
            mailbox=mailbox,
            to=payload.to,
            cc=payload.cc,
            bcc=payload.bcc,
            subject=payload.subject,
            text=payload.text,
            html=payload.html,
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


@api.get(
    "/drafts",
    auth=DRAFTS_READ,
    response={200: DraftPage, **ERRORS_READ},
    summary="List drafts, newest first",
    tags=["drafts"],
    operation_id="draft_list",
)
def list_drafts(
    request: HttpRequest,
    status: DraftStatus | None = None,
    cursor: str | None = Query(None, max_length=200, description="From `next_cursor`."),
    limit: int = Query(20, ge=1, le=100),
):
    token = _token(request)
    try:
        page = selectors.draft_queue(
            tenant=token.tenant_id,
            status=status,
            mailbox_ids=_allowed_mailbox_ids(token) or None,
            with_intent_state=True,
            newest_first=True,
            cursor=cursor,
            limit=limit,
        )
    except InvalidInput:
        raise ApiProblem(
            422,
            "cursor_invalid",
            "The cursor is not one this API returned.",
            errors=[{"field": "cursor", "message": "invalid cursor"}],
        ) from None
    items = [
        {
            "id": d.pk,
            "status": d.status,
            "mailbox": {"id": d.mailbox.pk, "address": d.mailbox.address},
            "subject": d.cur_subject or "",
            "current_version": d.current_version,
            "intent_state": d.intent_state,
            "created_at": d.created_at,
            "updated_at": d.updated_at,
        }
        for d in page.items
    ]
    page = {"items": items, "next_cursor": page.next_cursor}
    return _ok(DraftPage.model_validate(page).model_dump_json().encode())


@api.get(
    "/drafts/{draft_id}",
    auth=DRAFTS_READ,
    response={200: DraftOut, **ERRORS_READ},
    summary="Read a draft: status, current version, send intent and delivery",
    tags=["drafts"],
    operation_id="draft_get",
)
def get_draft(request: HttpRequest, draft_id: int):
    draft = _draft_in_scope(_token(request), draft_id)
    return _ok(DraftOut.model_validate(draft_document(draft)).model_dump_json().encode())


@api.post(
    "/drafts/{draft_id}/versions",
    auth=DRAFTS_WRITE,
    response={201: DraftOut, **ERRORS_WRITE},
    summary="Revise a pending draft (adds a version)",
    tags=["drafts"],
    operation_id="draft_add_version",
)
def add_version(request: HttpRequest, draft_id: int, payload: VersionIn):
    """Only while the draft is pending (409 `not_pending` otherwise). Reviewers see the new version;
    an approval of an older version is refused. With `base_version`, a revision of a draft that
    changed since is refused (409 `version_conflict`). `Idempotency-Key` is optional but
    recommended."""
    token = _token(request)

    def work() -> tuple[int, bytes]:
        draft = _draft_in_scope(token, draft_id)
        services.draft_add_version(
            tenant=token.tenant,
            draft_id=draft.pk,
            to=payload.to,
            cc=payload.cc,
            bcc=payload.bcc,
            subject=payload.subject,
            text=payload.text,
            html=payload.html,
            agent_token=token,
            base_version=payload.base_version,
        )
        return 201, _draft_bytes(draft.pk)

    return run_idempotent(request, tenant=token.tenant, required=False, work=work)


@api.post(
    "/drafts/{draft_id}/withdraw",
    auth=DRAFTS_WRITE,
    response={200: DraftOut, **ERRORS_WRITE},
    summary="Withdraw a pending draft",
    tags=["drafts"],
    operation_id="draft_withdraw",
)
def withdraw_draft(request: HttpRequest, draft_id: int):
    """Takes the draft out of the review queue (409 `not_pending` if it was already decided).
    No body. `Idempotency-Key` is optional."""
    token = _token(request)

    def work() -> tuple[int, bytes]:
        draft = _draft_in_scope(token, draft_id)
        services.draft_withdraw(tenant=token.tenant, draft_id=draft.pk, agent_token=token)
        return 200, _draft_bytes(draft.pk)

    return run_idempotent(request, tenant=token.tenant, required=False, work=work)


@api.get(
    "/mailboxes",
    auth=DRAFTS_READ,
    response={200: MailboxList, **ERRORS_READ},
    summary="Mailboxes this token may draft from",
    tags=["mailboxes"],
    operation_id="mailbox_list",
)
def list_mailboxes(request: HttpRequest):
    mailboxes = _mailboxes(_token(request)).order_by("address")
    items = [
        MailboxOut(id=m.pk, address=m.address, display_name=m.display_name, status=m.status)
        for m in mailboxes
    ]
    return _ok(MailboxList(items=items).model_dump_json().encode())
