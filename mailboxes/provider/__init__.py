"""The one place that talks HTTP to AgentMail.

Everything goes through the official ``agentmail`` SDK with our own ``httpx.Client``:

- ``max_retries=0`` on every call: retries are ours (intents.sending), always with the intent's
  one idempotency key. The SDK would otherwise retry 5xx/409/429 by itself
  (reference/agentmail-api.md §3.3).
- Credentials are bound per call: a fresh SDK facade is built for each call with the caller's key,
  over a shared connection pool that keeps no cookies, so nothing one tenant's call leaves behind
  can reach another tenant's call.
- The SDK does not validate responses (it is generated with skip_validation), so we do: a 2xx
  without a ``message_id`` is not a success.
- Every send outcome is classified as accepted / retry-later / uncertain / permanent, following
  the table in DESIGN.md. Send functions never raise for provider or network faults.

Provisioning helpers (pods, inboxes, keys, webhooks) raise :class:`ProviderError`; they run in an
admin's request or a command, where a clear error is the right answer.

One module per job: ``client`` (the HTTP client and the SDK facade), ``sending``, ``lookups``
(messages by label), ``org`` (provisioning with the organization key), ``responses`` (error
bodies, ``Retry-After``, the classification of an outcome). Callers use this package's names.
"""

from .attachments import ReceivedAttachment, fetch_attachment
from .client import call_seconds, calls_within, encode_path_segment, http_client
from .lookups import LookupResult, MessagesResult, check_key, find_messages_by_label
from .org import (
    CreatedInbox,
    CreatedKey,
    Webhook,
    create_inbox,
    create_inbox_key,
    create_pod,
    delete_inbox_key,
    inbox_exists,
    list_inbox_keys,
    pod_exists,
    register_pod_webhook,
    update_inbox_display_name,
)
from .responses import (
    Outcome,
    ProviderError,
    ProviderErrorBody,
    classify_api_error,
    parse_error_body,
    parse_retry_after,
    refuses_key,
)
from .sending import OutgoingAttachment, SendRequest, SendResult, reply_subject, send_message

__all__ = [
    "CreatedInbox",
    "CreatedKey",
    "LookupResult",
    "MessagesResult",
    "Outcome",
    "OutgoingAttachment",
    "ProviderError",
    "ProviderErrorBody",
    "ReceivedAttachment",
    "SendRequest",
    "SendResult",
    "Webhook",
    "call_seconds",
    "calls_within",
    "check_key",
    "classify_api_error",
    "create_inbox",
    "create_inbox_key",
    "create_pod",
    "delete_inbox_key",
    "encode_path_segment",
    "fetch_attachment",
    "find_messages_by_label",
    "http_client",
    "inbox_exists",
    "list_inbox_keys",
    "parse_error_body",
    "parse_retry_after",
    "pod_exists",
    "refuses_key",
    "register_pod_webhook",
    "reply_subject",
    "send_message",
    "update_inbox_display_name",
]
