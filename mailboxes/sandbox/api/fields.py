"""Reading and validating request fields the way AgentMail does (400 `validation_error`)."""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from typing import Any

from ..errors import ApiError
from ..records import EVENT_TYPES, address_of

IDEMPOTENCY_KEY_RE = re.compile(r"[A-Za-z0-9._~-]{1,256}")
CLIENT_ID_RE = re.compile(r"[A-Za-z0-9._~-]{1,256}")
USERNAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9._+-]{0,62}[a-z0-9])?")
DOMAIN_RE = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
ADDRESS_RE = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")


def query_list(values: list[str]) -> list[str]:
    """Repeated keys, or one JSON array: SDK 2.0.18 sends `labels=["a", "b"]` (query_encoder)."""
    out: list[str] = []
    for value in values:
        if value.startswith("["):
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = None
            if isinstance(decoded, list) and all(isinstance(v, str) for v in decoded):
                out.extend(decoded)
                continue
        out.append(value)
    return out


def opt_str(body: dict, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise ApiError.validation(f"{name} must be a string", [name])
    return value


def client_id_of(body: dict) -> str | None:
    client_id = opt_str(body, "client_id")
    if client_id is not None and not CLIENT_ID_RE.fullmatch(client_id):
        raise ApiError.validation(
            "client_id must be 1-256 characters from A-Z a-z 0-9 - . _ ~", ["client_id"]
        )
    return client_id


def addresses(body: dict, name: str) -> list[str]:
    value = body.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v.strip()]
    raise ApiError.validation(f"{name} must be a string or a list of strings", [name])


def str_list(body: dict, name: str) -> list[str]:
    value = body.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise ApiError.validation(f"{name} must be a string or a list of strings", [name])


def string_map(value: Any) -> bool:
    """Whether `value` maps names to strings (custom headers)."""
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def event_types(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ApiError.validation("event_types must be a list of strings", ["event_types"])
    unknown = [v for v in value if v not in EVENT_TYPES]
    if unknown:
        raise ApiError.validation(f"Unknown event types: {', '.join(unknown)}", ["event_types"])
    return unique(value)


# AgentMail refuses a send request larger than this (reference/agentmail-api.md §2.4).
MAX_SEND_REQUEST_BYTES = 6_000_000


def attachments(value: Any) -> list[tuple[dict, bytes]]:
    """Each attachment's Message entry and its decoded bytes; base64 `content` is required here
    (the sandbox does not fetch `url` attachments)."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ApiError.validation("attachments must be a list of objects", ["attachments"])
    out = []
    for index, item in enumerate(value):
        content = item.get("content")
        if not isinstance(content, str):
            raise ApiError.validation(
                "attachment content must be a base64 string", ["attachments", index, "content"]
            )
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError.validation(
                "attachment content is not valid base64", ["attachments", index, "content"]
            ) from None
        entry: dict[str, Any] = {"attachment_id": str(uuid.uuid4()), "size": len(data)}
        for name in ("filename", "content_type", "content_disposition", "content_id"):
            if item.get(name) is not None:
                if not isinstance(item[name], str):
                    raise ApiError.validation(
                        f"{name} must be a string", ["attachments", index, name]
                    )
                entry[name] = item[name]
        out.append((entry, data))
    return out


def unique(values: list[str]) -> list[str]:
    """`values` without repeats, comparing bare lower-cased addresses."""
    seen: set[str] = set()
    out = []
    for value in values:
        key = address_of(value)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def prefixed(prefix: str, subject: str | None) -> str:
    subject = subject or ""
    if subject.lower().startswith(prefix.lower()):
        return subject
    return prefix + subject
