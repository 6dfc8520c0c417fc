"""Sending: one send or reply with the caller's idempotency key, its outcome classified. Never
raises for provider or network faults."""

from __future__ import annotations

import base64
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx
from agentmail import AgentMail
from agentmail.core.api_error import ApiError

from .client import NO_RETRIES, encode_path_segment, sdk
from .responses import (
    THREAD_ID_MAX_LENGTH,
    Outcome,
    classify_api_error,
    parse_error_body,
    unusable_id_reason,
    usable_id,
)

logger = logging.getLogger("mailboxes.provider")

REPLY_PREFIX = "Re: "


@dataclass(frozen=True)
class OutgoingAttachment:
    """One file of a send, as approved: its bytes travel base64-encoded in the request."""

    filename: str
    content_type: str
    content: bytes

    def payload(self) -> dict[str, str]:
        # The send routes' `attachments` items (reference/agentmail-api.md §2.4): base64 content,
        # filename, content_type; "attachment" so that no client renders a file inline.
        return {
            "filename": self.filename,
            "content_type": self.content_type,
            "content_disposition": "attachment",
            "content": base64.b64encode(self.content).decode("ascii"),
        }


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
    attachments: tuple[OutgoingAttachment, ...] = ()


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


def send_message(*, api_key: str, request: SendRequest) -> SendResult:
    """Send (or reply) once, with the caller's idempotency key. Never raises for provider faults."""
    client = sdk(api_key)
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
    if request.attachments:
        payload["attachments"] = [a.payload() for a in request.attachments]
    payload = {k: v for k, v in payload.items() if v is not None}
    started = time.monotonic()
    try:
        response = _call(client, request, payload)
    except Exception as exc:
        return _failed(exc, started)
    return _answered(response, started)


def _call(client: AgentMail, request: SendRequest, payload: dict[str, Any]) -> Any:
    if request.reply_to_message_id:
        return client.inboxes.messages.reply(
            request.inbox_id,
            encode_path_segment(request.reply_to_message_id),
            idempotency_key=request.idempotency_key,
            request_options=NO_RETRIES,
            **payload,
        )
    return client.inboxes.messages.send(
        request.inbox_id,
        subject=request.subject,
        idempotency_key=request.idempotency_key,
        request_options=NO_RETRIES,
        **payload,
    )


def _elapsed(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _failed(exc: Exception, started: float) -> SendResult:
    """The outcome of a call that raised: what the provider may or may not have done."""
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        # Nothing reached the provider: safe to retry later.
        outcome = Outcome.RETRY_LATER
    elif isinstance(exc, httpx.TransportError):
        # Read timeout, reset or disconnect after the request was written: it may have been sent.
        outcome = Outcome.UNCERTAIN
    elif isinstance(exc, ApiError):
        status = exc.status_code or 0
        body = parse_error_body(exc.body)
        outcome, retry_after = classify_api_error(status, body, exc.headers)
        return SendResult(
            outcome,
            http_status=status,
            error_code=body.code or body.name or f"http_{status}",
            error_message=body.message,
            retry_after=retry_after,
            latency_ms=_elapsed(started),
            suppress_recipients=status == 403 and body.code == "message_rejected",
        )
    else:  # the SDK failed to parse a 2xx body, for instance
        logger.warning("mailboxes.provider.unexpected", extra={"error": type(exc).__name__})
        outcome = Outcome.UNCERTAIN
    return SendResult(
        outcome,
        error_code=type(exc).__name__,
        error_message=_detail(exc),
        latency_ms=_elapsed(started),
    )


def _detail(exc: Exception) -> str:
    """The text an attempt records of an exception, which every reviewer of the tenant reads. A
    ``LocalProtocolError`` is our own request refused by the HTTP library before it left (a key
    with a stray newline or space, say): its text quotes the offending header value, and the
    ``Authorization`` header is ``Bearer`` and the mailbox's key."""
    if isinstance(exc, httpx.LocalProtocolError):
        return "the request could not be written: a header or the body is malformed"
    return str(exc)[:300]


def _answered(response: Any, started: float) -> SendResult:
    """A 2xx is a success only with a message id we can record (the SDK does not validate
    responses). A thread id we could not record is left out: the message id is the proof."""
    message_id = getattr(response, "message_id", None)
    thread_id = getattr(response, "thread_id", None)
    if not usable_id(message_id):
        why = unusable_id_reason(message_id)
        return SendResult(
            Outcome.UNCERTAIN,
            http_status=200,
            error_code="malformed_response",
            error_message=(
                "2xx without message_id"
                if not message_id
                else f"2xx with a message_id that cannot be recorded: {why}"
            ),
            latency_ms=_elapsed(started),
        )
    # A thread id is bounded in characters only: the ledger keeps 255 of them whatever their bytes.
    return SendResult(
        Outcome.ACCEPTED,
        message_id=message_id,
        thread_id=(
            thread_id
            if usable_id(thread_id, max_length=THREAD_ID_MAX_LENGTH, max_bytes=None)
            else ""
        ),
        http_status=200,
        latency_ms=_elapsed(started),
    )
