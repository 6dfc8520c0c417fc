"""Accepted sends: the ledger of every send, the suppression list, and the events the provider
emits about a sent message (sent, delivered, bounced, complained, rejected, opened)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable

from ..errors import ApiError
from ..records import Identity, address_of, as_list, dumps, iso
from .core import Core, Resource
from .events import Events
from .idempotency import IdempotencyKeys
from .messages import Messages

# The events that make AgentMail suppress the recipients.
SUPPRESSING_EVENTS = ("message.bounced", "message.complained", "message.rejected")


class Sends(Resource):
    def __init__(
        self, core: Core, messages: Messages, events: Events, idempotency: IdempotencyKeys
    ):
        super().__init__(core)
        self.messages = messages
        self.events = events
        self.idempotency = idempotency

    def suppressed(self, addresses: Iterable[str]) -> list[str]:
        wanted = sorted({address_of(a) for a in addresses})
        if not wanted:
            return []
        with self.lock:
            marks = ",".join("?" * len(wanted))
            sql = "SELECT address FROM suppressions WHERE address IN (" + marks + ")"  # noqa: S608
            rows = self.db.execute(sql, wanted).fetchall()
        return [r[0] for r in rows]

    def commit(
        self,
        *,
        message: dict,
        pod_id: str,
        route: str,
        idempotency_key: str | None,
        response_body: bytes,
        identity: Identity,
        files: list[bytes] | None = None,
    ) -> None:
        """Record an accepted send: message, ledger row (with the attachments' bytes, so tests
        can compare what arrived with what was approved), key completion and webhook events."""
        recipients = message["to"] + message.get("cc", []) + message.get("bcc", [])
        with self.lock, self.core.tx():
            self.messages.insert(message, "outbound")
            ledger_id = self._ledger_insert(
                message, pod_id, route, idempotency_key, identity, recipients
            )
            self._attachments_insert(ledger_id, message.get("attachments", []), files or [])
            if idempotency_key is not None:
                self.idempotency.complete(idempotency_key, response_body)
            self._emit_send_events(message, pod_id, recipients)
        self.core.on_enqueue()

    def _ledger_insert(
        self,
        message: dict,
        pod_id: str,
        route: str,
        idempotency_key: str | None,
        identity: Identity,
        recipients: list[str],
    ) -> int:
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
        assert cur.lastrowid is not None
        return cur.lastrowid

    def _attachments_insert(self, ledger_id: int, entries: list[dict], files: list[bytes]) -> None:
        self.db.executemany(
            "INSERT INTO ledger_attachments (ledger_id, position, attachment_id, filename, "
            "content_type, content_disposition, content) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    ledger_id,
                    position,
                    entry["attachment_id"],
                    entry.get("filename"),
                    entry.get("content_type"),
                    entry.get("content_disposition"),
                    data,
                )
                for position, (entry, data) in enumerate(zip(entries, files, strict=True))
            ],
        )

    def attachments_of(self, ledger_ids: list[int]) -> dict[int, list[dict]]:
        """The ledger rows' attachments (base64 content), by ledger id."""
        if not ledger_ids:
            return {}
        marks = ",".join("?" * len(ledger_ids))
        with self.lock:
            sql = (
                "SELECT ledger_id, attachment_id, filename, content_type, content_disposition, "  # noqa: S608
                "content FROM ledger_attachments WHERE ledger_id IN (" + marks + ") "
                "ORDER BY ledger_id, position"
            )
            rows = self.db.execute(sql, ledger_ids).fetchall()
        out: dict[int, list[dict]] = {}
        for row in rows:
            out.setdefault(row[0], []).append(
                {
                    "attachment_id": row[1],
                    "filename": row[2],
                    "content_type": row[3],
                    "content_disposition": row[4],
                    "size": len(row[5]),
                    "content": base64.b64encode(row[5]).decode("ascii"),
                }
            )
        return out

    def _emit_send_events(self, message: dict, pod_id: str, recipients: list[str]) -> None:
        base = {
            "inbox_id": message["inbox_id"],
            "thread_id": message["thread_id"],
            "message_id": message["message_id"],
        }
        self.events.emit(
            "message.sent",
            "send",
            {**base, "timestamp": message["timestamp"], "recipients": recipients},
            pod_id=pod_id,
            inbox_id=message["inbox_id"],
        )
        if self.core.config["auto_deliver"]:
            delay = float(self.core.config["auto_deliver_delay"])
            self.events.emit(
                "message.delivered",
                "delivery",
                {**base, "timestamp": iso(self.core.now() + delay), "recipients": recipients},
                pod_id=pod_id,
                inbox_id=message["inbox_id"],
                delay=delay,
            )

    def trigger(self, *, message_id: str, event_type: str, spec: dict) -> dict:
        """Emit `event_type` for a sent message, as the provider would (control API)."""
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
        recipients = as_list(spec.get("recipients")) or everyone
        base = {
            "inbox_id": inbox_id,
            "thread_id": thread_id,
            "message_id": message_id,
            "timestamp": iso(self.core.now()),
        }
        key, obj = _event_object(event_type, base, recipients, spec)
        with self.lock, self.core.tx():
            if event_type in SUPPRESSING_EVENTS:
                # AgentMail suppresses addresses that bounced, complained or were rejected.
                self.db.executemany(
                    "INSERT OR IGNORE INTO suppressions (address, reason, created_at) "
                    "VALUES (?, ?, ?)",
                    [(address_of(a), event_type, base["timestamp"]) for a in recipients],
                )
            event_id = self.events.emit(event_type, key, obj, pod_id=pod_id, inbox_id=inbox_id)
        self.core.on_enqueue()
        return {"event_id": event_id, "event_type": event_type, key: obj}


def _event_object(event_type: str, base: dict, recipients: list[str], spec: dict):
    """The payload key and object of a triggered event, shaped as reference §5.3 shows."""
    if event_type in ("message.sent", "message.delivered"):
        key = "send" if event_type == "message.sent" else "delivery"
        return key, {**base, "recipients": recipients}
    if event_type == "message.bounced":
        return "bounce", {
            **base,
            "type": spec.get("type", "Permanent"),
            "sub_type": spec.get("sub_type", "General"),
            "recipients": [
                {"address": a, "status": spec.get("status", "5.1.1")} for a in recipients
            ],
        }
    if event_type == "message.complained":
        return "complaint", {
            **base,
            "type": spec.get("type", "abuse"),
            "sub_type": spec.get("sub_type", "spam"),
            "recipients": recipients,
        }
    if event_type == "message.rejected":
        return "reject", {**base, "reason": spec.get("reason", "Recipient rejected")}
    if event_type == "message.opened":
        return "open", base
    raise ApiError.validation(f"Cannot trigger {event_type}", ["event_type"])
