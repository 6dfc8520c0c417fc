"""The MCP tools: the agent API's operations (``operations.py``) for agents that speak the Model
Context Protocol, with exactly the rights of the bearer token that authenticates the call.

Each tool names the scope it needs and a pydantic model of its arguments built from the JSON
API's own request schemas (``schemas.py``: unknown fields refused, strict types, the same limits),
so a tool and its route accept and refuse the same input. A call is checked in the API's order:
token (revoked or expired since the HTTP request was let in: refused), tenant suspended and scope
(403), rate limit (429, one budget per token for both entry points, with ``retry_after``
seconds in the problem document; the MCP server counts each HTTP request before reading it,
whatever its method, so its calls are not counted again here), storable text, the
arguments; then one operation runs. Every refusal is the API's problem document as an error
result, and changes nothing. No tool approves or sends.

``create_draft`` and ``create_broadcast`` are idempotent like ``POST /drafts``, through the same store
(``idempotency.run_once``): the same ``idempotency_key`` with the same arguments gives the first
answer again, to any token of the tenant that may see it (a key is the tenant's), with different
arguments it is refused (``idempotency_key_reused``). Without a key
the key is derived from the token and the arguments, so a retried call never makes a second
draft; an agent that means two identical drafts gives two keys.

This module is synchronous Django code; ``mcp_server.py`` runs it off the event loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from django.conf import settings
from django.db import transaction
from django.utils.crypto import salted_hmac
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, StrictInt, StrictStr
from pydantic import ValidationError as ArgumentsInvalid

from agent_api import operations
from agent_api.auth import check_token
from agent_api.errors import (
    ApiProblem,
    UnstorableText,
    check_storable,
    draft_problem,
    internal_problem,
    problem_document,
    problem_of,
    unstorable_problem,
    validation_problem,
)
from agent_api.idempotency import (
    KEY_RE,
    Fingerprints,
    KeyName,
    fingerprint,
    key_in_use,
    run_once,
    token_credential,
)
from agent_api.queries import MAX_ID
from agent_api.schemas import DraftCreateIn, DraftStatus, StrictIn, VersionIn
from agent_api.schemas_broadcasts import BroadcastCreateIn, BroadcastRecipientsIn
from intents.attachments import Upload
from intents.errors import DraftError
from tenants.models import AgentToken
from tenants.tokens import token_authenticate

log = logging.getLogger("agent_api.mcp")

READ = AgentToken.Scope.DRAFTS_READ
WRITE = AgentToken.Scope.DRAFTS_WRITE
# The idempotency store's method column: what tells an MCP call from an HTTP request.
METHOD = "MCP"
DERIVED_KEY_SALT = "countersign.agent_api.mcp.derived-idempotency-key"
# A reused key's refusal names the tools' argument, not the JSON API's header, which no tool takes.
KEY_NAME = KeyName(field="idempotency_key", request="another tool or other arguments")

IdempotencyKey = Annotated[
    StrictStr,
    Field(
        pattern=KEY_RE.pattern,
        description=(
            "1-255 of A-Za-z0-9._~- (a UUID is ideal). The same key with the same arguments "
            "returns the first result again; with other arguments it is refused. Kept 24 hours."
        ),
    ),
]
DraftId = Annotated[StrictInt, Field(ge=1, le=MAX_ID, description="The draft's id.")]
BroadcastId = Annotated[StrictInt, Field(ge=1, le=MAX_ID, description="The broadcast's id.")]
Cursor = Annotated[StrictStr, Field(max_length=200)]


class NoArguments(StrictIn):
    pass


class CreateDraftArguments(DraftCreateIn):
    idempotency_key: IdempotencyKey | None = Field(
        None,
        description=(
            "Optional. Left out, it is derived from the token and the arguments: the same draft "
            "posted twice within 24 hours is one draft."
        ),
    )


class DraftArguments(StrictIn):
    draft_id: DraftId


class ReviseDraftArguments(VersionIn):
    draft_id: DraftId
    idempotency_key: IdempotencyKey | None = None


class WithdrawDraftArguments(DraftArguments):
    idempotency_key: IdempotencyKey | None = None


class ListDraftsArguments(StrictIn):
    status: DraftStatus | None = None
    cursor: Cursor | None = Field(None, description="The `next_cursor` of the previous page.")
    limit: Annotated[StrictInt, Field(ge=1, le=100)] = 20


class CreateBroadcastArguments(BroadcastCreateIn):
    idempotency_key: IdempotencyKey | None = Field(
        None,
        description=(
            "Optional. Left out, it is derived from the token and the arguments: the same "
            "broadcast posted twice within 24 hours is one broadcast."
        ),
    )


class BroadcastArguments(StrictIn):
    broadcast_id: BroadcastId


class ReplaceRecipientsArguments(BroadcastRecipientsIn):
    broadcast_id: BroadcastId
    idempotency_key: IdempotencyKey | None = None


class ListBroadcastsArguments(StrictIn):
    cursor: Cursor | None = Field(None, description="The `next_cursor` of the previous page.")
    limit: Annotated[StrictInt, Field(ge=1, le=100)] = 20


@dataclass(frozen=True)
class ToolAnswer:
    """A tool's result: the API's JSON document, or its problem document when ``is_error``."""

    document: dict
    is_error: bool = False
    replayed: bool = False


Run = Callable[[AgentToken, Any, dict], ToolAnswer]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    scope: str
    arguments: type[BaseModel]
    run: Run
    annotations: ToolAnnotations


def _answer(body: bytes, *, replayed: bool = False) -> ToolAnswer:
    return ToolAnswer(json.loads(body), replayed=replayed)


def derived_key(digest: str, *, secret: str | None = None) -> str:
    """The key of a create called without one: the same arguments from the same token are one
    call. An HMAC under the deployment's secret, not the fingerprint itself: the keys share the
    tenant's store with the JSON API, where the client names the key, and another token of the
    tenant that computed a victim's next key (a token id and the arguments are all it takes)
    could claim it first and have the victim's call refused for a day. ``digest``: the call's
    fingerprint with the token's credential (``Fingerprints.with_token``), so that two tokens'
    calls without a key stay two calls."""
    mac = salted_hmac(DERIVED_KEY_SALT, digest, secret=secret, algorithm="sha256")
    return "mcp-" + mac.hexdigest()[:60]


def _derived_key_for(token: AgentToken, fingerprints: Fingerprints) -> str:
    """``derived_key`` under the current secret, unless the store holds this call under a key
    derived with one still in ``SECRET_KEY_FALLBACKS``: right after a rotation, a retry of a call
    made before it derived another key, and the draft was created twice."""
    digest = fingerprints.with_token
    before = [derived_key(digest, secret=secret) for secret in settings.SECRET_KEY_FALLBACKS]
    kept = key_in_use(tenant=token.tenant, keys=before, fingerprints=fingerprints)
    return kept or derived_key(digest)


def _once(
    token: AgentToken,
    *,
    tool: str,
    key: str | None,
    derive: bool,
    raw: dict,
    work: Callable[[], tuple[int, bytes]],
    authorize: Callable[[], None],
    prepare: Callable[[], None] | None = None,
) -> ToolAnswer:
    """``work`` at most once per key, in the JSON API's idempotency store, after ``prepare`` (its
    network calls: ``run_once``); a stored answer is given again only if ``authorize`` lets the
    token still reach what it concerns. The fingerprint is the tool and the canonical arguments
    (the key itself left out): a key is the tenant's, as on the JSON API. A key derived for a
    call without one is the token's own (``derived_key``)."""
    path = f"mcp:{tool}"
    arguments = {name: value for name, value in raw.items() if name != "idempotency_key"}
    fingerprints = Fingerprints(
        stored=fingerprint(method=METHOD, path=path, data=arguments),
        with_token=fingerprint(
            credential=token_credential(token), method=METHOD, path=path, data=arguments
        ),
    )
    if key is None and derive:
        key = _derived_key_for(token, fingerprints)
    if key is None:
        if prepare is not None:
            prepare()
        with transaction.atomic():
            _status, body = work()
        return _answer(body)
    outcome = run_once(
        tenant=token.tenant,
        token=token,
        key=key,
        fingerprints=fingerprints,
        method=METHOD,
        path=path,
        work=work,
        authorize=authorize,
        prepare=prepare,
        name=KEY_NAME,
    )
    return _answer(outcome.body, replayed=outcome.replayed)


