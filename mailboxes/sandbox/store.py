"""SQLite-backed state of the sandbox.

One connection guarded by one lock: the sandbox is a single process, SQLite serialises writers
anyway, and a single lock makes the idempotency transitions atomic without relying on SQLite's
busy handling.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .errors import ApiError

ORG_KEY_NAMESPACE = uuid.UUID("5b0c6f0e-6d43-4c8e-9a57-2f1f7d6f0c11")

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
}
LABELS_QUERY_MODES = ("both", "repeated", "ignored")

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

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pods (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, pod_id TEXT UNIQUE NOT NULL,
    client_id TEXT UNIQUE, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inboxes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, inbox_id TEXT UNIQUE NOT NULL, pod_id TEXT NOT NULL,
    client_id TEXT UNIQUE, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS inboxes_pod ON inboxes (pod_id, seq);
CREATE TABLE IF NOT EXISTS api_keys (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, api_key_id TEXT UNIQUE NOT NULL,
    secret_hash TEXT UNIQUE NOT NULL, scope_type TEXT NOT NULL, pod_id TEXT, inbox_id TEXT,
    permissions TEXT, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, inbox_id TEXT NOT NULL, message_id TEXT NOT NULL,
    thread_id TEXT NOT NULL, direction TEXT NOT NULL, doc TEXT NOT NULL,
    UNIQUE (inbox_id, message_id));
CREATE INDEX IF NOT EXISTS messages_thread ON messages (thread_id, seq);
CREATE INDEX IF NOT EXISTS messages_id ON messages (message_id);
CREATE TABLE IF NOT EXISTS message_labels (
    inbox_id TEXT NOT NULL, label TEXT NOT NULL, message_seq INTEGER NOT NULL,
    PRIMARY KEY (inbox_id, label, message_seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, state TEXT NOT NULL, status INTEGER,
    body BLOB, completed_at REAL, failed_at REAL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, route TEXT NOT NULL,
    inbox_id TEXT NOT NULL, pod_id TEXT NOT NULL, message_id TEXT NOT NULL,
    thread_id TEXT NOT NULL, idempotency_key TEXT, from_addr TEXT NOT NULL,
    to_addrs TEXT NOT NULL, cc_addrs TEXT NOT NULL, bcc_addrs TEXT NOT NULL, subject TEXT,
    text_body TEXT, html_body TEXT, labels TEXT NOT NULL, in_reply_to TEXT,
    api_key_id TEXT, api_key_prefix TEXT);
CREATE INDEX IF NOT EXISTS ledger_key ON ledger (idempotency_key);
CREATE TABLE IF NOT EXISTS ledger_recipients (
    address TEXT NOT NULL, ledger_id INTEGER NOT NULL,
    PRIMARY KEY (address, ledger_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, method TEXT NOT NULL,
    path TEXT NOT NULL, route TEXT, api_key_id TEXT, api_key_prefix TEXT, scope_type TEXT,
    status INTEGER NOT NULL, fault TEXT, idempotency_key TEXT, duration_ms REAL NOT NULL);
CREATE TABLE IF NOT EXISTS webhooks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, webhook_id TEXT UNIQUE NOT NULL, client_id TEXT UNIQUE,
    failures INTEGER NOT NULL DEFAULT 0, headers TEXT NOT NULL, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT UNIQUE NOT NULL, svix_id TEXT NOT NULL,
    event_type TEXT NOT NULL, inbox_id TEXT, pod_id TEXT, message_id TEXT, body TEXT NOT NULL,
    created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, webhook_id TEXT NOT NULL, event_id TEXT NOT NULL,
    svix_id TEXT NOT NULL, event_type TEXT NOT NULL, status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at REAL NOT NULL, last_status INTEGER,
    last_error TEXT);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_attempt_at);
CREATE TABLE IF NOT EXISTS delivery_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, delivery_id INTEGER NOT NULL, webhook_id TEXT NOT NULL,
    svix_id TEXT NOT NULL, event_id TEXT NOT NULL, event_type TEXT NOT NULL,
    attempt INTEGER NOT NULL, at REAL NOT NULL, status_code INTEGER, error TEXT);
CREATE TABLE IF NOT EXISTS suppressions (
    address TEXT PRIMARY KEY, reason TEXT NOT NULL, created_at TEXT NOT NULL);
"""

WIPED_TABLES = (
    "pods",
    "inboxes",
    "api_keys",
    "messages",
    "message_labels",
    "idempotency_keys",
    "ledger",
    "ledger_recipients",
    "requests",
    "webhooks",
    "events",
    "deliveries",
    "delivery_attempts",
    "suppressions",
)

ADJECTIVES = ("brisk", "calm", "eager", "gentle", "lucky", "quiet", "rapid", "sunny", "witty")
NOUNS = ("otter", "falcon", "maple", "harbor", "comet", "meadow", "lantern", "pebble", "river")


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


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


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


