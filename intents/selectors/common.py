"""What the intents selectors share: pages, limits, ids, and the one cursor codec."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models import QuerySet

from intents.errors import InvalidInput, NotFound

DEFAULT_PAGE = 50
MAX_PAGE = 200


@dataclass
class Page:
    items: list
    next_cursor: str | None = None
    limit: int = DEFAULT_PAGE
    extra: dict = field(default_factory=dict)


def as_int(value, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise NotFound("not_found", f"No such {what}.") from None


def limit_of(limit) -> int:
    try:
        limit = int(limit)
    except (TypeError, ValueError):
        raise InvalidInput("limit_invalid", "limit must be an integer.", "limit") from None
    return max(1, min(limit, MAX_PAGE))


def encode_cursor(*parts: object) -> str:
    raw = "|".join(p.isoformat() if isinstance(p, datetime) else str(p) for p in parts)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, n: int) -> list[str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = base64.urlsafe_b64decode(padded.encode()).decode().split("|")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor") from None
    if len(parts) != n:
        raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor")
    return parts


def counts_up_to(querysets: dict[str, QuerySet], cap: int) -> dict[str, int]:
    """Each queryset's row count up to ``cap`` + 1 (a page shows "cap+" beyond it), all in one
    statement: ``SELECT (SELECT count(*) FROM (... LIMIT cap+1)), ...``. Each part stops at the
    cap, so the cost does not grow with history; an empty queryset (``.none()``) counts 0."""
    parts: list[str] = []
    params: list = []
    for i, qs in enumerate(querysets.values()):
        if qs.query.is_empty():  # nothing to compile
            parts.append("0")
            continue
        sql, part_params = qs.values("pk")[: cap + 1].query.sql_with_params()
        parts.append(f"(SELECT count(*) FROM ({sql}) AS c{i})")  # noqa: S608
        params.extend(part_params)
    with connection.cursor() as cursor:
        # Compiled by the ORM from the querysets; the input is in params.
        cursor.execute("SELECT " + ", ".join(parts), params)
        row = cursor.fetchone()
    return dict(zip(querysets, row, strict=True))
