"""Reading AgentMail's answers: error bodies, ``Retry-After``, the outcome of a send (the table
in DESIGN.md), and :class:`ProviderError` for the calls that raise."""

from __future__ import annotations

import email.utils
import math
import re
import time
from dataclasses import dataclass
from datetime import UTC
from enum import StrEnum
from typing import Any, TypeGuard

from agentmail.core.api_error import ApiError


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    RETRY_LATER = "retry_later"
    UNCERTAIN = "uncertain"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class ProviderErrorBody:
    name: str = ""
    code: str = ""
    message: str = ""


class ProviderError(Exception):
    """A provisioning call failed. ``code`` is AgentMail's error code or a transport label;
    ``retry_after`` the provider's ``Retry-After`` in seconds, if it sent one."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Whether the same call may succeed later: no answer or an unreadable one, a timeout, a
        conflict, a rate limit or a server error (the table in DESIGN.md); any other 4xx
        describes the request and will be refused again."""
        status = self.status
        return status is None or status < 400 or status in (408, 409, 429) or status >= 500


# AgentMail keeps an idempotency key for 24 h after a send completes, and no retry of ours comes
# later than that (DESIGN.md, contract 2): a longer wait means the same as this one. Clamping keeps
# every delay a datetime can hold, whatever the header says ("1e18", "inf", a date in year 9999).
MAX_RETRY_AFTER_SECONDS = 24 * 3600.0


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds or an HTTP date, between 0 and ``MAX_RETRY_AFTER_SECONDS``;
    None when absent or unreadable (not a number, or not a finite one)."""
    if not value:
        return None
    value = value.strip()
    seconds: float | None
    try:
        seconds = float(value)
    except ValueError:
        seconds = _seconds_until_http_date(value, now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER_SECONDS)


def _seconds_until_http_date(value: str, now: float | None) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else time.time()
    return when.timestamp() - current


# An id we record must fit its column (a message id is one header line, RFC 5322 §2.1.1) and be
# text PostgreSQL can store: an id with a NUL, another control character or an unpaired surrogate
# made the insert raise, and the worker's round with it, on every replay of the same answer.
MESSAGE_ID_MAX_LENGTH = 998
THREAD_ID_MAX_LENGTH = 255
# A message id is bounded in UTF-8 bytes too, as the webhook ledger stores it whole
# (webhooks.models.MESSAGE_ID_BYTES is this figure).
# An id of 998 characters or fewer but more bytes was recorded as it came while its delivery
# events were stored cut (normalize.bounded_id), so none of them ever found the send; past about
# 2,700 bytes it did not fit an index entry, and recording it raised on every round.
MESSAGE_ID_MAX_BYTES = 998


def usable_id(
    value: Any,
    *,
    max_length: int = MESSAGE_ID_MAX_LENGTH,
    max_bytes: int | None = MESSAGE_ID_MAX_BYTES,
) -> TypeGuard[str]:
    """Whether a provider's message or thread id is one we can record as it is."""
    return unusable_id_reason(value, max_length=max_length, max_bytes=max_bytes) == ""


def unusable_id_reason(
    value: Any,
    *,
    max_length: int = MESSAGE_ID_MAX_LENGTH,
    max_bytes: int | None = MESSAGE_ID_MAX_BYTES,
) -> str:
    """Why a provider's id cannot be recorded as it is (for the attempt's record), or ""."""
    if not isinstance(value, str) or not value:
        return "it is missing or not text"
    if len(value) > max_length:
        return f"it is {len(value)} characters, more than {max_length}"
    if any(ch < " " or ch == "\x7f" for ch in value):
        return "it holds a control character"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "it holds an unpaired surrogate"
    if max_bytes is not None and size > max_bytes:
        return (
            f"it is {size} bytes in UTF-8, more than the {max_bytes} a message id is recorded with"
        )
    return ""


# An AgentMail key (``am_`` and 64 hex digits; any ``am_`` word is taken for one) and whatever an
# Authorization header carried. An answer may quote the key it was called with (a gateway's
# "invalid API key am_…", an error page that echoes the request's headers), and its words are
# shown: a provisioning refusal to a tenant admin (the organization key is every tenant's), a
# send's last error to every reviewer of the tenant, the operators' command output.
_KEY_QUOTED = re.compile(r"\bam_[A-Za-z0-9_-]+|(?i:\bbearer)\s+[^\s'\",;]+")


