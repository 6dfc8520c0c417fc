"""Scopes and permissions of the caller's key (reference §8.2), and paging of list routes."""

from __future__ import annotations

from typing import Any

from ..errors import ApiError
from ..records import Page
from ..store import Store
from .call import Call, Reply


def allowed(call: Call, flag: str) -> bool:
    """Whether the caller's key holds `flag`: no `permissions` whitelist means all of them."""
    permissions = call.who.permissions
    return permissions is None or bool(permissions.get(flag))


def perm(call: Call, flag: str) -> None:
    if not allowed(call, flag):
        raise ApiError(403, "missing_permission", "Forbidden")


def scope_pod(store: Store, call: Call, pod_id: str) -> dict:
    who = call.who
    if who.scope_type == "inbox":
        raise ApiError.forbidden("Inbox-scoped keys cannot use pod routes")
    pod = store.pods.get(pod_id)
    if pod is None or (who.scope_type == "pod" and who.pod_id != pod_id):
        raise ApiError.not_found("Pod")
    return pod


def scope_inbox(store: Store, call: Call) -> dict:
    """The inbox named in the path, if the caller may see it; out of scope reads as 404."""
    pod_id = call.params.get("pod_id")
    if pod_id is not None:
        scope_pod(store, call, pod_id)
    inbox_id = call.params["inbox_id"].lower()
    inbox = store.inboxes.get(inbox_id)
    who = call.who
    if (
        inbox is None
        or (pod_id is not None and inbox["pod_id"] != pod_id)
        or (who.scope_type == "pod" and inbox["pod_id"] != who.pod_id)
        or (who.scope_type == "inbox" and inbox_id != who.inbox_id)
    ):
        raise ApiError.not_found("Inbox")
    return inbox


def caller_pod(store: Store, call: Call) -> str | None:
    """The pod the caller is confined to, None for an organization key."""
    who = call.who
    if who.scope_type == "pod":
        return who.pod_id
    if who.scope_type == "inbox":
        inbox = store.inboxes.get(who.inbox_id or "")
        return inbox["pod_id"] if inbox else ""
    return None


def paging(call: Call, cap: int = 1000) -> tuple[int, str | None, bool]:
    raw = call.q("limit")
    try:
        limit = 100 if raw is None else int(raw)
    except ValueError as exc:
        raise ApiError.validation("limit must be an integer", ["limit"]) from exc
    if limit < 1:
        raise ApiError.validation("limit must be positive", ["limit"])
    ascending = (call.q("ascending") or "false").lower() == "true"
    return min(limit, cap), call.q("page_token"), ascending


def listing(key: str, page: Page, limit: int) -> Reply:
    out: dict[str, Any] = {"count": len(page.items), "limit": limit}
    if page.next_token:
        out["next_page_token"] = page.next_token
    out[key] = page.items
    return Reply.json(200, out)
