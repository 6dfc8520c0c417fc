"""The `/v0` routes: the subset of AgentMail in reference §8, with scopes enforced (§8.2).

One module per resource, as in the real API: `pods`, `inboxes`, `keys` (and `auth/me`),
`messages` (reads), `sending` (send, reply, reply-all, forward), `webhooks`. Each handler takes
the store and the call; `Api.routes` binds them to the store.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ..store import Store
from . import inboxes, keys, messages, pods, sending, webhooks
from .call import Call, Handler, Reply

__all__ = ["Api", "Call", "Handler", "Reply"]

# (method, path pattern below /v0, route name used by faults and the request log, handler)
ROUTES: list[tuple[str, str, str, Callable[[Store, Call], Reply]]] = [
    ("GET", "auth/me", "auth_me", keys.auth_me),
    ("POST", "pods", "create_pod", pods.create_pod),
    ("GET", "pods", "list_pods", pods.list_pods),
    ("GET", "pods/{pod_id}", "get_pod", pods.get_pod),
    ("DELETE", "pods/{pod_id}", "delete_pod", pods.delete_pod),
    ("POST", "pods/{pod_id}/inboxes", "create_inbox", inboxes.create_inbox),
    ("GET", "pods/{pod_id}/inboxes", "list_inboxes", inboxes.list_inboxes),
    ("GET", "pods/{pod_id}/inboxes/{inbox_id}", "get_inbox", inboxes.get_inbox),
    ("PATCH", "pods/{pod_id}/inboxes/{inbox_id}", "update_inbox", inboxes.update_inbox),
    ("DELETE", "pods/{pod_id}/inboxes/{inbox_id}", "delete_inbox", inboxes.delete_inbox),
    ("POST", "pods/{pod_id}/api-keys", "create_api_key", keys.create_api_key),
    ("GET", "pods/{pod_id}/api-keys", "list_api_keys", keys.list_api_keys),
    ("DELETE", "pods/{pod_id}/api-keys/{api_key_id}", "delete_api_key", keys.delete_api_key),
    ("POST", "pods/{pod_id}/webhooks", "create_webhook", webhooks.create_webhook),
    ("GET", "pods/{pod_id}/webhooks", "list_webhooks", webhooks.list_webhooks),
    ("GET", "pods/{pod_id}/webhooks/{webhook_id}", "get_webhook", webhooks.get_webhook),
    ("PATCH", "pods/{pod_id}/webhooks/{webhook_id}", "update_webhook", webhooks.update_webhook),
    ("DELETE", "pods/{pod_id}/webhooks/{webhook_id}", "delete_webhook", webhooks.delete_webhook),
    ("POST", "inboxes", "create_inbox", inboxes.create_inbox),
    ("GET", "inboxes", "list_inboxes", inboxes.list_inboxes),
    ("GET", "inboxes/{inbox_id}", "get_inbox", inboxes.get_inbox),
    ("PATCH", "inboxes/{inbox_id}", "update_inbox", inboxes.update_inbox),
    ("DELETE", "inboxes/{inbox_id}", "delete_inbox", inboxes.delete_inbox),
    ("POST", "inboxes/{inbox_id}/api-keys", "create_api_key", keys.create_api_key),
    ("GET", "inboxes/{inbox_id}/api-keys", "list_api_keys", keys.list_api_keys),
    ("DELETE", "inboxes/{inbox_id}/api-keys/{api_key_id}", "delete_api_key", keys.delete_api_key),
    ("POST", "inboxes/{inbox_id}/webhooks", "create_webhook", webhooks.create_webhook),
    ("GET", "inboxes/{inbox_id}/webhooks", "list_webhooks", webhooks.list_webhooks),
    ("GET", "inboxes/{inbox_id}/webhooks/{webhook_id}", "get_webhook", webhooks.get_webhook),
    (
        "PATCH",
        "inboxes/{inbox_id}/webhooks/{webhook_id}",
        "update_webhook",
        webhooks.update_webhook,
    ),
    (
        "DELETE",
        "inboxes/{inbox_id}/webhooks/{webhook_id}",
        "delete_webhook",
        webhooks.delete_webhook,
    ),
    ("POST", "inboxes/{inbox_id}/messages/send", "send", sending.send),
    ("GET", "inboxes/{inbox_id}/messages", "list_messages", messages.list_messages),
    ("GET", "inboxes/{inbox_id}/messages/{message_id}", "get_message", messages.get_message),
    (
        "GET",
        "inboxes/{inbox_id}/messages/{message_id}/attachments/{attachment_id}",
        "get_attachment",
        messages.get_attachment,
    ),
    ("POST", "inboxes/{inbox_id}/messages/{message_id}/reply", "reply", sending.reply),
    ("POST", "inboxes/{inbox_id}/messages/{message_id}/reply-all", "reply_all", sending.reply_all),
    ("POST", "inboxes/{inbox_id}/messages/{message_id}/forward", "forward", sending.forward),
    ("POST", "api-keys", "create_api_key", keys.create_api_key),
    ("GET", "api-keys", "list_api_keys", keys.list_api_keys),
    ("DELETE", "api-keys/{api_key_id}", "delete_api_key", keys.delete_api_key),
    ("POST", "webhooks", "create_webhook", webhooks.create_webhook),
    ("GET", "webhooks", "list_webhooks", webhooks.list_webhooks),
    ("GET", "webhooks/{webhook_id}", "get_webhook", webhooks.get_webhook),
    ("PATCH", "webhooks/{webhook_id}", "update_webhook", webhooks.update_webhook),
    ("DELETE", "webhooks/{webhook_id}", "delete_webhook", webhooks.delete_webhook),
]


class Api:
    def __init__(self, store: Store):
        self.store = store
        self.routes: list[tuple[str, str, str, Handler]] = [
            (method, pattern, name, partial(handler, store))
            for method, pattern, name, handler in ROUTES
        ]
