"""Provisioning with the organization key: pods, inboxes, inbox-scoped keys, pod webhooks. These
raise :class:`ProviderError`: they run in an admin's request or a command, where a clear error is
the right answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from agentmail import AgentMail
from agentmail.api_keys.types import ApiKeyPermissions, CreateBearerApiKeyRequest
from agentmail.core.api_error import ApiError
from django.conf import settings

from .client import NO_RETRIES, sdk
from .responses import ProviderError, provider_error

# Least privilege for the key a mailbox sends with (reference/agentmail-api.md §2.7 and §7.3).
INBOX_KEY_PERMISSIONS = {
    "message_send": True,
    "message_read": True,
    "label_spam_read": False,
    "label_blocked_read": False,
    "label_unauthenticated_read": False,
    "label_trash_read": False,
}
WEBHOOK_EVENT_TYPES = [
    "message.sent",
    "message.delivered",
    "message.bounced",
    "message.complained",
    "message.rejected",
    "message.received",
]


@dataclass(frozen=True)
class CreatedKey:
    api_key_id: str
    api_key: str


@dataclass(frozen=True)
class CreatedInbox:
    """An inbox as AgentMail reports it: a replayed ``client_id`` answers with the original
    inbox, whose display name may be an older one than the create asked for."""

    inbox_id: str
    display_name: str


@dataclass(frozen=True)
class Webhook:
    webhook_id: str
    secret: str
    url: str


def _org_call(fn: Callable[[AgentMail], Any]) -> Any:
    try:
        return fn(sdk(settings.AGENTMAIL_ORG_API_KEY))
    except ApiError as exc:
        raise provider_error(exc) from None
    except httpx.TransportError as exc:
        raise ProviderError(
            f"AgentMail unreachable: {type(exc).__name__}", code="transport"
        ) from None


def create_pod(*, client_id: str, name: str) -> str:
    pod = _org_call(
        lambda c: c.pods.create(name=name, client_id=client_id, request_options=NO_RETRIES)
    )
    if not getattr(pod, "pod_id", None):
        raise ProviderError("AgentMail returned a pod without pod_id", code="malformed_response")
    return pod.pod_id


def _known(get, *, is_it, what: str) -> bool:
    """Whether AgentMail knows what ``get`` asks for: False on its 404, ProviderError on any
    other failure (a timeout or a 5xx says nothing either way) and on an answer that ``is_it``
    does not recognise."""
    try:
        found = _org_call(get)
    except ProviderError as exc:
        if exc.status == 404:
            return False
        raise
    if not is_it(found):
        raise ProviderError(
            f"AgentMail answered with another {what} or none", code="malformed_response"
        )
    return True


def pod_exists(*, pod_id: str) -> bool:
    """Whether AgentMail knows the pod (see ``_known``)."""
    return _known(
        lambda c: c.pods.get(pod_id, request_options=NO_RETRIES),
        is_it=lambda pod: getattr(pod, "pod_id", None) == pod_id,
        what="pod",
    )


def inbox_exists(*, inbox_id: str) -> bool:
    """Whether AgentMail knows the inbox (organization route, whatever its pod; see ``_known``)."""
    return _known(
        lambda c: c.inboxes.get(inbox_id, request_options=NO_RETRIES),
        is_it=lambda inbox: (getattr(inbox, "inbox_id", None) or "").lower() == inbox_id.lower(),
        what="inbox",
    )


def create_inbox(
    *, pod_id: str, username: str, domain: str, display_name: str, client_id: str
) -> CreatedInbox:
    optional = {"display_name": display_name} if display_name else {}
    inbox = _org_call(
        lambda c: c.pods.inboxes.create(
            pod_id,
            username=username,
            domain=domain,
            client_id=client_id,
            request_options=NO_RETRIES,
            **optional,
        )
    )
    if not getattr(inbox, "inbox_id", None):
        raise ProviderError(
            "AgentMail returned an inbox without inbox_id", code="malformed_response"
        )
    return CreatedInbox(inbox_id=inbox.inbox_id, display_name=inbox.display_name or "")


def update_inbox_display_name(*, pod_id: str, inbox_id: str, display_name: str) -> str:
    """Set the inbox's display name, the phrase of the From header of everything it sends
    (``""``: none), and return it once AgentMail reports it. Through the tenant's pod route, so
    AgentMail itself refuses (404) an inbox outside that pod, whatever the organization key
    could reach. Safe to repeat: the same name again changes nothing."""
    inbox = _org_call(
        lambda c: c.pods.inboxes.update(
            pod_id, inbox_id, display_name=display_name, request_options=NO_RETRIES
        )
    )
    if getattr(inbox, "inbox_id", None) != inbox_id:
        raise ProviderError(
            "AgentMail answered the update with another inbox or none", code="malformed_response"
        )
    reported = getattr(inbox, "display_name", None) or ""
    if reported != display_name:
        raise ProviderError(
            "AgentMail reports another display name than the one sent", code="not_applied"
        )
    return reported


def list_inbox_keys(*, inbox_id: str) -> list[tuple[str, str]]:
    """(api_key_id, name) of every key scoped to the inbox."""
    response = _org_call(lambda c: c.inboxes.api_keys.list(inbox_id, request_options=NO_RETRIES))
    keys = getattr(response, "api_keys", None) or []
    return [(k.api_key_id, k.name or "") for k in keys]


def delete_inbox_key(*, inbox_id: str, api_key_id: str) -> None:
    _org_call(lambda c: c.inboxes.api_keys.delete(inbox_id, api_key_id, request_options=NO_RETRIES))


def create_inbox_key(*, inbox_id: str, name: str) -> CreatedKey:
    # The SDK would build the model from the dict too; building it here lets mypy check it.
    request = CreateBearerApiKeyRequest(
        name=name, permissions=ApiKeyPermissions(**INBOX_KEY_PERMISSIONS)
    )
    created = _org_call(
        lambda c: c.inboxes.api_keys.create(inbox_id, request=request, request_options=NO_RETRIES)
    )
    if not getattr(created, "api_key", None) or not getattr(created, "api_key_id", None):
        raise ProviderError("AgentMail returned a key without a secret", code="malformed_response")
    return CreatedKey(api_key_id=created.api_key_id, api_key=created.api_key)


def register_pod_webhook(*, pod_id: str, url: str, client_id: str) -> Webhook:
    hook = _org_call(
        lambda c: c.pods.webhooks.create(
            pod_id,
            url=url,
            event_types=WEBHOOK_EVENT_TYPES,
            client_id=client_id,
            request_options=NO_RETRIES,
        )
    )
    if not getattr(hook, "webhook_id", None) or not getattr(hook, "secret", None):
        raise ProviderError(
            "AgentMail returned a webhook without id or secret", code="malformed_response"
        )
    return Webhook(webhook_id=hook.webhook_id, secret=hook.secret, url=hook.url)
