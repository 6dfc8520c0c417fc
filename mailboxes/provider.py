"""The one module that talks HTTP to AgentMail.

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
"""

from __future__ import annotations

import email.utils
import http.cookiejar
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import quote

import httpx
from agentmail import AgentMail, AgentMailEnvironment
from agentmail.core.api_error import ApiError
from django.conf import settings

from config.perprocess import PerProcess, PerThread

logger = logging.getLogger("mailboxes.provider")

NO_RETRIES: dict[str, Any] = {"max_retries": 0}
# Least privilege for the key a mailbox sends with (reference/agentmail-api.md §2.7 and §7.3).
INBOX_KEY_PERMISSIONS = {
    "message_send": True,
    "message_read": True,
    "label_spam_read": False,
    "label_blocked_read": False,
    "label_unauthenticated_read": False,
    "label_trash_read": False,
}
REPLY_PREFIX = "Re: "
WEBHOOK_EVENT_TYPES = [
    "message.sent",
    "message.delivered",
    "message.bounced",
    "message.complained",
    "message.rejected",
    "message.received",
]


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    RETRY_LATER = "retry_later"
    UNCERTAIN = "uncertain"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class SendRequest:
    inbox_id: str
    to: list[str]
    cc: list[str]
    bcc: list[str]
    subject: str
    text: str
    html: str
    labels: list[str]
    idempotency_key: str
    reply_to_message_id: str = ""


@dataclass(frozen=True)
class SendResult:
    outcome: Outcome
    message_id: str = ""
    thread_id: str = ""
    http_status: int | None = None
    error_code: str = ""
    error_message: str = ""
    retry_after: float | None = None
    latency_ms: int = 0
    suppress_recipients: bool = False


@dataclass(frozen=True)
class LookupResult:
    ok: bool
    message_ids: list[str] = field(default_factory=list)
    error_code: str = ""
    http_status: int | None = None
    # How the answer was reached: "label_filter" (the labelled query) or "inbox_scan" (listing
    # the inbox since the first attempt), with the pages and messages read.
    method: str = ""
    pages: int = 0
    scanned: int = 0


@dataclass(frozen=True)
class ProviderErrorBody:
    name: str = ""
    code: str = ""
    message: str = ""


class ProviderError(Exception):
    """A provisioning call failed. ``code`` is AgentMail's error code or a transport label."""

    def __init__(self, message: str, *, status: int | None = None, code: str = ""):
        super().__init__(message)
        self.status = status
        self.code = code


# --- HTTP plumbing -------------------------------------------------------------------------------


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    def set_ok(self, cookie, request):  # a shared pool must not carry state between tenants
        return False


def _timeouts() -> httpx.Timeout:
    return httpx.Timeout(
        connect=settings.AGENTMAIL_CONNECT_TIMEOUT,
        read=settings.AGENTMAIL_READ_TIMEOUT,
        write=settings.AGENTMAIL_READ_TIMEOUT,
        pool=settings.AGENTMAIL_POOL_TIMEOUT,
    )


def _enforce_timeouts(request: httpx.Request) -> None:
    # The SDK passes one float as every request's timeout, which would flatten our connect/read/
    # pool split (reference/agentmail-api.md §6); put the granular values back on the request.
    request.extensions["timeout"] = _timeouts().as_dict()


# Building a TLS context reads the CA bundle (about 15 ms); one per process serves every client.
_tls_context = PerProcess(httpx.create_ssl_context)


def _new_http_client() -> httpx.Client:
    return httpx.Client(
        timeout=_timeouts(),
        verify=_tls_context.get(),
        # A sync client runs one request at a time on its thread: one kept-alive connection is
        # used, a second covers a server closing the first.
        limits=httpx.Limits(max_connections=4, max_keepalive_connections=2),
        cookies=http.cookiejar.CookieJar(policy=_NoCookies()),
        event_hooks={"request": [_enforce_timeouts]},
        follow_redirects=False,
    )


_http_clients = PerThread(_new_http_client)


def http_client() -> httpx.Client:
    """The calling thread's client, with its own kept-alive connection.

    One client per thread rather than one shared pool: the worker's call threads send
    concurrently, and a shared httpcore pool serialises them on its lock and probes every idle
    connection (a poll() each) on every request; measured, 7 % of the client CPU per send with
    8 threads. Worker processes fork, and a client must not cross a fork: ``PerThread`` rebuilds
    in a child."""
    return _http_clients.get()