def _unkeyed(text: str) -> str:
    return _KEY_QUOTED.sub(
        lambda m: "am_[hidden]" if m[0][:3] == "am_" else "Bearer [hidden]", text
    )


def parse_error_body(body: Any) -> ProviderErrorBody:
    """AgentMail errors are ``{name, code, message, ...}``; the SDK hands them over as a pydantic
    object, a dict, or a plain string (non-JSON gateway pages). A key quoted in them is hidden,
    before the message is cut (a key cut in two would still show most of itself)."""
    if body is None:
        return ProviderErrorBody()
    if isinstance(body, str):
        return ProviderErrorBody(message=_unkeyed(body)[:300])
    if hasattr(body, "model_dump"):
        body = body.model_dump()
    if isinstance(body, dict):
        return ProviderErrorBody(
            name=_unkeyed(str(body.get("name") or "")),
            code=_unkeyed(str(body.get("code") or "")),
            message=_unkeyed(str(body.get("message") or ""))[:300],
        )
    return ProviderErrorBody(message=_unkeyed(str(body))[:300])


def header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in dict(headers).items():
        if key.lower() == name:
            return value
    return None


def classify_api_error(
    status: int, body: ProviderErrorBody, headers: Any
) -> tuple[Outcome, float | None]:
    if status == 429:
        return Outcome.RETRY_LATER, parse_retry_after(header(headers, "retry-after"))
    if status >= 500:
        # The request may have been processed before the server failed. A 503's Retry-After
        # says when the service expects to be back (RFC 9110 §10.2.3): the replay waits for it
        # rather than spending its attempts on a service that said it is away.
        retry_after = parse_retry_after(header(headers, "retry-after")) if status == 503 else None
        return Outcome.UNCERTAIN, retry_after
    if status == 409:
        # "in progress" may complete; "key already used for a different message" never will.
        text = f"{body.code} {body.message}".lower()
        if "different" in text or "already used" in text:
            return Outcome.PERMANENT, None
        return Outcome.UNCERTAIN, None
    if status == 408:
        return Outcome.UNCERTAIN, None
    if status < 300:
        # A success whose body could not be read (a gateway's "OK" page, a cut body): the SDK
        # raises ApiError with the 2xx status (or none). AgentMail may well have processed the
        # send, so it is replayed with the same key, never failed (a failed send can be sent
        # again by a person: an outside probe counted two sends this way).
        return Outcome.UNCERTAIN, None
    return Outcome.PERMANENT, None


# 403 codes that say the key may not do this (reference/agentmail-api.md §4.2); other 403s
# (``message_rejected``, ``already_exists``...) describe the request.
_KEY_REFUSED_403 = frozenset({"", "forbidden", "missing_permission", "unrestricted_key_required"})


def refuses_key(status: int | None, code: str, message: str = "") -> bool:
    """Whether an answer refuses the key itself, not one request: any 401 (revoked, deleted,
    unknown key), a 403 about the key's rights (or the gateway's bare 403, "almost always a bad
    key": reference §1), or a 404 naming the inbox (deleted, or outside the key's scope: AgentMail
    answers both alike). Every other call with that key will be refused the same way. A 404 for
    a message (a reply to one that is gone) is the request's, not the key's."""
    if code.startswith("http_"):
        code = ""  # no code in the body: the adapter's label for the status alone
    if status == 401:
        return True
    if status == 403:
        return code in _KEY_REFUSED_403
    if status == 404:
        return code in ("", "not_found") and message.lower().startswith("inbox")
    return False


def provider_error(exc: ApiError) -> ProviderError:
    body = parse_error_body(exc.body)
    detail = body.message or body.name or "error"
    return ProviderError(
        f"AgentMail answered {exc.status_code} {body.code or ''}: {detail}".replace("  ", " "),
        status=exc.status_code,
        code=body.code,
        retry_after=parse_retry_after(header(exc.headers, "retry-after")),
    )
