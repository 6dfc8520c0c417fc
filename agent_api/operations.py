"""What an agent token may do, behind both entry points: the JSON API's routes (``routes.py``) and
the MCP tools (``mcp_tools.py``).

Each operation takes the authenticated token and input already validated by ``schemas.py``,
resolves the mailbox or draft inside the token's tenant and mailbox restriction (``queries.py``),
calls one intents service for a write, and answers the API's JSON document as bytes (a write
also its HTTP status), which is what the idempotency store keeps and replays. None approves or
sends: there is no such operation.
"""

from __future__ import annotations

from typing import cast

from agent_api import queries
from agent_api.schemas import (
    DraftCreateIn,
    DraftOut,
    DraftPage,
    MailboxList,
    MailboxOut,
    MailboxStatus,
    VersionIn,
)
from intents import services
from tenants.models import AgentToken


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


def create_draft(token: AgentToken, payload: DraftCreateIn) -> tuple[int, bytes]:
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
    return 201, draft_json(draft.pk)


def revise_draft(token: AgentToken, draft_id: int, payload: VersionIn) -> tuple[int, bytes]:
    draft = queries.draft_in_scope(token, draft_id)
    services.draft_add_version(
        tenant=token.tenant,
        draft_id=draft.pk,
        **_content(payload),
        agent_token=token,
        base_version=payload.base_version,
    )
    return 201, draft_json(draft.pk)


def withdraw_draft(token: AgentToken, draft_id: int) -> tuple[int, bytes]:
    draft = queries.draft_in_scope(token, draft_id)
    services.draft_withdraw(tenant=token.tenant, draft_id=draft.pk, agent_token=token)
    return 200, draft_json(draft.pk)


def read_draft(token: AgentToken, draft_id: int) -> bytes:
    draft = queries.draft_in_scope(token, draft_id)
    return DraftOut.model_validate(queries.draft_document(draft)).model_dump_json().encode()


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