def _list_mailboxes(token: AgentToken, args: NoArguments, raw: dict) -> ToolAnswer:
    return _answer(operations.list_mailboxes(token))


def _create_draft(token: AgentToken, args: CreateDraftArguments, raw: dict) -> ToolAnswer:
    forwarded: list[Upload] = []
    return _once(
        token,
        tool="create_draft",
        key=args.idempotency_key,
        derive=True,
        raw=raw,
        prepare=lambda: forwarded.extend(operations.forwarded_for_create(token, args)),
        work=lambda: operations.create_draft(token, args, forwarded),
        authorize=lambda: operations.reach_mailbox(token, args.mailbox),
    )


def _revise_draft(token: AgentToken, args: ReviseDraftArguments, raw: dict) -> ToolAnswer:
    forwarded: list[Upload] = []
    return _once(
        token,
        tool="revise_draft",
        key=args.idempotency_key,
        derive=False,
        raw=raw,
        prepare=lambda: forwarded.extend(
            operations.forwarded_for_revision(token, args.draft_id, args)
        ),
        work=lambda: operations.revise_draft(token, args.draft_id, args, forwarded),
        authorize=lambda: operations.reach_draft(token, args.draft_id),
    )


def _withdraw_draft(token: AgentToken, args: WithdrawDraftArguments, raw: dict) -> ToolAnswer:
    return _once(
        token,
        tool="withdraw_draft",
        key=args.idempotency_key,
        derive=False,
        raw=raw,
        work=lambda: operations.withdraw_draft(token, args.draft_id),
        authorize=lambda: operations.reach_draft(token, args.draft_id),
    )