def _sdk(api_key: str) -> AgentMail:
    base = settings.AGENTMAIL_BASE_URL.rstrip("/")
    ws = base.replace("https://", "wss://").replace("http://", "ws://")
    return AgentMail(
        api_key=api_key,
        environment=AgentMailEnvironment(http=base, websockets=ws),
        httpx_client=http_client(),
        timeout=settings.AGENTMAIL_READ_TIMEOUT,
    )


def encode_message_id(message_id: str) -> str:
    """Message ids carry ``<``/``>`` and may carry ``/?#``; httpx leaves the last three alone,
    which would break the path. Pre-encode them; httpx keeps existing %XX escapes."""
    return quote(message_id, safe="@")


def reply_subject(subject: str) -> str:
    """The subject AgentMail gives a reply to a message with this subject.

    The reply route takes no subject: it prefixes the answered message's subject with "Re: "
    (reference/agentmail-api.md §2.4), unless it already carries that prefix in any case. A draft
    stores and hashes this, so the subject a person approves is the one that goes out.
    """
    subject = subject or ""
    if subject.lower().startswith(REPLY_PREFIX.lower()):
        return subject
    return REPLY_PREFIX + subject


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else time.time()
    return max(0.0, when.timestamp() - current)


def parse_error_body(body: Any) -> ProviderErrorBody:
    """AgentMail errors are ``{name, code, message, ...}``; the SDK hands them over as a pydantic
    object, a dict, or a plain string (non-JSON gateway pages)."""
    if body is None:
        return ProviderErrorBody()
    if isinstance(body, str):
        return ProviderErrorBody(message=body[:300])
    if hasattr(body, "model_dump"):
        body = body.model_dump()
    if isinstance(body, dict):
        return ProviderErrorBody(
            name=str(body.get("name") or ""),
            code=str(body.get("code") or ""),
            message=str(body.get("message") or "")[:300],
        )
    return ProviderErrorBody(message=str(body)[:300])


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in dict(headers).items():
        if key.lower() == name:
            return value
    return None


# --- Sending ---------------------------------------------------------------------------------------


def classify_api_error(
    status: int, body: ProviderErrorBody, headers: Any
) -> tuple[Outcome, float | None]:
    if status == 429:
        return Outcome.RETRY_LATER, parse_retry_after(_header(headers, "retry-after"))
    if status >= 500:
        # The request may have been processed before the server failed.
        return Outcome.UNCERTAIN, None
    if status == 409:
        # "in progress" may complete; "key already used for a different message" never will.
        text = f"{body.code} {body.message}".lower()
        if "different" in text or "already used" in text:
            return Outcome.PERMANENT, None
        return Outcome.UNCERTAIN, None
    if status == 408:
        return Outcome.UNCERTAIN, None
    return Outcome.PERMANENT, None


def send_message(*, api_key: str, request: SendRequest) -> SendResult:
    """Send (or reply) once, with the caller's idempotency key. Never raises for provider faults."""
    client = _sdk(api_key)
    payload: dict[str, Any] = {
        "to": request.to,
        "labels": request.labels,
        "text": request.text or None,
        "html": request.html or None,
    }
    if request.cc:
        payload["cc"] = request.cc
    if request.bcc:
        payload["bcc"] = request.bcc
    payload = {k: v for k, v in payload.items() if v is not None}
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        if request.reply_to_message_id:
            response = client.inboxes.messages.reply(
                request.inbox_id,
                encode_message_id(request.reply_to_message_id),
                idempotency_key=request.idempotency_key,
                request_options=NO_RETRIES,
                **payload,
            )
        else:
            response = client.inboxes.messages.send(
                request.inbox_id,
                subject=request.subject,
                idempotency_key=request.idempotency_key,
                request_options=NO_RETRIES,
                **payload,
            )
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        # Nothing reached the provider: safe to retry later.
        return SendResult(
            Outcome.RETRY_LATER,
            error_code=type(exc).__name__,
            error_message=str(exc)[:300],
            latency_ms=elapsed(),
        )
    except httpx.TransportError as exc:
        # Read timeout, reset or disconnect after the request was written: it may have been sent.
        return SendResult(
            Outcome.UNCERTAIN,
            error_code=type(exc).__name__,
            error_message=str(exc)[:300],
            latency_ms=elapsed(),
        )
    except ApiError as exc:
        status = exc.status_code or 0
        body = parse_error_body(exc.body)
        outcome, retry_after = classify_api_error(status, body, exc.headers)
        return SendResult(
            outcome,
            http_status=status,
            error_code=body.code or body.name or f"http_{status}",
            error_message=body.message,
            retry_after=retry_after,
            latency_ms=elapsed(),
            suppress_recipients=status == 403 and body.code == "message_rejected",
        )
    except Exception as exc:  # the SDK failed to parse a 2xx body, for instance
        logger.warning("mailboxes.provider.unexpected", extra={"error": type(exc).__name__})
        return SendResult(
            Outcome.UNCERTAIN,
            error_code=type(exc).__name__,
            error_message=str(exc)[:300],
            latency_ms=elapsed(),
        )

    message_id = getattr(response, "message_id", None)
    thread_id = getattr(response, "thread_id", None)
    if not isinstance(message_id, str) or not message_id:
        return SendResult(
            Outcome.UNCERTAIN,
            http_status=200,
            error_code="malformed_response",
            error_message="2xx without message_id",
            latency_ms=elapsed(),
        )
    return SendResult(
        Outcome.ACCEPTED,
        message_id=message_id,
        thread_id=thread_id if isinstance(thread_id, str) else "",
        http_status=200,
        latency_ms=elapsed(),
    )


