"""Webhook routes: `/v0/webhooks`, `/v0/pods/{pod_id}/webhooks`, `/v0/inboxes/{id}/webhooks`,
each with `GET/PATCH/DELETE .../{webhook_id}`; only webhooks inside the caller's scope show."""

from __future__ import annotations

import re
from typing import Any

from ..errors import ApiError
from ..records import RESTRICTED_EVENT_LABELS, RESTRICTED_LABELS
from ..store import Store
from .call import Call, Reply
from .fields import client_id_of, event_types, str_list, string_map
from .scope import allowed, listing, paging, perm, scope_inbox, scope_pod


def _visible(store: Store, call: Call, hook: dict) -> bool:
    who = call.who
    if "pod_id" in call.params and hook.get("pod_id") != call.params["pod_id"]:
        return False
    if "inbox_id" in call.params and hook.get("inbox_id") != call.params["inbox_id"].lower():
        return False
    if who.scope_type == "organization":
        return True
    if who.scope_type == "inbox":
        return hook.get("inbox_id") == who.inbox_id
    if hook.get("pod_id") == who.pod_id:
        return True
    inbox = store.inboxes.get(hook.get("inbox_id") or "")
    return inbox is not None and inbox["pod_id"] == who.pod_id


def _check_scope(store: Store, call: Call) -> None:
    if "pod_id" in call.params:
        scope_pod(store, call, call.params["pod_id"])
    elif "inbox_id" in call.params:
        scope_inbox(store, call)


def _hook(store: Store, call: Call) -> dict:
    _check_scope(store, call)
    hook = store.webhooks.get(call.params["webhook_id"])
    if hook is None or not _visible(store, call, hook):
        raise ApiError.not_found("Webhook")
    return hook


def _readable(call: Call, types: list[str]) -> list[str]:
    """`types`, refused with 403 if one announces mail the caller's key may not read (a missing
    `label_*_read`, docs permissions.mdx), in the legacy `<permission> is forbidden` form."""
    for event_type in types:
        label = RESTRICTED_EVENT_LABELS.get(event_type)
        if label is not None and not allowed(call, RESTRICTED_LABELS[label]):
            raise ApiError(403, "missing_permission", f"{RESTRICTED_LABELS[label]} is forbidden")
    return types


def create_webhook(store: Store, call: Call) -> Reply:
    owner: dict[str, str] = {}
    if "pod_id" in call.params:
        owner["pod_id"] = scope_pod(store, call, call.params["pod_id"])["pod_id"]
    elif "inbox_id" in call.params:
        owner["inbox_id"] = scope_inbox(store, call)["inbox_id"]
    elif call.who.scope_type != "organization":
        raise ApiError.forbidden("Use the pod or inbox webhook routes with a scoped key")
    perm(call, "webhook_create")
    body = call.json()
    url = body.get("url")
    if not isinstance(url, str) or not re.match(r"https?://", url):
        raise ApiError.validation("url must be an http(s) URL", ["url"])
    types = _readable(call, event_types(body.get("event_types")))
    if not types:
        raise ApiError.validation("At least one event type is required", ["event_types"])
    spec: dict[str, Any] = {"url": url, "event_types": types}
    for name in ("pod_ids", "inbox_ids"):
        ids = body.get(name)
        if ids is None:
            continue
        if not isinstance(ids, list) or len(ids) > 10:
            raise ApiError.validation(f"{name} must be a list of at most 10 ids", [name])
        spec[name] = [str(x).lower() if name == "inbox_ids" else str(x) for x in ids]
    spec |= owner
    client_id = client_id_of(body)
    if client_id:
        spec["client_id"] = client_id
    headers = body.get("headers") or {}
    if not string_map(headers):
        raise ApiError.validation("headers must map names to strings", ["headers"])
    return Reply.json(200, store.webhooks.create(spec=spec, headers=headers))


def list_webhooks(store: Store, call: Call) -> Reply:
    _check_scope(store, call)
    perm(call, "webhook_read")
    limit, token, _ = paging(call)
    page = store.webhooks.page(
        predicate=lambda hook: _visible(store, call, hook), limit=limit, token=token
    )
    return listing("webhooks", page, limit)


def get_webhook(store: Store, call: Call) -> Reply:
    perm(call, "webhook_read")
    return Reply.json(200, _hook(store, call))


def update_webhook(store: Store, call: Call) -> Reply:
    perm(call, "webhook_update")
    hook = _hook(store, call)
    body = call.json()
    types = _readable(call, event_types(body.get("event_types")))
    if types:
        hook["event_types"] = types
    for name in ("pod_ids", "inbox_ids"):
        current = list(hook.get(name) or [])
        for value in str_list(body, "add_" + name):
            if value not in current:
                current.append(value)
        removed = set(str_list(body, "remove_" + name))
        current = [v for v in current if v not in removed]
        if current or name in hook:
            hook[name] = current
    reenabled = False
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise ApiError.validation("enabled must be a boolean", ["enabled"])
        reenabled = body["enabled"] and not hook["enabled"]
        hook["enabled"] = body["enabled"]
    return Reply.json(200, store.webhooks.save(hook, reenabled=reenabled))


def delete_webhook(store: Store, call: Call) -> Reply:
    perm(call, "webhook_delete")
    hook = _hook(store, call)
    store.webhooks.delete(hook["webhook_id"])
    return Reply(204)