def _get_draft(token: AgentToken, args: DraftArguments, raw: dict) -> ToolAnswer:
    return _answer(operations.read_draft(token, args.draft_id))


def _list_drafts(token: AgentToken, args: ListDraftsArguments, raw: dict) -> ToolAnswer:
    return _answer(
        operations.list_drafts(token, status=args.status, cursor=args.cursor, limit=args.limit)
    )


def _create_broadcast(token: AgentToken, args: CreateBroadcastArguments, raw: dict) -> ToolAnswer:
    return _once(
        token,
        tool="create_broadcast",
        key=args.idempotency_key,
        derive=True,
        raw=raw,
        work=lambda: operations.create_broadcast(token, args),
        authorize=lambda: operations.reach_mailbox(token, args.mailbox),
    )


def _replace_recipients(
    token: AgentToken, args: ReplaceRecipientsArguments, raw: dict
) -> ToolAnswer:
    return _once(
        token,
        tool="replace_broadcast_recipients",
        key=args.idempotency_key,
        derive=False,
        raw=raw,
        work=lambda: operations.replace_broadcast_recipients(token, args.broadcast_id, args),
        authorize=lambda: operations.reach_broadcast(token, args.broadcast_id),
    )


def _get_broadcast(token: AgentToken, args: BroadcastArguments, raw: dict) -> ToolAnswer:
    return _answer(operations.read_broadcast(token, args.broadcast_id))


def _list_broadcasts(token: AgentToken, args: ListBroadcastsArguments, raw: dict) -> ToolAnswer:
    return _answer(operations.list_broadcasts(token, cursor=args.cursor, limit=args.limit))


