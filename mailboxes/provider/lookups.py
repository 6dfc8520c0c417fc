"""Lookups: the messages of an inbox that carry a label, the proof that a send went out."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
from agentmail import AgentMail
from agentmail.core.api_error import ApiError
from django.conf import settings

from .client import NO_RETRIES, encode_path_segment, sdk
from .responses import parse_error_body, usable_id

logger = logging.getLogger("mailboxes.provider")

# Our clock and the provider's may disagree; a wider time range only costs a few more messages.
LOOKUP_CLOCK_MARGIN = timedelta(minutes=15)


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
    client = sdk(api_key)
    try:
        result = _lookup(client, inbox_id=inbox_id, label=label, sent_after=sent_after)
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


def _lookup(
    client: AgentMail, *, inbox_id: str, label: str, sent_after: datetime | None
) -> LookupResult:
    """The labelled query, then the scan since ``sent_after`` when it finds nothing."""
    page_size = max(1, min(100, int(settings.AGENTMAIL_LOOKUP_PAGE_SIZE)))
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
        return LookupResult(
            ok=True,
            message_ids=ids,
            http_status=200,
            method="label_filter",
            pages=1,
            scanned=len(items),
        )
    return _scan_since(
        client, inbox_id=inbox_id, label=label, sent_after=sent_after, page_size=page_size
    )


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
        if not usable_id(message_id) or not isinstance(labels, list):
            continue
        if not isinstance(owner, str) or owner.casefold() != inbox_id.casefold():
            continue
        if any(isinstance(x, str) and x.casefold() == wanted for x in labels):
            ids.append(message_id)
    return ids


# The fields of a message the webhook backfill needs (reference §2.4); bodies are never kept.
_BACKFILL_FIELDS = (
    "inbox_id",
    "thread_id",
    "message_id",
    "labels",
    "timestamp",
    "from",
    "to",
    "cc",
    "bcc",
    "subject",
    "preview",
    "in_reply_to",
)


@dataclass(frozen=True)
class MessagesResult:
    """Messages as plain dicts of ``_BACKFILL_FIELDS`` (the wire names: ``from``, not ``from_``)."""

    ok: bool
    messages: list[dict] = field(default_factory=list)
    error_code: str = ""
    http_status: int | None = None
    next_page_token: str = ""


def get_message(*, api_key: str, inbox_id: str, message_id: str) -> MessagesResult:
    """One message of an inbox (``GET /inboxes/{inbox_id}/messages/{message_id}``): its labels say
    how far delivery got (``sent``, then ``delivered``, ``bounced``, ...). Not found is ``ok`` with
    no message."""
    client = sdk(api_key)

    def call() -> MessagesResult:
        response = client.inboxes.messages.get(
            inbox_id, encode_path_segment(message_id), request_options=NO_RETRIES
        )
        return MessagesResult(ok=True, messages=[_plain(response)], http_status=200)

    return _guarded(call, op="message_get", inbox_id=inbox_id, not_found_ok=True)


def list_messages_since(
    *,
    api_key: str,
    inbox_id: str,
    after: datetime,
    limit: int,
    page_token: str | None = None,
) -> MessagesResult:
    """One page of an inbox's messages since ``after``, oldest first; ``next_page_token`` when
    the provider has another page. ``after`` is as the caller gives it: a caller reading our
    clock takes ``LOOKUP_CLOCK_MARGIN`` off first (the messages' times are AgentMail's)."""
    client = sdk(api_key)

    def call() -> MessagesResult:
        response = client.inboxes.messages.list(
            inbox_id,
            after=after,
            ascending=True,
            limit=max(1, min(100, limit)),
            page_token=page_token,
            request_options=NO_RETRIES,
        )
        token = getattr(response, "next_page_token", None)
        return MessagesResult(
            ok=True,
            messages=[_plain(item) for item in _listed(response)],
            http_status=200,
            next_page_token=token if isinstance(token, str) else "",
        )

    return _guarded(call, op="message_list", inbox_id=inbox_id)


def check_key(*, api_key: str, inbox_id: str) -> MessagesResult:
    """One harmless read with a mailbox's key (the newest message of its inbox): whether
    AgentMail accepts the key for that inbox now. Sends nothing, changes nothing."""
    client = sdk(api_key)

    def call() -> MessagesResult:
        response = client.inboxes.messages.list(inbox_id, limit=1, request_options=NO_RETRIES)
        return MessagesResult(ok=True, messages=[_plain(i) for i in _listed(response)])

    return _guarded(call, op="key_check", inbox_id=inbox_id)


def _guarded(call, *, op: str, inbox_id: str, not_found_ok: bool = False) -> MessagesResult:
    try:
        result = call()
    except httpx.TransportError as exc:
        result = MessagesResult(ok=False, error_code=type(exc).__name__)
    except ApiError as exc:
        body = parse_error_body(exc.body)
        if not_found_ok and exc.status_code == 404:
            result = MessagesResult(ok=True, http_status=404)
        else:
            result = MessagesResult(
                ok=False,
                error_code=body.code or f"http_{exc.status_code}",
                http_status=exc.status_code,
            )
    except Exception as exc:  # the SDK failed to parse a 2xx body, for instance
        logger.warning("mailboxes.provider.unexpected", extra={"error": type(exc).__name__})
        result = MessagesResult(ok=False, error_code=type(exc).__name__)
    logger.info(
        f"mailboxes.provider.{op}",
        extra={
            "inbox_id": inbox_id,
            "ok": result.ok,
            "found": len(result.messages),
            "error_code": result.error_code,
        },
    )
    return result


def _plain(item: Any) -> dict:
    out: dict[str, Any] = {}
    for name in _BACKFILL_FIELDS:
        value = _field(item, "from_" if name == "from" and not isinstance(item, dict) else name)
        if isinstance(value, datetime):
            value = value.isoformat()
        if value is not None:
            out[name] = value
    return out
