"""What every resource of the store shares: the SQLite connection and its lock, the sandbox
clock, the config, and keyset paging.

One connection guarded by one lock: the sandbox is a single process, SQLite serialises writers
anyway, and a single lock makes the idempotency transitions atomic without relying on SQLite's
busy handling.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import ApiError
from ..records import Page, dumps, iso
from .schema import SCHEMA

DEFAULT_CONFIG: dict[str, Any] = {
    "auto_deliver": True,
    "auto_deliver_delay": 0.05,
    "latency_ms": 0,
    # Svix retries immediately, then 5 s, 5 min, 30 min, 2 h ...; compressed so tests stay fast.
    "webhook_retry_schedule": [0.05, 0.25, 1.0, 2.0, 5.0],
    "webhook_timeout": 15.0,
    "webhook_disable_after": 15,
    "failed_key_window": 2.0,
    "idempotency_ttl": 86400.0,
    # How the list-messages route reads its `labels` filter: "both" (repeated keys or one JSON
    # array), "repeated" (repeated keys only: a JSON array is one literal label) or "ignored"
    # (no label filter at all). Real AgentMail's reading is not documented (reference §2.2);
    # the last two let tests meet a provider that does not understand what the SDK sends.
    "labels_query": "both",
    # False: webhook deliveries wait (queued, not attempted) until it is true again, as during
    # an outage of the receiver that Svix outlasts; tests of the webhook backfill switch it off.
    "webhooks_enabled": True,
}
LABELS_QUERY_MODES = ("both", "repeated", "ignored")


def encode_token(seq: int) -> str:
    return base64.urlsafe_b64encode(f"seq:{seq}".encode()).decode().rstrip("=")


def decode_token(token: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        if not raw.startswith("seq:"):
            raise ValueError(raw)
        return int(raw[4:])
    except ValueError as exc:
        raise ApiError.validation("Invalid page_token", ["page_token"]) from exc


class Core:
    def __init__(self, path: str, on_enqueue: Callable[[], None] | None = None):
        self.path = path
        self.lock = threading.RLock()
        self.on_enqueue = on_enqueue or (lambda: None)
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.executescript(SCHEMA)
        with self.lock:
            self.clock_offset = float(self.meta("clock_offset") or 0.0)
            self.config = {**DEFAULT_CONFIG, **json.loads(self.meta("config") or "{}")}

    def close(self) -> None:
        with self.lock:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.close()

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def tx(self) -> Transaction:
        return Transaction(self)

    def deleted_with_client_id(self, kind: str, client_id: str) -> tuple[str] | None:
        """The document of a deleted pod or inbox created with ``client_id`` (a one-column row,
        as the live tables' lookups answer), inside the caller's lock. A create that repeats it
        is answered with that object, gone as it is: whether AgentMail frees a deleted
        object's client_id is unknown (reference/agentmail-api.md §3.1), and the sandbox plays
        the answer that hurts a client which reuses one."""
        return self.db.execute(
            "SELECT doc FROM deleted_objects WHERE kind=? AND client_id=?", (kind, client_id)
        ).fetchone()

    # -- clock and config -------------------------------------------------------------------

    def now(self) -> float:
        """The sandbox clock: wall time plus the offset tests set through the control API."""
        return time.time() + self.clock_offset

    def advance_clock(self, seconds: float) -> dict:
        with self.lock:
            self.clock_offset += seconds
            self.set_meta("clock_offset", repr(self.clock_offset))
        return self.clock_info()

    def set_clock_offset(self, offset: float) -> dict:
        with self.lock:
            self.clock_offset = offset
            self.set_meta("clock_offset", repr(self.clock_offset))
        return self.clock_info()

    def clock_info(self) -> dict:
        now = self.now()
        return {"now": iso(now), "epoch": now, "offset_seconds": self.clock_offset}

    def update_config(self, changes: dict) -> dict:
        unknown = sorted(set(changes) - set(DEFAULT_CONFIG))
        if unknown:
            raise ApiError.validation(f"Unknown config keys: {', '.join(unknown)}", unknown)
        if "labels_query" in changes and changes["labels_query"] not in LABELS_QUERY_MODES:
            raise ApiError.validation(
                f"labels_query must be one of {', '.join(LABELS_QUERY_MODES)}", ["labels_query"]
            )
        with self.lock:
            self.config = {**self.config, **changes}
            self.set_meta("config", dumps(self.config))
            config = dict(self.config)
        if changes.get("webhooks_enabled"):
            self.on_enqueue()
        return config

    # -- reads ------------------------------------------------------------------------------

    def page(
        self,
        table: str,
        where: list[str],
        params: list[Any],
        limit: int,
        token: str | None,
        ascending: bool,
    ) -> Page:
        clauses = list(where)
        args = list(params)
        if token:
            clauses.append("seq > ?" if ascending else "seq < ?")
            args.append(decode_token(token))
        # `table` and the clauses are fixed strings from this package; values are bound.
        sql = "SELECT seq, doc FROM " + table  # noqa: S608
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY seq " + ("ASC" if ascending else "DESC") + " LIMIT ?"
        args.append(limit + 1)
        with self.lock:
            rows = self.db.execute(sql, args).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        return Page(
            items=[json.loads(doc) for _, doc in rows],
            next_token=encode_token(rows[-1][0]) if more and rows else None,
        )

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        with self.lock:
            cur = self.db.execute(sql, list(params))
            names = [c[0] for c in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


class Transaction:
    def __init__(self, core: Core):
        self.db = core.db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
        return False


class Resource:
    """The rows of one resource, over the core's connection, lock and clock."""

    def __init__(self, core: Core):
        self.core = core
        self.db = core.db
        self.lock = core.lock