def _reads(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=True, open_world_hint=False)


def _writes(title: str, *, idempotent: bool, destructive: bool = False) -> ToolAnnotations:
    return ToolAnnotations(
        title=title,
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


BROADCAST_TOOLS = (
    ToolSpec(
        name="create_broadcast",
        title="Post a broadcast for review",
        description=(
            "One message to many recipients (up to 10,000), each receiving their own copy: "
            "`recipients` as a list of {address, variables} (or `recipients_csv`, a header with "
            "`address` and one column per variable). `{{ name }}` placeholders take each "
            "recipient's variables; nothing else is template syntax. Pending until a person "
            "approves it once; nothing is sent before. Any bad row refuses the whole upload "
            "(recipients_invalid: each error's field names the item by its index from 0, "
            "recipients[1].address, or the CSV's column, recipients_csv.address, and row is "
            "its number from 1). Idempotent (idempotency_key)."
        ),
        scope=WRITE,
        arguments=CreateBroadcastArguments,
        run=_create_broadcast,
        annotations=_writes("Post a broadcast for review", idempotent=True),
    ),
    ToolSpec(
        name="replace_broadcast_recipients",
        title="Replace a pending broadcast's recipients",
        description=(
            "Sets the whole recipient list of a broadcast an agent posted, still pending "
            "review (refused once decided, and for a broadcast a person posted: "
            "broadcast_posted_by_person); the same row checks as create_broadcast."
        ),
        scope=WRITE,
        arguments=ReplaceRecipientsArguments,
        run=_replace_recipients,
        annotations=_writes("Replace a pending broadcast's recipients", idempotent=True),
    ),
    ToolSpec(
        name="get_broadcast",
        title="Read a broadcast",
        description=(
            "A broadcast's state (pending_review, approved, fanning_out, sending, paused, "
            "completed, cancelled, rejected), its sends by state, deliveries and the recipients "
            "filtered out (suppressed, not allowed)."
        ),
        scope=READ,
        arguments=BroadcastArguments,
        run=_get_broadcast,
        annotations=_reads("Read a broadcast"),
    ),
    ToolSpec(
        name="list_broadcasts",
        title="List broadcasts",
        description="Broadcasts newest first; page with `next_cursor`.",
        scope=READ,
        arguments=ListBroadcastsArguments,
        run=_list_broadcasts,
        annotations=_reads("List broadcasts"),
    ),
)


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            name="list_mailboxes",
            title="List mailboxes",
            description="The mailboxes this token may draft from (id, address, status).",
            scope=READ,
            arguments=NoArguments,
            run=_list_mailboxes,
            annotations=_reads("List mailboxes"),
        ),
        ToolSpec(
            name="create_draft",
            title="Post a draft reply for review",
            description=(
                "Creates a pending draft (version 1) in the review queue; a person approves or "
                "rejects it, and only then is it sent. `mailbox` is an id or address from "
                "list_mailboxes. A reply (`in_reply_to`) takes the subject of the message it "
                "answers: leave `subject` out or send exactly it. Without `in_reply_to` it is a "
                "new message in a thread of its own, so `thread_id` is refused "
                "(thread_id_without_in_reply_to). Idempotent (idempotency_key)."
            ),
            scope=WRITE,
            arguments=CreateDraftArguments,
            run=_create_draft,
            annotations=_writes("Post a draft reply for review", idempotent=True),
        ),
        ToolSpec(
            name="revise_draft",
            title="Revise a pending draft",
            description=(
                "Adds a version to a pending draft (refused once it is decided). With "
                "`base_version`, a revision of a draft a person edited since is refused "
                "(version_conflict): read it again with get_draft."
            ),
            scope=WRITE,
            arguments=ReviseDraftArguments,
            run=_revise_draft,
            annotations=_writes("Revise a pending draft", idempotent=False),
        ),
        ToolSpec(
            name="withdraw_draft",
            title="Withdraw a pending draft",
            description="Takes a pending draft out of the review queue (refused once decided).",
            scope=WRITE,
            arguments=WithdrawDraftArguments,
            run=_withdraw_draft,
            annotations=_writes("Withdraw a pending draft", idempotent=False, destructive=True),
        ),
        ToolSpec(
            name="get_draft",
            title="Read a draft",
            description=(
                "A draft's status (pending, approved, rejected and why, expired, withdrawn), its "
                "current version, its send intent and per-recipient delivery."
            ),
            scope=READ,
            arguments=DraftArguments,
            run=_get_draft,
            annotations=_reads("Read a draft"),
        ),
        ToolSpec(
            name="list_drafts",
            title="List drafts",
            description="Drafts newest first, optionally by status; page with `next_cursor`.",
            scope=READ,
            arguments=ListDraftsArguments,
            run=_list_drafts,
            annotations=_reads("List drafts"),
        ),
        *BROADCAST_TOOLS,
    )
}


