"""Pod routes: `POST/GET /v0/pods`, `GET/DELETE /v0/pods/{pod_id}`."""

from __future__ import annotations

from ..errors import ApiError
from ..store import Store
from .call import Call, Reply
from .fields import client_id_of, opt_str
from .scope import listing, paging, perm, scope_pod


def create_pod(store: Store, call: Call) -> Reply:
    if call.who.scope_type != "organization":
        raise ApiError.forbidden("Only organization keys can create pods")
    perm(call, "pod_create")
    body = call.json()
    name = opt_str(body, "name")
    client_id = client_id_of(body)
    return Reply.json(200, store.pods.create(name=name, client_id=client_id))


def list_pods(store: Store, call: Call) -> Reply:
    if call.who.scope_type == "inbox":
        raise ApiError.forbidden("Inbox-scoped keys cannot list pods")
    perm(call, "pod_read")
    limit, token, asc = paging(call)
    only = call.who.pod_id if call.who.scope_type == "pod" else None
    page = store.pods.page(only=only, limit=limit, token=token, asc=asc)
    return listing("pods", page, limit)


def get_pod(store: Store, call: Call) -> Reply:
    perm(call, "pod_read")
    return Reply.json(200, scope_pod(store, call, call.params["pod_id"]))


def delete_pod(store: Store, call: Call) -> Reply:
    """204; 409 ``cannot_delete`` for the default pod and for a pod that holds inboxes
    (reference §2.2). Its keys and webhooks go with it."""
    if call.who.scope_type != "organization":
        raise ApiError.forbidden("Only organization keys can delete pods")
    perm(call, "pod_delete")
    pod_id = scope_pod(store, call, call.params["pod_id"])["pod_id"]
    if pod_id == store.default_pod_id:
        raise ApiError(409, "cannot_delete", "The default pod cannot be deleted")
    if not store.delete_pod(pod_id):
        raise ApiError(409, "cannot_delete", "A pod that has inboxes cannot be deleted")
    return Reply(204)
