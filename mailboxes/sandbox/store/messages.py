"""Messages and threads of an inbox (`/v0/inboxes/{inbox_id}/messages`), and inbound mail."""

from __future__ import annotations

import json
import secrets
import uuid
from typing import Any

from ..errors import ApiError
from ..records import RESTRICTED_EVENT_LABELS, Page, as_list, dumps, iso, parse_time, set_body
from .core import Core, Resource
from .events import Events


class Messages(Resource):
    def __init__(self, core: Core, events: Events):
        super().__init__(core)
        self.events = events

    def get(self, inbox_id: str, message_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM messages WHERE inbox_id=? AND message_id=?",
                (inbox_id, message_id),
            ).fetchone()
        return json.loads(row[0]) if row else None

    def direction(self, inbox_id: str, message_id: str) -> str | None:
        with self.lock:
            row = self.db.execute(
                "SELECT direction FROM messages WHERE inbox_id=? AND message_id=?",
                (inbox_id, message_id),
            ).fetchone()
        return row[0] if row else None

    def page(
        self,
        *,
        inbox_id: str,
        labels: list[str],
        hidden: list[str],
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
        for label in hidden:
            where.append(
                "seq NOT IN (SELECT message_seq FROM message_labels WHERE inbox_id=? AND label=?)"
            )
            params.extend([inbox_id, label])
        # In the query, not on the page: a page must not come back short (or empty, with a
        # next_page_token) because its rows fell outside the time range.
        for op, bound in (("<", before), (">", after)):
            if bound:
                where.append(f"json_extract(doc, '$.timestamp') {op} ?")
                params.append(iso(parse_time(bound)))
        return self.core.page("messages", where, params, limit, token, asc)

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

    def insert(self, doc: dict, direction: str) -> None:
        """Store a message with its labels (inside the caller's transaction)."""
        cur = self.db.execute(
            "INSERT INTO messages (inbox_id, message_id, thread_id, direction, doc) "
            "VALUES (?, ?, ?, ?, ?)",
            (doc["inbox_id"], doc["message_id"], doc["thread_id"], direction, dumps(doc)),
        )
        self.db.executemany(
            "INSERT OR IGNORE INTO message_labels (inbox_id, label, message_seq) VALUES (?, ?, ?)",
            [(doc["inbox_id"], label, cur.lastrowid) for label in doc["labels"]],
        )

    def ingest_inbound(
        self, *, inbox: dict, spec: dict, files: list[tuple[dict, bytes]] | None = None
    ) -> dict:
        """Store an inbound message (with its attachments' bytes, downloadable by a secret
        token as AgentMail's presigned URLs are) and emit `message.received`."""
        now = iso(self.core.now())
        with self.lock, self.core.tx():
            doc = self._inbound_doc(inbox, spec, now)
            if files:
                doc["attachments"] = [entry for entry, _ in files]
            if self.db.execute(
                "SELECT 1 FROM messages WHERE inbox_id=? AND message_id=?",
                (doc["inbox_id"], doc["message_id"]),
            ).fetchone():
                raise ApiError(409, "conflict", "Message id already exists in this inbox")
            self.insert(doc, "inbound")
            self.db.executemany(
                "INSERT INTO message_attachments (inbox_id, message_id, attachment_id, "
                "download_token, content) VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        doc["inbox_id"],
                        doc["message_id"],
                        entry["attachment_id"],
                        secrets.token_urlsafe(24),
                        data,
                    )
                    for entry, data in files or []
                ],
            )
            thread = self.thread_item(doc["thread_id"])
            event_id = self.events.emit(
                spec.get("event_type") or "message.received",
                None,
                {"message": doc, "thread": thread},
                pod_id=inbox["pod_id"],
                inbox_id=inbox["inbox_id"],
            )
        self.core.on_enqueue()
        return {
            "message_id": doc["message_id"],
            "thread_id": doc["thread_id"],
            "event_id": event_id,
        }

    def attachment_token(self, inbox_id: str, message_id: str, attachment_id: str) -> str | None:
        with self.lock:
            row = self.db.execute(
                "SELECT download_token FROM message_attachments WHERE inbox_id=? AND "
                "message_id=? AND attachment_id=?",
                (inbox_id, message_id, attachment_id),
            ).fetchone()
        return row[0] if row else None

    def attachment_download(self, token: str) -> bytes | None:
        with self.lock:
            row = self.db.execute(
                "SELECT content FROM message_attachments WHERE download_token=?", (token,)
            ).fetchone()
        return bytes(row[0]) if row else None

    def _thread_of(self, inbox_id: str, in_reply_to: str | None) -> tuple[str | None, list[str]]:
        """The thread and `references` of a message answering `in_reply_to`, if we hold it."""
        if not in_reply_to:
            return None, []
        row = self.db.execute(
            "SELECT thread_id, doc FROM messages WHERE inbox_id=? AND message_id=?",
            (inbox_id, in_reply_to),
        ).fetchone()
        if row:
            return row[0], [*json.loads(row[1]).get("references", []), in_reply_to]
        return None, [in_reply_to]

    def _inbound_doc(self, inbox: dict, spec: dict, now: str) -> dict[str, Any]:
        in_reply_to = spec.get("in_reply_to")
        thread_id, references = self._thread_of(inbox["inbox_id"], in_reply_to)
        thread_id = thread_id or str(uuid.uuid4())
        labels = ["received", "unread", *spec.get("labels", [])]
        filtered = RESTRICTED_EVENT_LABELS.get(spec.get("event_type") or "")
        if filtered:
            labels.append(filtered)
        doc: dict[str, Any] = {
            "inbox_id": inbox["inbox_id"],
            "thread_id": thread_id,
            "message_id": spec.get("message_id") or f"<{uuid.uuid4()}@sandbox.invalid>",
            "labels": list(dict.fromkeys(labels)),
            "timestamp": now,
            "from": spec["from"],
            "to": as_list(spec.get("to")) or [inbox["inbox_id"]],
        }
        if spec.get("cc"):
            doc["cc"] = as_list(spec["cc"])
        if spec.get("reply_to"):
            doc["reply_to"] = as_list(spec["reply_to"])
        if spec.get("subject") is not None:
            doc["subject"] = spec["subject"]
        set_body(doc, spec.get("text"), spec.get("html"))
        if in_reply_to:
            doc["in_reply_to"] = in_reply_to
            doc["references"] = references
        if spec.get("headers"):
            doc["headers"] = spec["headers"]
        doc |= {"created_at": now, "updated_at": now}
        return doc
