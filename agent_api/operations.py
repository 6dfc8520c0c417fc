"""What an agent token may do, behind both entry points: the JSON API's routes (``routes.py``) and
the MCP tools (``mcp_tools.py``).

Each operation takes the authenticated token and input already validated by ``schemas.py``,
resolves the mailbox or draft inside the token's tenant and mailbox restriction (``queries.py``),
calls one intents service for a write, and answers the API's JSON document as bytes (a write
also its HTTP status), which is what the idempotency store keeps and replays. None approves or
sends: there is no such operation.
"""

from __future__ import annotations

import json
from typing import cast

from agent_api import queries
from agent_api.errors import ApiProblem
from agent_api.schemas import (
    DraftCreateIn,
    DraftOut,
    DraftPage,
    MailboxBrief,
    MailboxList,
    MailboxOut,
    MailboxStatus,
    VersionIn,
)
from agent_api.schemas_broadcasts import (
    BroadcastCreateIn,
    BroadcastPage,
    BroadcastRecipientsIn,
    BroadcastSummary,
)
from config.snapshot import read_snapshot
from intents import services
from intents.attachments import Upload, decode_base64
from intents.selectors.broadcasts import broadcast_get, broadcast_progress, broadcasts_of
from intents.services.attachments import forwarded_uploads
from intents.services.broadcasts import broadcast_create, broadcast_replace_recipients
from tenants.models import AgentToken
from tenants.tokens import token_reread_scope


def draft_json(draft_id: int) -> bytes:
    return (
        DraftOut.model_validate(queries.draft_document_by_id(draft_id)).model_dump_json().encode()
    )


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


def uploads(
    payload: DraftCreateIn | VersionIn, forwarded: list[Upload] | None = None
) -> list[Upload] | None:
    """The version's files: the uploaded ones (base64 decoded; a 422 names a file that is not
    base64), then those forwarded from the answered message. None: neither was given."""
    forwarded = forwarded or []
    if payload.attachments is None and not forwarded:
        return None
    files = [
        Upload(a.filename, a.content_type, decode_base64(index, a.filename, a.content))
        for index, a in enumerate(payload.attachments or [])
    ]
    return files + forwarded


def forwarded_for_create(token: AgentToken, payload: DraftCreateIn) -> list[Upload]:
    """The answered message's files a new draft forwards, fetched from AgentMail. A network
    call: the entry points make it before the idempotent transaction, never inside it."""
    if not payload.forward_attachments:
        return []
    return forwarded_uploads(
        tenant=token.tenant,
        mailbox=queries.mailbox_resolve(token, payload.mailbox),
        in_reply_to=payload.in_reply_to.strip(),
        attachment_ids=payload.forward_attachments,
        uploaded=len(payload.attachments or ()),
    )


def forwarded_for_revision(token: AgentToken, draft_id: int, payload: VersionIn) -> list[Upload]:
    """``forwarded_for_create`` for a revision: from the message the draft answers."""
    if not payload.forward_attachments:
        return []
    draft = queries.draft_in_scope(token, draft_id)
    return forwarded_uploads(
        tenant=token.tenant,
        mailbox=draft.mailbox,
        in_reply_to=draft.in_reply_to,
        attachment_ids=payload.forward_attachments,
        uploaded=len(payload.attachments or ()),
    )


def reach_mailbox(token: AgentToken, ref: int | str) -> None:
    """The live create's refusal (404 ``mailbox_not_found``) if the token may no longer use the
    mailbox ``ref`` names: asked before a stored answer is replayed (``idempotency``), with the
    restriction as it is now (``token_reread_scope``): the replay may have waited for its key's
    row while the first request completed, and a restriction committed meanwhile."""
    token_reread_scope(token)
    queries.mailbox_resolve(token, ref)


def reach_draft(token: AgentToken, draft_id: int) -> None:
    """``reach_mailbox`` for a request naming a draft (404 ``not_found``)."""
    token_reread_scope(token)
    queries.draft_in_scope(token, draft_id)


def create_draft(
    token: AgentToken, payload: DraftCreateIn, forwarded: list[Upload] | None = None
) -> tuple[int, bytes]:
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
        attachments=uploads(payload, forwarded) or (),
    )
    return 201, draft_json(draft.pk)


def revise_draft(
    token: AgentToken, draft_id: int, payload: VersionIn, forwarded: list[Upload] | None = None
) -> tuple[int, bytes]:
    draft = queries.draft_in_scope(token, draft_id)
    services.draft_add_version(
        tenant=token.tenant,
        draft_id=draft.pk,
        **_content(payload),
        agent_token=token,
        base_version=payload.base_version,
        attachments=uploads(payload, forwarded),
    )
    return 201, draft_json(draft.pk)


