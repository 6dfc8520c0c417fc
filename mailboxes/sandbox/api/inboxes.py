"""Inbox routes: `POST/GET /v0/inboxes` and `/v0/pods/{pod_id}/inboxes`, and one inbox."""

from __future__ import annotations

from ..errors import ApiError
from ..store import Store
from .call import Call, Reply
from .fields import DOMAIN_RE, USERNAME_RE, client_id_of, opt_str
from .scope import listing, paging, perm, scope_inbox, scope_pod

DEFAULT_DOMAIN = "agentmail.to"


def create_inbox(store: Store, call: Call) -> Reply:
    who = call.who
    if "pod_id" in call.params:
        pod_id = scope_pod(store, call, call.params["pod_id"])["pod_id"]
    elif who.scope_type == "inbox":
        raise ApiError.forbidden("Inbox-scoped keys cannot create inboxes")
    else:
        pod_id = who.pod_id if who.scope_type == "pod" else store.default_pod_id
    perm(call, "inbox_create")
    body = call.json()
    client_id = client_id_of(body)
    if client_id:
        existing = store.inboxes.find_by_client_id(client_id)
        if existing is not None:
            if existing["pod_id"] != pod_id:
                raise ApiError(403, "already_exists", "client_id is used by another inbox")
            return Reply.json(200, existing)
    username, domain, status, metadata = _inbox_fields(body)
    inbox = store.inboxes.create(
        pod_id=pod_id,
        username=username,
        domain=domain,
        display_name=opt_str(body, "display_name"),
        client_id=client_id,
        metadata=metadata,
        status=status,
    )
    return Reply.json(200, inbox)


def _inbox_fields(body: dict) -> tuple[str | None, str, str | None, dict | None]:
    """username, domain, status and metadata of a new inbox, validated."""
    username = opt_str(body, "username")
    if username is not None:
        username = username.lower()
        if not USERNAME_RE.fullmatch(username):
            raise ApiError.validation("Invalid username", ["username"])
    domain = (opt_str(body, "domain") or DEFAULT_DOMAIN).lower()
    if not DOMAIN_RE.fullmatch(domain):
        raise ApiError.validation("Invalid domain", ["domain"])
    status = opt_str(body, "status")
    if status not in (None, "paused"):
        raise ApiError.validation("status must be 'paused'", ["status"])
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ApiError.validation("metadata must be an object", ["metadata"])
    return username, domain, status, metadata


def list_inboxes(store: Store, call: Call) -> Reply:
    who = call.who
    perm(call, "inbox_read")
    limit, token, asc = paging(call)
    pod_id = None
    if "pod_id" in call.params:
        pod_id = scope_pod(store, call, call.params["pod_id"])["pod_id"]
    elif who.scope_type == "pod":
        pod_id = who.pod_id
    inbox_id = who.inbox_id if who.scope_type == "inbox" else None
    page = store.inboxes.page(pod_id=pod_id, inbox_id=inbox_id, limit=limit, token=token, asc=asc)
    return listing("inboxes", page, limit)


def get_inbox(store: Store, call: Call) -> Reply:
    perm(call, "inbox_read")
    return Reply.json(200, scope_inbox(store, call))
