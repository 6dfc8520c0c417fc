"""Inbox routes: `POST/GET /v0/inboxes` and `/v0/pods/{pod_id}/inboxes`, and one inbox (`GET`,
`PATCH`, `DELETE`)."""

from __future__ import annotations

from ..errors import ApiError
from ..store import Store
from ..store.inboxes import MAX_METADATA_KEYS, MAX_METADATA_LENGTH
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


# What `PATCH /v0/inboxes/{inbox_id}` may change (reference/agentmail-api.md §2.3).
UPDATABLE = ("display_name", "status", "metadata")


def update_inbox(store: Store, call: Call) -> Reply:
    """`PATCH /v0/inboxes/{inbox_id}` and the pod route: `{display_name?, status?, metadata?}`,
    at least one of them. Scoped like a read of the inbox: an inbox key may change its own inbox
    when its permissions allow `inbox_update` (AgentMail only says that creating inboxes is cut
    from inbox keys; whether updating is too is not documented), and is refused pod routes."""
    perm(call, "inbox_update")
    inbox = scope_inbox(store, call)
    changes = _update_fields(call.json())
    updated = store.inboxes.update(inbox["inbox_id"], changes)
    if updated is None:
        raise ApiError.not_found("Inbox")
    return Reply.json(200, updated)


def _update_fields(body: dict) -> dict:
    """The validated changes of an inbox PATCH; `{}` (or nothing we know) is refused."""
    changes = {name: body[name] for name in UPDATABLE if name in body}
    if not changes:
        raise ApiError.validation(
            "At least one of display_name, status or metadata is required", []
        )
    if "display_name" in changes:
        opt_str(changes, "display_name")
    if "status" in changes and changes["status"] not in ("active", "paused"):
        raise ApiError.validation("status must be 'active' or 'paused'", ["status"])
    if "metadata" in changes:
        _check_metadata_change(changes["metadata"])
    return changes


def _check_metadata_change(value: object) -> None:
    """None clears the metadata; otherwise a non-empty object of string, number or boolean values
    (or None, which removes that key), keys and strings at most 256 characters."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise ApiError.validation("metadata must be an object or null", ["metadata"])
    if not value:
        raise ApiError.validation("metadata must not be empty; send null to clear it", ["metadata"])
    if len(value) > MAX_METADATA_KEYS:
        raise ApiError.validation(
            f"metadata may hold at most {MAX_METADATA_KEYS} keys", ["metadata"]
        )
    for key, item in value.items():
        too_long = len(key) > MAX_METADATA_LENGTH or (
            isinstance(item, str) and len(item) > MAX_METADATA_LENGTH
        )
        if too_long or not (item is None or isinstance(item, str | int | float | bool)):
            raise ApiError.validation(
                f"metadata values are strings, numbers or booleans of at most "
                f"{MAX_METADATA_LENGTH} characters",
                ["metadata", key],
            )


def delete_inbox(store: Store, call: Call) -> Reply:
    """204; the inbox's messages, keys and webhooks go with it (reference §2.3)."""
    perm(call, "inbox_delete")
    store.delete_inbox(scope_inbox(store, call)["inbox_id"])
    return Reply(204)
