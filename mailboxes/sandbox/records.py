"""Shapes and encodings the store and the routes share: identities, pages, time stamps, JSON,
addresses, message bodies, and the event types AgentMail emits."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .errors import ApiError

EVENT_TYPES = frozenset(
    {
        "message.received",
        "message.received.spam",
        "message.received.blocked",
        "message.received.unauthenticated",
        "message.sent",
        "message.delivered",
        "message.bounced",
        "message.complained",
        "message.rejected",
        "message.opened",
        "domain.verified",
    }
)

# Labels a key reads only with its permission, and lists only when asked (`include_<label>`):
# out of its sight a message carrying one is `404 not_found` (docs errors.mdx#not_found,
# permissions.mdx; reference §2.4, §4.2, §7.3). Mail that failed a filter carries the label of
# the event it is announced by (`message.received.unauthenticated` → `unauthenticated`,
# webhooks-events.mdx), and a webhook for that event needs the same permission.
RESTRICTED_LABELS = {
    "spam": "label_spam_read",
    "blocked": "label_blocked_read",
    "unauthenticated": "label_unauthenticated_read",
    "trash": "label_trash_read",
}
RESTRICTED_EVENT_LABELS = {
    "message.received.spam": "spam",
    "message.received.blocked": "blocked",
    "message.received.unauthenticated": "unauthenticated",
}


@dataclass(frozen=True, slots=True)
class Identity:
    api_key_id: str
    prefix: str
    scope_type: str
    pod_id: str | None
    inbox_id: str | None
    permissions: dict[str, bool] | None


@dataclass(slots=True)
class Page:
    items: list[dict]
    next_token: str | None


def iso(ts: float) -> str:
    stamp = datetime.fromtimestamp(ts, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def parse_time(value: str) -> float:
    """An ISO-8601 query bound (any offset, any precision, `Z`) as epoch seconds; 400 if not."""
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ApiError.validation(f"not an ISO-8601 date-time: {value[:40]}") from exc
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def address_of(value: str) -> str:
    """The bare, lower-cased address of `Name <user@host>` or `user@host`."""
    value = value.strip()
    if value.endswith(">") and "<" in value:
        value = value[value.rindex("<") + 1 : -1]
    return value.strip().lower()


def as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    return list(value)


def set_body(doc: dict, text: str | None, html: str | None) -> None:
    if text is not None:
        doc["preview"] = " ".join(text.split())[:200]
        doc["text"] = text
        doc["extracted_text"] = text
    if html is not None:
        doc["html"] = html
        doc["extracted_html"] = html
    doc["size"] = len((text or "").encode()) + len((html or "").encode())
