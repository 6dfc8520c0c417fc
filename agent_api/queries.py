"""The API's reads, always inside the token's tenant and its mailbox restriction: the mailboxes and
drafts a token may see, the draft document every draft route answers with, and the list page.

Another tenant's draft, a mailbox outside the token's restriction and a missing one give the same
404 (``NotFound``).
"""

from __future__ import annotations

from typing import Any

from django.db.models import F, FilteredRelation, Q, QuerySet

from agent_api.errors import ApiProblem
from intents.errors import InvalidInput, NotFound
from intents.models import Draft, DraftVersion, SendIntent
from intents.selectors.queue import draft_queue
from mailboxes.models import Mailbox
from tenants.models import AgentToken
from webhooks import selectors as webhook_selectors

MAX_ID = 2**63 - 1


def mailboxes_in_scope(token: AgentToken) -> QuerySet[Mailbox]:
    queryset = Mailbox.objects.filter(tenant_id=token.tenant_id)
    scope = token.mailbox_scope()
    if scope is not None:
        queryset = queryset.filter(pk__in=scope)
    return queryset


def _drafts(token: AgentToken) -> QuerySet[Draft]:
    queryset = Draft.objects.filter(tenant_id=token.tenant_id)
    scope = token.mailbox_scope()
    if scope is not None:
        queryset = queryset.filter(mailbox_id__in=scope)
    return queryset


def _as_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    # ASCII digits only: str.isdigit() is also true of "²", "①" (int() refuses them) and of
    # Arabic-Indic digits (int() reads them as a number).
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 0 < value <= MAX_ID:
        return value
    return None


def mailbox_resolve(token: AgentToken, ref: int | str) -> Mailbox:
    """A mailbox named by id or address, inside the token's scope."""
    mailboxes = mailboxes_in_scope(token)
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


def draft_in_scope(token: AgentToken, draft_id: int) -> Draft:
    checked = _as_id(draft_id)
    draft = _drafts(token).select_related("mailbox").filter(pk=checked).first() if checked else None
    if draft is None:
        raise NotFound("not_found", "No such draft.")
    return draft


# --- the draft document --------------------------------------------------------------------------


def _version_document(version: DraftVersion) -> dict:
    return {
        "number": version.number,
        "to": list(version.to),
        "cc": list(version.cc),
        "bcc": list(version.bcc),
        "subject": version.subject,
        "text": version.text,
        "html": version.html,
        "content_hash": version.content_hash,
        "attachments": [
            {
                "id": a.pk,
                "filename": a.filename,
                "content_type": a.content_type,
                "size": a.size,
                "sha256": a.sha256,
            }
            for a in version.attachments.all()
        ],
        "author": version.author_kind,
        "created_at": version.created_at,
        "body_purged_at": version.body_purged_at,
    }


def _intent_document(intent: SendIntent) -> dict:
    return {
        "id": intent.pk,
        "state": intent.state,
        "version": intent.draft_version.number if intent.draft_version else None,
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
            for d in webhook_selectors.delivery_summary(intent=intent)
        ],
    }


def draft_with_current_version(token: AgentToken, draft_id: int) -> tuple[Draft, DraftVersion]:
    """``draft_in_scope`` and the draft's current version, read in one statement."""
    checked = _as_id(draft_id)
    draft = (
        _drafts(token)
        .annotate(
            version_row=FilteredRelation(
                "versions", condition=Q(versions__number=F("current_version"))
            )
        )
        # django-stubs knows no select_related of an annotated relation.
        .select_related("mailbox", "version_row")  # type: ignore[misc]
        .filter(pk=checked)
        .first()
        if checked
        else None
    )
    if draft is None:
        raise NotFound("not_found", "No such draft.")
    return draft, draft.version_row


def draft_document(draft: Draft, version: DraftVersion | None = None) -> dict:
    if version is None:
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
        "current_version": _version_document(version),
        "intent": None if intent is None else _intent_document(intent),
    }


def draft_document_by_id(draft_id: int) -> dict:
    return draft_document(Draft.objects.select_related("mailbox").get(pk=draft_id))


# --- the list page -------------------------------------------------------------------------------


def draft_page(
    token: AgentToken, *, status: str | None, cursor: str | None, limit: int
) -> dict[str, Any]:
    """Newest first, ``limit`` drafts before the cursor, and the cursor of the next page: the one
    queue query (intents.selectors.queue) inside the token's tenant and mailboxes."""
    try:
        page = draft_queue(
            tenant=token.tenant_id,
            status=status,
            mailbox_ids=token.mailbox_scope(),
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
    return {"items": items, "next_cursor": page.next_cursor}