# Our clock and the provider's may disagree; a wider time range only costs a few more messages.
LOOKUP_CLOCK_MARGIN = timedelta(minutes=15)


def find_messages_by_label(
    *, api_key: str, inbox_id: str, label: str, sent_after: datetime | None = None
) -> LookupResult:
    """Messages of an inbox carrying ``label``: the proof that a send did go out.

    The SDK sends a list of labels as one JSON-encoded value (``labels=["cs-intent-7"]``,
    agentmail.core.query_encoder), while the API reference documents repeated keys; a provider
    that read only one form, or none, would answer nothing or everything, silently. So
    no message counts unless it carries the label itself, and when the labelled query finds
    none, the inbox's messages since ``sent_after`` (the first attempt) are listed, oldest first,
    and matched here, bounded by AGENTMAIL_LOOKUP_SCAN_PAGES and AGENTMAIL_LOOKUP_SCAN_SECONDS.
    A scan cut short by those bounds proves nothing: it is a failed lookup (``scan_incomplete``).
    """
    client = _sdk(api_key)
    page_size = max(1, min(100, int(settings.AGENTMAIL_LOOKUP_PAGE_SIZE)))
    try:
        response = client.inboxes.messages.list(
            inbox_id, labels=[label], limit=page_size, request_options=NO_RETRIES
        )
        items = _listed(response)
        ids = _carrying(items, inbox_id=inbox_id, label=label)
        if len(ids) < len(items):
            logger.warning(
                "mailboxes.provider.label_filter_ignored",
                extra={"inbox_id": inbox_id, "label": label, "returned": len(items)},
            )
        if ids:
            result = LookupResult(
                ok=True,
                message_ids=ids,
                http_status=200,
                method="label_filter",
                pages=1,
                scanned=len(items),
            )
        else:
            result = _scan_since(
                client, inbox_id=inbox_id, label=label, sent_after=sent_after, page_size=page_size
            )
    except httpx.TransportError as exc:
        result = LookupResult(ok=False, error_code=type(exc).__name__)
    except ApiError as exc:
        body = parse_error_body(exc.body)
        result = LookupResult(
            ok=False, error_code=body.code or f"http_{exc.status_code}", http_status=exc.status_code
        )
    except Exception as exc:  # the SDK failed to parse a 2xx body, for instance
        logger.warning("mailboxes.provider.unexpected", extra={"error": type(exc).__name__})
        result = LookupResult(ok=False, error_code=type(exc).__name__)
    logger.info(
        "mailboxes.provider.label_lookup",
        extra={
            "inbox_id": inbox_id,
            "label": label,
            "method": result.method,
            "ok": result.ok,
            "found": len(result.message_ids),
            "pages": result.pages,
            "scanned": result.scanned,
            "error_code": result.error_code,
        },
    )
    return result


