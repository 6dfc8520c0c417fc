"""API key routes (`/v0/api-keys`, `/v0/pods/{pod_id}/api-keys`, `/v0/inboxes/{id}/api-keys`)
and `GET /v0/auth/me`, the caller's own key."""

from __future__ import annotations

from typing import Any

from ..errors import ApiError
from ..store import Store
from .call import Call, Reply
from .fields import opt_str
from .scope import caller_pod, listing, paging, perm, scope_inbox, scope_pod


def auth_me(store: Store, call: Call) -> Reply:
    who = call.who
    out: dict[str, Any] = {"scope_type": who.scope_type}
    if who.scope_type == "organization":
        out["scope_id"] = store.organization_id
    elif who.scope_type == "pod":
        out |= {"scope_id": who.pod_id}
    else:
        out |= {"scope_id": who.inbox_id}
    out["organization_id"] = store.organization_id
    pod_id = caller_pod(store, call)
    if pod_id:
        out["pod_id"] = pod_id
    if who.inbox_id:
        out["inbox_id"] = who.inbox_id
    out["api_key_id"] = who.api_key_id
    return Reply.json(200, out)


def create_api_key(store: Store, call: Call) -> Reply:
    who = call.who
    scope: tuple[str, str | None, str | None]  # (type, pod id, inbox id)
    if "pod_id" in call.params:
        scope = ("pod", scope_pod(store, call, call.params["pod_id"])["pod_id"], None)
    elif "inbox_id" in call.params:
        scope = ("inbox", None, scope_inbox(store, call)["inbox_id"])
    else:
        scope = (who.scope_type, who.pod_id, who.inbox_id)
    perm(call, "api_key_create")
    body = call.json()
    permissions = body.get("permissions")
    if permissions is not None and (
        not isinstance(permissions, dict)
        or not all(isinstance(v, bool) for v in permissions.values())
    ):
        raise ApiError.validation("permissions must map names to booleans", ["permissions"])
    if who.permissions is not None:
        if permissions is None:
            raise ApiError(
                403,
                "unrestricted_key_required",
                "Only an unrestricted key can create an unrestricted key",
            )
        if any(v and not who.permissions.get(k) for k, v in permissions.items()):
            raise ApiError(403, "permission_escalation", "Cannot grant a permission you lack")
    created = store.keys.create(
        scope_type=scope[0],
        pod_id=scope[1],
        inbox_id=scope[2],
        name=opt_str(body, "name"),
        permissions=permissions,
    )
    return Reply.json(200, created)


def _key_filter(store: Store, call: Call) -> tuple[str | None, list[str] | None]:
    who = call.who
    if "pod_id" in call.params:
        pod_id = scope_pod(store, call, call.params["pod_id"])["pod_id"]
        return pod_id, store.inboxes.ids_in_pod(pod_id)
    if "inbox_id" in call.params:
        return None, [scope_inbox(store, call)["inbox_id"]]
    if who.scope_type == "pod" and who.pod_id:
        return who.pod_id, store.inboxes.ids_in_pod(who.pod_id)
    if who.scope_type == "inbox" and who.inbox_id:
        return None, [who.inbox_id]
    return None, None


def list_api_keys(store: Store, call: Call) -> Reply:
    perm(call, "api_key_read")
    limit, token, _ = paging(call)
    pod_id, inbox_ids = _key_filter(store, call)
    page = store.keys.page(pod_id=pod_id, inbox_ids=inbox_ids, limit=limit, token=token)
    return listing("api_keys", page, limit)


def delete_api_key(store: Store, call: Call) -> Reply:
    perm(call, "api_key_delete")
    pod_id, inbox_ids = _key_filter(store, call)
    key = store.keys.get(call.params["api_key_id"])
    visible = key is not None and (
        (pod_id is None and inbox_ids is None)
        or (pod_id is not None and key.get("pod_id") == pod_id)
        or (inbox_ids is not None and key.get("inbox_id") in inbox_ids)
    )
    if not visible:
        raise ApiError.not_found("API key")
    store.keys.delete(call.params["api_key_id"])
    return Reply(204)