def withdraw_draft(token: AgentToken, draft_id: int) -> tuple[int, bytes]:
    draft = queries.draft_in_scope(token, draft_id)
    services.draft_withdraw(tenant=token.tenant, draft_id=draft.pk, agent_token=token)
    return 200, draft_json(draft.pk)


def read_draft(token: AgentToken, draft_id: int) -> bytes:
    # The draft, its version, its send and the send's deliveries as of one moment: read
    # statement by statement, an approval committing between them answered `pending` with a
    # queued send.
    with read_snapshot():
        draft, version = queries.draft_with_current_version(token, draft_id)
        document = queries.draft_document(draft, version)
    return DraftOut.model_validate(document).model_dump_json().encode()


def list_drafts(token: AgentToken, *, status: str | None, cursor: str | None, limit: int) -> bytes:
    page = queries.draft_page(token, status=status, cursor=cursor, limit=limit)
    return DraftPage.model_validate(page).model_dump_json().encode()


def list_mailboxes(token: AgentToken) -> bytes:
    mailboxes = queries.mailboxes_in_scope(token).order_by("address")
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
    return MailboxList(items=items).model_dump_json().encode()


# --- broadcasts: post one for review, replace its recipients while pending, read, list ---------
# Agents never approve, pause or cancel a broadcast: a person does, in the review pages.


def broadcast_json(broadcast) -> bytes:
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
        # Why a person rejected it (required to reject), as a draft's read gives it: what the
        # agent changes before it posts the broadcast again.
        "reject_reason": broadcast.reject_reason,
        "progress": {
            "sends": progress.by_state,
            "deliveries": progress.deliveries,
            "skipped": progress.skipped,
        },
    }
    return json.dumps(document).encode()


def _allowed_mailbox_ids(token: AgentToken) -> set[int]:
    return set(queries.mailboxes_in_scope(token).values_list("pk", flat=True))


def broadcast_in_scope(token: AgentToken, broadcast_id):
    """The token's tenant's broadcast from a mailbox the token may use; another tenant's, one
    from another mailbox and a missing one are the same 404."""
    return broadcast_get(
        tenant=token.tenant, broadcast_id=broadcast_id, mailbox_ids=_allowed_mailbox_ids(token)
    )


def reach_broadcast(token: AgentToken, broadcast_id: int) -> None:
    """``reach_mailbox`` for a request naming a broadcast."""
    token_reread_scope(token)
    broadcast_in_scope(token, broadcast_id)


def create_broadcast(token: AgentToken, payload: BroadcastCreateIn) -> tuple[int, bytes]:
    broadcast = broadcast_create(
        tenant=token.tenant,
        mailbox=queries.mailbox_resolve(token, payload.mailbox),
        name=payload.name,
        subject=payload.subject,
        text=payload.text,
        html=payload.html,
        rate_per_second=payload.rate_per_second,
        recipients=payload.recipients,
        recipients_csv=payload.recipients_csv,
        agent_token=token,
    )
    return 201, broadcast_json(broadcast)


def replace_broadcast_recipients(
    token: AgentToken, broadcast_id: int, payload: BroadcastRecipientsIn
) -> tuple[int, bytes]:
    broadcast = broadcast_replace_recipients(
        tenant=token.tenant,
        broadcast_id=broadcast_in_scope(token, broadcast_id).pk,
        recipients=payload.recipients,
        recipients_csv=payload.recipients_csv,
        agent_token=token,
    )
    return 200, broadcast_json(broadcast)


def read_broadcast(token: AgentToken, broadcast_id: int) -> bytes:
    return broadcast_json(broadcast_in_scope(token, broadcast_id))


def list_broadcasts(token: AgentToken, *, cursor: str | None, limit: int) -> bytes:
    """Newest first (by id), ``limit`` broadcasts before the cursor (the last id of the page
    before), and the next page's cursor."""
    qs = broadcasts_of(tenant=token.tenant, mailbox_ids=_allowed_mailbox_ids(token))
    if cursor is not None:
        if not cursor.isascii() or not cursor.isdigit() or not 0 < int(cursor) <= queries.MAX_ID:
            raise ApiProblem(
                422,
                "cursor_invalid",
                "The cursor is not one this API returned.",
                errors=[{"field": "cursor", "message": "invalid cursor"}],
            )
        qs = qs.filter(pk__lt=int(cursor))
    rows = list(qs.order_by("-id")[: limit + 1])
    items = [
        BroadcastSummary(
            id=b.pk,
            name=b.name,
            state=b.state,
            mailbox=MailboxBrief(id=b.mailbox_id, address=b.mailbox.address),
            subject=b.subject,
            recipient_count=b.recipient_count,
            created_at=b.created_at,
            updated_at=b.updated_at,
        )
        for b in rows[:limit]
    ]
    next_cursor = str(rows[limit - 1].pk) if len(rows) > limit else None
    return BroadcastPage(items=items, next_cursor=next_cursor).model_dump_json().encode()