def _scan_since(
    client: AgentMail, *, inbox_id: str, label: str, sent_after: datetime | None, page_size: int
) -> LookupResult:
    """List the inbox's messages since ``sent_after``, oldest first (a send lands after its first
    attempt), page by page within the bounds, until one carries ``label``."""
    after = sent_after - LOOKUP_CLOCK_MARGIN if sent_after is not None else None
    deadline = time.monotonic() + settings.AGENTMAIL_LOOKUP_SCAN_SECONDS
    token: str | None = None
    pages = scanned = 0
    while pages < settings.AGENTMAIL_LOOKUP_SCAN_PAGES:
        response = client.inboxes.messages.list(
            inbox_id,
            after=after,
            ascending=True,
            limit=page_size,
            page_token=token,
            request_options=NO_RETRIES,
        )
        items = _listed(response)
        pages += 1
        scanned += len(items)
        ids = _carrying(items, inbox_id=inbox_id, label=label)
        if ids:
            return LookupResult(
                ok=True,
                message_ids=ids,
                http_status=200,
                method="inbox_scan",
                pages=pages,
                scanned=scanned,
            )
        token = getattr(response, "next_page_token", None)
        if not isinstance(token, str) or not token:
            return LookupResult(
                ok=True, http_status=200, method="inbox_scan", pages=pages, scanned=scanned
            )
        if time.monotonic() >= deadline:
            break
    return LookupResult(
        ok=False,
        error_code="scan_incomplete",
        http_status=200,
        method="inbox_scan",
        pages=pages,
        scanned=scanned,
    )


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _listed(response: Any) -> list[Any]:
    messages = getattr(response, "messages", None)
    return list(messages) if isinstance(messages, list) else []


def _carrying(items: list[Any], *, inbox_id: str, label: str) -> list[str]:
    """Ids of the listed messages of ``inbox_id`` that carry ``label`` themselves."""
    wanted = label.casefold()
    ids = []
    for item in items:
        message_id = _field(item, "message_id")
        labels = _field(item, "labels")
        owner = _field(item, "inbox_id")
        if not isinstance(message_id, str) or not message_id or not isinstance(labels, list):
            continue
        if not isinstance(owner, str) or owner.casefold() != inbox_id.casefold():
            continue
        if any(isinstance(x, str) and x.casefold() == wanted for x in labels):
            ids.append(message_id)
    return ids


def get_message(*, api_key: str, inbox_id: str, message_id: str) -> dict[str, Any] | None:
    try:
        message = _sdk(api_key).inboxes.messages.get(
            inbox_id, encode_message_id(message_id), request_options=NO_RETRIES
        )
    except ApiError as exc:
        if exc.status_code == 404:
            return None
        raise _provider_error(exc) from None
    except httpx.TransportError as exc:
        raise ProviderError(
            f"AgentMail unreachable: {type(exc).__name__}", code="transport"
        ) from None
    return message.model_dump(by_alias=True)


# --- Provisioning (organisation key only) -----------------------------------------------------------


@dataclass(frozen=True)
class CreatedKey:
    api_key_id: str
    api_key: str


@dataclass(frozen=True)
class Webhook:
    webhook_id: str
    secret: str
    url: str


def _provider_error(exc: ApiError) -> ProviderError:
    body = parse_error_body(exc.body)
    detail = body.message or body.name or "error"
    return ProviderError(
        f"AgentMail answered {exc.status_code} {body.code or ''}: {detail}".replace("  ", " "),
        status=exc.status_code,
        code=body.code,
    )


def _org_call(fn: Callable[[AgentMail], Any]) -> Any:
    try:
        return fn(_sdk(settings.AGENTMAIL_ORG_API_KEY))
    except ApiError as exc:
        raise _provider_error(exc) from None
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


def create_inbox(
    *, pod_id: str, username: str, domain: str, display_name: str, client_id: str
) -> str:
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
    return inbox.inbox_id


def list_inbox_keys(*, inbox_id: str) -> list[tuple[str, str]]:
    """(api_key_id, name) of every key scoped to the inbox."""
    response = _org_call(lambda c: c.inboxes.api_keys.list(inbox_id, request_options=NO_RETRIES))
    keys = getattr(response, "api_keys", None) or []
    return [(k.api_key_id, k.name or "") for k in keys]


def delete_inbox_key(*, inbox_id: str, api_key_id: str) -> None:
    _org_call(lambda c: c.inboxes.api_keys.delete(inbox_id, api_key_id, request_options=NO_RETRIES))


def create_inbox_key(*, inbox_id: str, name: str) -> CreatedKey:
    from agentmail.api_keys.types import CreateBearerApiKeyRequest

    request = CreateBearerApiKeyRequest(name=name, permissions=INBOX_KEY_PERMISSIONS)
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