class Store:
    def __init__(self, path: str, org_key: str, on_enqueue: Callable[[], None] | None = None):
        self.path = path
        self.org_key = org_key
        self.lock = threading.RLock()
        self.on_enqueue = on_enqueue or (lambda: None)
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.executescript(SCHEMA)
        self._identities: dict[str, Identity | None] = {}
        with self.lock:
            self.organization_id = self._meta("organization_id") or str(uuid.uuid4())
            self._set_meta("organization_id", self.organization_id)
            # AgentMail's default pod shares the organization's id [U in the reference notes].
            self.default_pod_id = self.organization_id
            self.clock_offset = float(self._meta("clock_offset") or 0.0)
            self._ensure_default_pod()
            self.config = {**DEFAULT_CONFIG, **json.loads(self._meta("config") or "{}")}
            # A send that was mid-flight when the process died must not block its key forever:
            # it becomes "failed", which frees the key after failed_key_window.
            self.db.execute(
                "UPDATE idempotency_keys SET state='failed', failed_at=? WHERE state='in_progress'",
                (time.time(),),
            )
            self.db.execute("UPDATE deliveries SET status='pending' WHERE status='inflight'")
        self.org_identity = Identity(
            api_key_id=str(uuid.uuid5(ORG_KEY_NAMESPACE, org_key)),
            prefix=org_key[:10],
            scope_type="organization",
            pod_id=None,
            inbox_id=None,
            permissions=None,
        )

    def close(self) -> None:
        with self.lock:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.close()

    # -- plumbing ---------------------------------------------------------------------------

    def _meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def _tx(self):
        return _Transaction(self)

    def now(self) -> float:
        """The sandbox clock: wall time plus the offset tests set through the control API."""
        return time.time() + self.clock_offset

    def advance_clock(self, seconds: float) -> dict:
        with self.lock:
            self.clock_offset += seconds
            self._set_meta("clock_offset", repr(self.clock_offset))
        return self.clock_info()

    def set_clock_offset(self, offset: float) -> dict:
        with self.lock:
            self.clock_offset = offset
            self._set_meta("clock_offset", repr(self.clock_offset))
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
            self._set_meta("config", dumps(self.config))
            return dict(self.config)

    def _ensure_default_pod(self) -> None:
        if self.db.execute("SELECT 1 FROM pods WHERE pod_id=?", (self.default_pod_id,)).fetchone():
            return
        now = iso(self.now())
        doc = {
            "pod_id": self.default_pod_id,
            "name": "Default Pod",
            "created_at": now,
            "updated_at": now,
        }
        self.db.execute(
            "INSERT INTO pods (pod_id, doc) VALUES (?, ?)", (self.default_pod_id, dumps(doc))
        )

    def reset(self) -> None:
        with self.lock, self._tx():
            for table in WIPED_TABLES:
                self.db.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
            self.clock_offset = 0.0
            self.config = dict(DEFAULT_CONFIG)
            self._set_meta("clock_offset", "0.0")
            self._set_meta("config", dumps(self.config))
            self._ensure_default_pod()
            self._identities.clear()

    # -- identities ---------------------------------------------------------------------------

    def identity_for(self, secret: str) -> Identity | None:
        if secrets.compare_digest(secret, self.org_key):
            return self.org_identity
        digest = hash_secret(secret)
        if digest in self._identities:
            return self._identities[digest]
        with self.lock:
            row = self.db.execute(
                "SELECT api_key_id, doc, scope_type, pod_id, inbox_id, permissions "
                "FROM api_keys WHERE secret_hash=?",
                (digest,),
            ).fetchone()
        identity = None
        if row:
            doc = json.loads(row[1])
            identity = Identity(
                api_key_id=row[0],
                prefix=doc["prefix"],
                scope_type=row[2],
                pod_id=row[3],
                inbox_id=row[4],
                permissions=json.loads(row[5]) if row[5] else None,
            )
        if len(self._identities) > 10_000:
            self._identities.clear()
        self._identities[digest] = identity
        return identity

    # -- pods -----------------------------------------------------------------------------------

    def create_pod(self, *, name: str | None, client_id: str | None) -> dict:
        with self.lock, self._tx():
            if client_id:
                row = self.db.execute(
                    "SELECT doc FROM pods WHERE client_id=?", (client_id,)
                ).fetchone()
                if row:
                    return json.loads(row[0])
            now = iso(self.now())
            pod_id = str(uuid.uuid4())
            doc = {"pod_id": pod_id, "name": name or f"pod-{pod_id[:8]}"}
            if client_id:
                doc["client_id"] = client_id
            doc |= {"created_at": now, "updated_at": now}
            self.db.execute(
                "INSERT INTO pods (pod_id, client_id, doc) VALUES (?, ?, ?)",
                (pod_id, client_id, dumps(doc)),
            )
            return doc

    def get_pod(self, pod_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute("SELECT doc FROM pods WHERE pod_id=?", (pod_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def list_pods(self, *, only: str | None, limit: int, token: str | None, asc: bool) -> Page:
        where, params = ([], []) if only is None else (["pod_id=?"], [only])
        return self._page("pods", where, params, limit, token, asc)

    def _page(
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
        # `table` and the clauses are fixed strings from this module; values are bound.
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

    # -- inboxes --------------------------------------------------------------------------------

    def find_inbox_by_client_id(self, client_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM inboxes WHERE client_id=?", (client_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def create_inbox(
        self,
        *,
        pod_id: str,
        username: str | None,
        domain: str,
        display_name: str | None,
        client_id: str | None,
        metadata: dict | None,
        status: str | None,
    ) -> dict:
        with self.lock, self._tx():
            if client_id:
                row = self.db.execute(
                    "SELECT doc FROM inboxes WHERE client_id=?", (client_id,)
                ).fetchone()
                if row:
                    return json.loads(row[0])
            if username is None:
                username = self._random_username(domain)
            inbox_id = f"{username}@{domain}"
            if self.db.execute("SELECT 1 FROM inboxes WHERE inbox_id=?", (inbox_id,)).fetchone():
                raise ApiError(
                    403,
                    "resource_taken",
                    f"Inbox {inbox_id} is taken",
                    name="IsTakenError",
                )
            now = iso(self.now())
            doc: dict[str, Any] = {"pod_id": pod_id, "inbox_id": inbox_id, "email": inbox_id}
            if display_name:
                doc["display_name"] = display_name
            if client_id:
                doc["client_id"] = client_id
            if status:
                doc["status"] = status
            if metadata:
                doc["metadata"] = metadata
            doc |= {"created_at": now, "updated_at": now}
            self.db.execute(
                "INSERT INTO inboxes (inbox_id, pod_id, client_id, doc) VALUES (?, ?, ?, ?)",
                (inbox_id, pod_id, client_id, dumps(doc)),
            )
            return doc

    def _random_username(self, domain: str) -> str:
        while True:
            candidate = (
                f"{random.choice(ADJECTIVES)}{random.choice(NOUNS)}{random.randint(100, 99999)}"
            )
            taken = self.db.execute(
                "SELECT 1 FROM inboxes WHERE inbox_id=?", (f"{candidate}@{domain}",)
            ).fetchone()
            if not taken:
                return candidate

    def get_inbox(self, inbox_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM inboxes WHERE inbox_id=?", (inbox_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def list_inboxes(
        self,
        *,
        pod_id: str | None,
        inbox_id: str | None,
        limit: int,
        token: str | None,
        asc: bool,
    ) -> Page:
        where: list[str] = []
        params: list[Any] = []
        if pod_id is not None:
            where.append("pod_id=?")
            params.append(pod_id)
        if inbox_id is not None:
            where.append("inbox_id=?")
            params.append(inbox_id)
        return self._page("inboxes", where, params, limit, token, asc)

    # -- api keys -------------------------------------------------------------------------------

    def create_api_key(
        self,
        *,
        scope_type: str,
        pod_id: str | None,
        inbox_id: str | None,
        name: str | None,
        permissions: dict | None,
    ) -> dict:
        secret = "am_" + secrets.token_hex(32)
        api_key_id = str(uuid.uuid4())
        now = iso(self.now())
        doc: dict[str, Any] = {
            "type": "bearer",
            "api_key_id": api_key_id,
            "prefix": secret[:10],
            "name": name or "",
        }
        if pod_id:
            doc["pod_id"] = pod_id
        if inbox_id:
            doc["inbox_id"] = inbox_id
        if permissions is not None:
            doc["permissions"] = permissions
        doc |= {"created_at": now, "updated_at": now}
        with self.lock, self._tx():
            self.db.execute(
                "INSERT INTO api_keys (api_key_id, secret_hash, scope_type, pod_id, inbox_id, "
                "permissions, doc) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    api_key_id,
                    hash_secret(secret),
                    scope_type,
                    pod_id,
                    inbox_id,
                    dumps(permissions) if permissions is not None else None,
                    dumps(doc),
                ),
            )
        created = {k: v for k, v in doc.items() if k not in ("type", "updated_at")}
        return {"api_key_id": api_key_id, "api_key": secret, **created}

    def list_api_keys(
        self, *, pod_id: str | None, inbox_ids: list[str] | None, limit: int, token: str | None
    ) -> Page:
        where: list[str] = []
        params: list[Any] = []
        scope: list[str] = []
        if pod_id is not None:
            scope.append("pod_id=?")
            params.append(pod_id)
        if inbox_ids is not None:
            if inbox_ids:
                scope.append("inbox_id IN (" + ",".join("?" * len(inbox_ids)) + ")")
                params.extend(inbox_ids)
            elif pod_id is None:
                scope.append("0")
        if scope:
            where.append("(" + " OR ".join(scope) + ")")
        return self._page("api_keys", where, params, limit, token, False)

    def get_api_key(self, api_key_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM api_keys WHERE api_key_id=?", (api_key_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def delete_api_key(self, api_key_id: str) -> None:
        with self.lock, self._tx():
            self.db.execute("DELETE FROM api_keys WHERE api_key_id=?", (api_key_id,))
            self._identities.clear()

    def inbox_ids_in_pod(self, pod_id: str) -> list[str]:
        with self.lock:
            rows = self.db.execute("SELECT inbox_id FROM inboxes WHERE pod_id=?", (pod_id,))
            return [r[0] for r in rows]

    # -- messages -------------------------------------------------------------------------------

    def get_message(self, inbox_id: str, message_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM messages WHERE inbox_id=? AND message_id=?",
                (inbox_id, message_id),
            ).fetchone()
        return json.loads(row[0]) if row else None

    def message_direction(self, inbox_id: str, message_id: str) -> str | None:
        with self.lock:
            row = self.db.execute(
                "SELECT direction FROM messages WHERE inbox_id=? AND message_id=?",
                (inbox_id, message_id),
            ).fetchone()
        return row[0] if row else None

    def list_messages(
        self,
        *,
        inbox_id: str,
        labels: list[str],
        limit: int,
        token: str | None,
        asc: bool,
        before: str | None,
        after: str | None,
    ) -> Page:
        where = ["inbox_id=?"]
        params: list[Any] = [inbox_id]
        for label in labels:
            where.append(
                "seq IN (SELECT message_seq FROM message_labels WHERE inbox_id=? AND label=?)"
            )
            params.extend([inbox_id, label])
        # In the query, not on the page: a page must not come back short (or empty, with a
        # next_page_token) because its rows fell outside the time range.
        for op, bound in (("<", before), (">", after)):
            if bound:
                where.append(f"json_extract(doc, '$.timestamp') {op} ?")
                params.append(iso(parse_time(bound)))
        return self._page("messages", where, params, limit, token, asc)

    def thread_item(self, thread_id: str) -> dict:
        rows = self.db.execute(
            "SELECT doc, direction FROM messages WHERE thread_id=? ORDER BY seq", (thread_id,)
        ).fetchall()
        docs = [json.loads(r[0]) for r in rows]
        first, last = docs[0], docs[-1]
        labels: list[str] = []
        senders: list[str] = []
        recipients: list[str] = []
        for doc in docs:
            labels += [label for label in doc["labels"] if label not in labels]
            if doc["from"] not in senders:
                senders.append(doc["from"])
            for addr in doc["to"] + doc.get("cc", []) + doc.get("bcc", []):
                if addr not in recipients:
                    recipients.append(addr)
        item: dict[str, Any] = {
            "inbox_id": first["inbox_id"],
            "thread_id": thread_id,
            "labels": labels,
            "timestamp": last["timestamp"],
        }
        received = [d["timestamp"] for d, r in zip(docs, rows, strict=True) if r[1] == "inbound"]
        sent = [d["timestamp"] for d, r in zip(docs, rows, strict=True) if r[1] == "outbound"]
        if received:
            item["received_timestamp"] = received[-1]
        if sent:
            item["sent_timestamp"] = sent[-1]
        item |= {"senders": senders, "recipients": recipients}
        if first.get("subject") is not None:
            item["subject"] = first["subject"]
        if last.get("preview") is not None:
            item["preview"] = last["preview"]
        item |= {
            "last_message_id": last["message_id"],
            "message_count": len(docs),
            "size": sum(d["size"] for d in docs),
            "updated_at": last["updated_at"],
            "created_at": first["created_at"],
        }
        return item

    def _insert_message(self, doc: dict, direction: str) -> None:
        cur = self.db.execute(
            "INSERT INTO messages (inbox_id, message_id, thread_id, direction, doc) "
            "VALUES (?, ?, ?, ?, ?)",
            (doc["inbox_id"], doc["message_id"], doc["thread_id"], direction, dumps(doc)),
        )
        self.db.executemany(
            "INSERT OR IGNORE INTO message_labels (inbox_id, label, message_seq) VALUES (?, ?, ?)",
            [(doc["inbox_id"], label, cur.lastrowid) for label in doc["labels"]],
        )

    # -- idempotency ----------------------------------------------------------------------------

    def idem_begin(self, key: str, fingerprint: str) -> tuple[int, bytes] | None:
        """Claim `key` for a new send, or answer from its stored result.

        Returns None when the caller must process the send (the key is now in_progress), or
        (status, body) to replay. Raises a 409 ApiError for the conflicting states of §8.3.
        """
        with self.lock:
            row = self.db.execute(
                "SELECT fingerprint, state, status, body, completed_at, failed_at "
                "FROM idempotency_keys WHERE key=?",
                (key,),
            ).fetchone()
            if row is not None:
                fp, state, status, body, completed_at, failed_at = row
                expired = (
                    state == "completed"
                    and completed_at + float(self.config["idempotency_ttl"]) < self.now()
                )
                failed_free = (
                    state == "failed"
                    and failed_at + float(self.config["failed_key_window"]) <= time.time()
                )
                if not (expired or failed_free):
                    if state == "completed" and fp == fingerprint:
                        return status, bytes(body)
                    if state == "completed":
                        raise ApiError.conflict(
                            "Idempotency key was already used for a different request; "
                            "generate a new key"
                        )
                    raise ApiError.conflict(
                        "A request with this idempotency key is still in progress; "
                        "retry the identical request shortly"
                    )
            self.db.execute(
                "INSERT OR REPLACE INTO idempotency_keys (key, fingerprint, state, created_at) "
                "VALUES (?, ?, 'in_progress', ?)",
                (key, fingerprint, self.now()),
            )
            return None

    def idem_release(self, key: str) -> None:
        """Forget an in-progress key whose request ended in a deterministic error."""
        with self.lock:
            self.db.execute(
                "DELETE FROM idempotency_keys WHERE key=? AND state='in_progress'", (key,)
            )

    def idem_fail(self, key: str) -> None:
        with self.lock:
            self.db.execute(
                "UPDATE idempotency_keys SET state='failed', failed_at=? "
                "WHERE key=? AND state='in_progress'",
                (time.time(), key),
            )

    # -- sends ----------------------------------------------------------------------------------

    def suppressed(self, addresses: Iterable[str]) -> list[str]:
        wanted = sorted({address_of(a) for a in addresses})
        if not wanted:
            return []
        with self.lock:
            marks = ",".join("?" * len(wanted))
            sql = "SELECT address FROM suppressions WHERE address IN (" + marks + ")"  # noqa: S608
            rows = self.db.execute(sql, wanted).fetchall()
        return [r[0] for r in rows]

    def commit_send(
        self,
        *,
        message: dict,
        pod_id: str,
        route: str,
        idempotency_key: str | None,
        response_body: bytes,
        identity: Identity,
    ) -> None:
        """Record an accepted send: message, ledger row, key completion and webhook events."""
        recipients = message["to"] + message.get("cc", []) + message.get("bcc", [])
        with self.lock, self._tx():
            self._insert_message(message, "outbound")
            cur = self.db.execute(
                "INSERT INTO ledger (at, route, inbox_id, pod_id, message_id, thread_id, "
                "idempotency_key, from_addr, to_addrs, cc_addrs, bcc_addrs, subject, text_body, "
                "html_body, labels, in_reply_to, api_key_id, api_key_prefix) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    message["timestamp"],
                    route,
                    message["inbox_id"],
                    pod_id,
                    message["message_id"],
                    message["thread_id"],
                    idempotency_key,
                    message["from"],
                    dumps(message["to"]),
                    dumps(message.get("cc", [])),
                    dumps(message.get("bcc", [])),
                    message.get("subject"),
                    message.get("text"),
                    message.get("html"),
                    dumps(message["labels"]),
                    message.get("in_reply_to"),
                    identity.api_key_id,
                    identity.prefix,
                ),
            )
            self.db.executemany(
                "INSERT OR IGNORE INTO ledger_recipients (address, ledger_id) VALUES (?, ?)",
                [(address_of(a), cur.lastrowid) for a in recipients],
            )
            if idempotency_key is not None:
                self.db.execute(
                    "UPDATE idempotency_keys SET state='completed', status=200, body=?, "
                    "completed_at=? WHERE key=?",
                    (response_body, self.now(), idempotency_key),
                )
            base = {
                "inbox_id": message["inbox_id"],
                "thread_id": message["thread_id"],
                "message_id": message["message_id"],
            }
            self._emit(
                "message.sent",
                "send",
                {**base, "timestamp": message["timestamp"], "recipients": recipients},
                pod_id=pod_id,
                inbox_id=message["inbox_id"],
            )
            if self.config["auto_deliver"]:
                delay = float(self.config["auto_deliver_delay"])
                self._emit(
                    "message.delivered",
                    "delivery",
                    {**base, "timestamp": iso(self.now() + delay), "recipients": recipients},
                    pod_id=pod_id,
                    inbox_id=message["inbox_id"],
                    delay=delay,
                )
        self.on_enqueue()

    def ingest_inbound(self, *, inbox: dict, spec: dict) -> dict:
        now = iso(self.now())
        with self.lock, self._tx():
            thread_id = None
            in_reply_to = spec.get("in_reply_to")
            references: list[str] = []
            if in_reply_to:
                row = self.db.execute(
                    "SELECT thread_id, doc FROM messages WHERE inbox_id=? AND message_id=?",
                    (inbox["inbox_id"], in_reply_to),
                ).fetchone()
                if row:
                    thread_id = row[0]
                    references = [*json.loads(row[1]).get("references", []), in_reply_to]
                else:
                    references = [in_reply_to]
            thread_id = thread_id or str(uuid.uuid4())
            text = spec.get("text")
            html = spec.get("html")
            labels = ["received", "unread", *spec.get("labels", [])]
            doc: dict[str, Any] = {
                "inbox_id": inbox["inbox_id"],
                "thread_id": thread_id,
                "message_id": spec.get("message_id") or f"<{uuid.uuid4()}@sandbox.invalid>",
                "labels": list(dict.fromkeys(labels)),
                "timestamp": now,
                "from": spec["from"],
                "to": _as_list(spec.get("to")) or [inbox["inbox_id"]],
            }
            if spec.get("cc"):
                doc["cc"] = _as_list(spec["cc"])
            if spec.get("reply_to"):
                doc["reply_to"] = _as_list(spec["reply_to"])
            if spec.get("subject") is not None:
                doc["subject"] = spec["subject"]
            set_body(doc, text, html)
            if in_reply_to:
                doc["in_reply_to"] = in_reply_to
                doc["references"] = references
            if spec.get("headers"):
                doc["headers"] = spec["headers"]
            doc |= {"created_at": now, "updated_at": now}
            if self.db.execute(
                "SELECT 1 FROM messages WHERE inbox_id=? AND message_id=?",
                (doc["inbox_id"], doc["message_id"]),
            ).fetchone():
                raise ApiError(409, "conflict", "Message id already exists in this inbox")
            self._insert_message(doc, "inbound")
            thread = self.thread_item(thread_id)
            event_id = self._emit(
                spec.get("event_type") or "message.received",
                None,
                {"message": doc, "thread": thread},
                pod_id=inbox["pod_id"],
                inbox_id=inbox["inbox_id"],
            )
        self.on_enqueue()
        return {"message_id": doc["message_id"], "thread_id": thread_id, "event_id": event_id}

    def trigger(self, *, message_id: str, event_type: str, spec: dict) -> dict:
        with self.lock:
            row = self.db.execute(
                "SELECT inbox_id, pod_id, thread_id, to_addrs, cc_addrs, bcc_addrs FROM ledger "
                "WHERE message_id=? ORDER BY id LIMIT 1",
                (message_id,),
            ).fetchone()
        if row is None:
            raise ApiError.not_found("Sent message")
        inbox_id, pod_id, thread_id = row[0], row[1], row[2]
        everyone = json.loads(row[3]) + json.loads(row[4]) + json.loads(row[5])
        recipients = _as_list(spec.get("recipients")) or everyone
        base = {
            "inbox_id": inbox_id,
            "thread_id": thread_id,
            "message_id": message_id,
            "timestamp": iso(self.now()),
        }
        if event_type in ("message.sent", "message.delivered"):
            key, obj = (
                ("send" if event_type == "message.sent" else "delivery"),
                {
                    **base,
                    "recipients": recipients,
                },
            )
        elif event_type == "message.bounced":
            key, obj = (
                "bounce",
                {
                    **base,
                    "type": spec.get("type", "Permanent"),
                    "sub_type": spec.get("sub_type", "General"),
                    "recipients": [
                        {"address": a, "status": spec.get("status", "5.1.1")} for a in recipients
                    ],
                },
            )
        elif event_type == "message.complained":
            key, obj = (
                "complaint",
                {
                    **base,
                    "type": spec.get("type", "abuse"),
                    "sub_type": spec.get("sub_type", "spam"),
                    "recipients": recipients,
                },
            )
        elif event_type == "message.rejected":
            key, obj = "reject", {**base, "reason": spec.get("reason", "Recipient rejected")}
        elif event_type == "message.opened":
            key, obj = "open", base
        else:
            raise ApiError.validation(f"Cannot trigger {event_type}", ["event_type"])
        with self.lock, self._tx():
            if event_type in ("message.bounced", "message.complained", "message.rejected"):
                # AgentMail suppresses addresses that bounced, complained or were rejected.
                self.db.executemany(
                    "INSERT OR IGNORE INTO suppressions (address, reason, created_at) "
                    "VALUES (?, ?, ?)",
                    [(address_of(a), event_type, base["timestamp"]) for a in recipients],
                )
            event_id = self._emit(event_type, key, obj, pod_id=pod_id, inbox_id=inbox_id)
        self.on_enqueue()
        return {"event_id": event_id, "event_type": event_type, key: obj}

    # -- events and webhooks --------------------------------------------------------------------

    def _emit(
        self,
        event_type: str,
        key: str | None,
        obj: dict,
        *,
        pod_id: str,
        inbox_id: str,
        delay: float = 0.0,
    ) -> str:
        event_id = "evt_" + uuid.uuid4().hex
        svix_id = "msg_" + secrets.token_urlsafe(18).replace("-", "x").replace("_", "y")
        payload = {"type": "event", "event_type": event_type, "event_id": event_id}
        payload |= {key: obj} if key else obj
        body = dumps(payload)
        message_id = (obj.get("message") or obj).get("message_id")
        self.db.execute(
            "INSERT INTO events (event_id, svix_id, event_type, inbox_id, pod_id, message_id, "
            "body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (event_id, svix_id, event_type, inbox_id, pod_id, message_id, body, time.time()),
        )
        due = time.time() + delay
        for webhook in self._webhooks():
            if _webhook_matches(webhook, event_type, pod_id, inbox_id):
                self.db.execute(
                    "INSERT INTO deliveries (webhook_id, event_id, svix_id, event_type, status, "
                    "next_attempt_at) VALUES (?, ?, ?, ?, 'pending', ?)",
                    (webhook["webhook_id"], event_id, svix_id, event_type, due),
                )
        return event_id

    def _webhooks(self) -> list[dict]:
        return [json.loads(r[0]) for r in self.db.execute("SELECT doc FROM webhooks ORDER BY seq")]

    def create_webhook(self, *, spec: dict, headers: dict[str, str]) -> dict:
        with self.lock, self._tx():
            client_id = spec.get("client_id")
            if client_id:
                row = self.db.execute(
                    "SELECT doc FROM webhooks WHERE client_id=?", (client_id,)
                ).fetchone()
                if row:
                    return json.loads(row[0])
            now = iso(self.now())
            doc = {
                "webhook_id": "ep_" + secrets.token_hex(12),
                **spec,
                "secret": "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode(),
                "enabled": True,
                "created_at": now,
                "updated_at": now,
            }
            self.db.execute(
                "INSERT INTO webhooks (webhook_id, client_id, headers, doc) VALUES (?, ?, ?, ?)",
                (doc["webhook_id"], client_id, dumps(headers), dumps(doc)),
            )
            return doc

    def get_webhook(self, webhook_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM webhooks WHERE webhook_id=?", (webhook_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def list_webhooks(self, *, predicate: Callable[[dict], bool], limit: int, token: str | None):
        page = self._page("webhooks", [], [], 10_000, token, False)
        items = [w for w in page.items if predicate(w)]
        return Page(items=items[:limit], next_token=None)

    def save_webhook(self, doc: dict, *, reenabled: bool) -> dict:
        doc["updated_at"] = iso(self.now())
        with self.lock, self._tx():
            self.db.execute(
                "UPDATE webhooks SET doc=?, failures=CASE WHEN ? THEN 0 ELSE failures END "
                "WHERE webhook_id=?",
                (dumps(doc), reenabled, doc["webhook_id"]),
            )
        return doc

    def delete_webhook(self, webhook_id: str) -> None:
        with self.lock, self._tx():
            self.db.execute("DELETE FROM webhooks WHERE webhook_id=?", (webhook_id,))
            self.db.execute(
                "UPDATE deliveries SET status='cancelled' WHERE webhook_id=? AND status='pending'",
                (webhook_id,),
            )

    def claim_due_deliveries(self, limit: int = 64) -> tuple[list[dict], float | None]:
        """Mark due deliveries in flight and return them, plus when the next one falls due."""
        now = time.time()
        with self.lock, self._tx():
            rows = self.db.execute(
                "SELECT d.id, d.webhook_id, d.svix_id, d.event_id, d.event_type, d.attempts, "
                "e.body, w.doc, w.headers FROM deliveries d "
                "JOIN events e ON e.event_id = d.event_id "
                "JOIN webhooks w ON w.webhook_id = d.webhook_id "
                "WHERE d.status='pending' AND d.next_attempt_at <= ? "
                "ORDER BY d.next_attempt_at, d.id LIMIT ?",
                (now, limit),
            ).fetchall()
            claimed = []
            for row in rows:
                self.db.execute("UPDATE deliveries SET status='inflight' WHERE id=?", (row[0],))
                doc = json.loads(row[7])
                claimed.append(
                    {
                        "id": row[0],
                        "webhook_id": row[1],
                        "svix_id": row[2],
                        "event_id": row[3],
                        "event_type": row[4],
                        "attempts": row[5],
                        "body": row[6],
                        "url": doc["url"],
                        "secret": doc["secret"],
                        "headers": json.loads(row[8]),
                    }
                )
            nxt = self.db.execute(
                "SELECT MIN(next_attempt_at) FROM deliveries WHERE status='pending'"
            ).fetchone()[0]
        return claimed, nxt

    def record_attempt(self, delivery: dict, *, status_code: int | None, error: str | None) -> None:
        ok = status_code is not None and 200 <= status_code < 300
        schedule = list(self.config["webhook_retry_schedule"])
        attempts = delivery["attempts"] + 1
        with self.lock, self._tx():
            live = self.db.execute(
                "SELECT 1 FROM deliveries WHERE id=? AND status='inflight'", (delivery["id"],)
            ).fetchone()
            if not live:
                return
            self.db.execute(
                "INSERT INTO delivery_attempts (delivery_id, webhook_id, svix_id, event_id, "
                "event_type, attempt, at, status_code, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    delivery["id"],
                    delivery["webhook_id"],
                    delivery["svix_id"],
                    delivery["event_id"],
                    delivery["event_type"],
                    attempts,
                    time.time(),
                    status_code,
                    error,
                ),
            )
            if ok:
                status, next_at = "succeeded", 0.0
                self.db.execute(
                    "UPDATE webhooks SET failures=0 WHERE webhook_id=?", (delivery["webhook_id"],)
                )
            elif attempts <= len(schedule):
                status, next_at = "pending", time.time() + float(schedule[attempts - 1])
            else:
                status, next_at = "failed", 0.0
            self.db.execute(
                "UPDATE deliveries SET status=?, attempts=?, next_attempt_at=?, last_status=?, "
                "last_error=? WHERE id=?",
                (status, attempts, next_at, status_code, error, delivery["id"]),
            )
            if not ok:
                self._count_webhook_failure(delivery["webhook_id"])

    def _count_webhook_failure(self, webhook_id: str) -> None:
        row = self.db.execute(
            "UPDATE webhooks SET failures = failures + 1 WHERE webhook_id=? RETURNING failures, doc",
            (webhook_id,),
        ).fetchone()
        if row is None or row[0] < int(self.config["webhook_disable_after"]):
            return
        doc = json.loads(row[1])
        if not doc["enabled"]:
            return
        doc["enabled"] = False
        doc["updated_at"] = iso(self.now())
        self.db.execute("UPDATE webhooks SET doc=? WHERE webhook_id=?", (dumps(doc), webhook_id))
        # Svix drops what a disabled endpoint had queued; re-enabling does not redeliver.
        self.db.execute(
            "UPDATE deliveries SET status='cancelled' WHERE webhook_id=? AND status='pending'",
            (webhook_id,),
        )

    def redeliver(self, *, svix_id: str | None, event_id: str | None) -> int:
        """Queue one more delivery of an already emitted event, with the same svix-id."""
        with self.lock, self._tx():
            row = self.db.execute(
                "SELECT event_id, svix_id, event_type, pod_id, inbox_id FROM events "
                "WHERE svix_id=? OR event_id=?",
                (svix_id, event_id),
            ).fetchone()
            if row is None:
                raise ApiError.not_found("Event")
            count = 0
            for webhook in self._webhooks():
                if _webhook_matches(webhook, row[2], row[3], row[4]):
                    self.db.execute(
                        "INSERT INTO deliveries (webhook_id, event_id, svix_id, event_type, "
                        "status, next_attempt_at) VALUES (?, ?, ?, ?, 'pending', ?)",
                        (webhook["webhook_id"], row[0], row[1], row[2], time.time()),
                    )
                    count += 1
        self.on_enqueue()
        return count

    # -- logs -----------------------------------------------------------------------------------

    def log_request(
        self,
        *,
        method: str,
        path: str,
        route: str | None,
        identity: Identity | None,
        status: int,
        fault: str | None,
        idempotency_key: str | None,
        duration_ms: float,
    ) -> None:
        with self.lock:
            self.db.execute(
                "INSERT INTO requests (at, method, path, route, api_key_id, api_key_prefix, "
                "scope_type, status, fault, idempotency_key, duration_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    time.time(),
                    method,
                    path,
                    route,
                    identity.api_key_id if identity else None,
                    identity.prefix if identity else None,
                    identity.scope_type if identity else None,
                    status,
                    fault,
                    idempotency_key,
                    round(duration_ms, 3),
                ),
            )

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        with self.lock:
            cur = self.db.execute(sql, list(params))
            names = [c[0] for c in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


class _Transaction:
    def __init__(self, store: Store):
        self.db = store.db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
        return False


def _as_list(value: Any) -> list[str]:
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


def _webhook_matches(webhook: dict, event_type: str, pod_id: str, inbox_id: str) -> bool:
    if not webhook["enabled"] or event_type not in webhook.get("event_types", []):
        return False
    if webhook.get("inbox_id") and webhook["inbox_id"] != inbox_id:
        return False
    if webhook.get("pod_id") and webhook["pod_id"] != pod_id:
        return False
    pod_ids = webhook.get("pod_ids") or []
    inbox_ids = webhook.get("inbox_ids") or []
    if pod_ids or inbox_ids:
        return pod_id in pod_ids or inbox_id in inbox_ids
    return True