def _unknown_tool(name: str) -> ToolAnswer:
    return ToolAnswer(
        problem_document(
            status=404,
            code="unknown_tool",
            detail="There is no tool of that name; tools/list names them.",
            # The call's "name" (params.name of tools/call), not echoed: it is the caller's text.
            errors=[{"field": "name", "message": "no tool of that name"}],
        ),
        is_error=True,
    )


def _authenticated(raw_token: str) -> AgentToken:
    token = token_authenticate(raw_token)
    if token is None:
        raise ApiProblem(
            401,
            "unauthenticated",
            "Send a valid, unexpired agent token as 'Authorization: Bearer cs_…'.",
            title="Authentication required",
        )
    return token


def _refusal(document: dict) -> ToolAnswer:
    return ToolAnswer(document, is_error=True)


def _problem_refusal(exc: ApiProblem) -> ToolAnswer:
    """The problem document, with ``retry_after`` (seconds) where the JSON API sends a
    Retry-After header (the rate limit, a key in flight): a tool result has no headers, and the
    wait was otherwise only in the words of ``detail``."""
    document = problem_of(exc)
    if "Retry-After" in exc.headers:
        document["retry_after"] = int(exc.headers["Retry-After"])
    return _refusal(document)


def _call(spec: ToolSpec, raw_token: str, arguments: dict, counted: bool) -> ToolAnswer:
    try:
        token = _authenticated(raw_token)
        check_token(token, spec.scope, count=not counted)
        check_storable(arguments)
        args = spec.arguments.model_validate(arguments)
        return spec.run(token, args, arguments)
    except ArgumentsInvalid as exc:
        return _refusal(validation_problem(exc.errors()))
    except UnstorableText as exc:
        return _refusal(unstorable_problem(exc))
    except ApiProblem as exc:
        return _problem_refusal(exc)
    except DraftError as exc:
        return _refusal(draft_problem(exc))
    except Exception:
        # A failure of ours: logged here, and the caller gets the API's 500 document, never the
        # exception's text (the SDK would send str(exc), a database error's included).
        log.exception("agent_api.mcp.tool_failed", extra={"tool": spec.name})
        return _refusal(internal_problem())


def call_tool(*, raw_token: str, name: str, arguments: dict, counted: bool = False) -> ToolAnswer:
    """One tool call with the token's rights; a refusal is an error answer, never an exception.
    ``counted``: the rate limit has already counted the request that carries the call (the MCP
    server counts every request it takes, before it reads the body)."""
    spec = TOOLS.get(name)
    answer = _call(spec, raw_token, arguments, counted) if spec is not None else _unknown_tool(name)
    if answer.is_error:
        # The code only: arguments are the agent's data and may hold a customer's words.
        log.info(
            "agent_api.mcp.tool_refused",
            extra={"tool": spec.name if spec else None, "code": answer.document["code"]},
        )
    return answer
