"""The `/_sandbox` control API (no auth, loopback only): faults, the ledger, the request log, the
clock, inbound mail, triggered events, webhook deliveries, config, reset, and the recipients'
mailbox pages."""

from __future__ import annotations

import json
import logging
import os
import traceback
from email.message import Message as HeaderMap
from typing import Any

from .api import Call, Reply
from .api.fields import attachments
from .errors import ApiError
from .faults import FaultBook
from .pages import index_page, mailbox_page
from .store import Store

log = logging.getLogger("mailboxes.sandbox")


class Control:
    def __init__(self, store: Store, faults: FaultBook):
        self.store = store
        self.faults = faults
        self.routes = {
            ("GET", "health"): self.c_health,
            ("GET", "faults"): lambda call: Reply.json(200, {"faults": self.faults.list()}),
            ("POST", "faults"): lambda call: Reply.json(200, self.faults.add(call.json())),
            ("DELETE", "faults"): self.c_clear_faults,
            ("GET", "ledger"): self.c_ledger,
            ("GET", "requests"): self.c_requests,
            ("GET", "clock"): lambda call: Reply.json(200, self.store.clock_info()),
            ("POST", "clock"): self.c_clock,
            ("POST", "inbound"): self.c_inbound,
            ("GET", "attachment"): self.c_attachment,
            ("GET", "events"): self.c_events,
            ("POST", "events"): self.c_trigger,
            ("GET", "deliveries"): self.c_deliveries,
            ("POST", "redeliver"): self.c_redeliver,
            ("GET", "config"): lambda call: Reply.json(200, dict(self.store.config)),
            ("POST", "config"): lambda call: Reply.json(200, self.store.update_config(call.json())),
            ("GET", "suppressions"): self.c_suppressions,
            ("POST", "reset"): self.c_reset,
        }

    def handle(
        self, method: str, segments: list[str], query: dict, headers: HeaderMap, body: bytes
    ) -> Reply:
        call = Call(method, "/_sandbox/" + "/".join(segments), {}, query, headers, body)
        try:
            if method == "GET" and segments in ([], [""]):
                return Reply(200, index_page(self.store), "text/html; charset=utf-8")
            if method == "GET" and len(segments) == 2 and segments[0] == "mailboxes":
                page = mailbox_page(self.store, segments[1])
                return Reply(200, page, "text/html; charset=utf-8")
            handler = self.routes.get((method, "/".join(segments)))
            if handler is None:
                raise ApiError.not_found("Control route")
            return handler(call)
        except ApiError as exc:
            return Reply.error(exc)
        except Exception:
            log.error("sandbox.control.crashed\n%s", traceback.format_exc())
            return Reply.error(ApiError(500, "internal_error", "Sandbox crashed"))

    def c_health(self, call: Call) -> Reply:
        org = self.store.keys.org_identity
        return Reply.json(
            200,
            {
                "ok": True,
                "pid": os.getpid(),
                "organization_id": self.store.organization_id,
                "default_pod_id": self.store.default_pod_id,
                "org_key_id": org.api_key_id,
                "org_key_prefix": org.prefix,
                "clock": self.store.clock_info(),
            },
        )

    def c_clear_faults(self, call: Call) -> Reply:
        self.faults.clear()
        return Reply.json(200, {"faults": []})

    def c_ledger(self, call: Call) -> Reply:
        where, params = _filters(
            call, {"idempotency_key", "inbox_id", "message_id", "thread_id", "route", "pod_id"}
        )
        address = call.q("address")
        if address:
            where.append("id IN (SELECT ledger_id FROM ledger_recipients WHERE address=?)")
            params.append(address.lower())
        rows = _select(self.store, "SELECT * FROM ledger", where, params)
        files = self.store.sends.attachments_of([r["id"] for r in rows])
        sends = [
            {
                "id": r["id"],
                "at": r["at"],
                "route": r["route"],
                "inbox_id": r["inbox_id"],
                "pod_id": r["pod_id"],
                "message_id": r["message_id"],
                "thread_id": r["thread_id"],
                "idempotency_key": r["idempotency_key"],
                "from": r["from_addr"],
                "to": json.loads(r["to_addrs"]),
                "cc": json.loads(r["cc_addrs"]),
                "bcc": json.loads(r["bcc_addrs"]),
                "subject": r["subject"],
                "text": r["text_body"],
                "html": r["html_body"],
                "labels": json.loads(r["labels"]),
                "in_reply_to": r["in_reply_to"],
                "api_key_id": r["api_key_id"],
                "api_key_prefix": r["api_key_prefix"],
                "attachments": files.get(r["id"], []),
            }
            for r in rows
        ]
        return Reply.json(200, {"count": len(sends), "sends": sends})

    def c_requests(self, call: Call) -> Reply:
        where, params = _filters(
            call, {"route", "method", "api_key_id", "status", "idempotency_key", "fault"}
        )
        since = call.q("since_id")
        if since:
            where.append("id > ?")
            params.append(int(since))
        rows = _select(self.store, "SELECT * FROM requests", where, params)
        return Reply.json(200, {"count": len(rows), "requests": rows})

    def c_clock(self, call: Call) -> Reply:
        body = call.json()
        if "offset_seconds" in body:
            return Reply.json(200, self.store.set_clock_offset(float(body["offset_seconds"])))
        return Reply.json(200, self.store.advance_clock(float(body.get("advance_seconds", 0))))

    def c_inbound(self, call: Call) -> Reply:
        body = call.json()
        inbox = self.store.inboxes.get(str(body.get("inbox_id", "")).lower())
        if inbox is None:
            raise ApiError.not_found("Inbox")
        if not isinstance(body.get("from"), str):
            raise ApiError.validation("from is required", ["from"])
        files = attachments(body["attachments"]) if body.get("attachments") else []
        return Reply.json(
            200, self.store.messages.ingest_inbound(inbox=inbox, spec=body, files=files)
        )

    def c_attachment(self, call: Call) -> Reply:
        """An inbound attachment's bytes by the token of its download URL (no credentials)."""
        data = self.store.messages.attachment_download(call.q("token") or "")
        if data is None:
            raise ApiError.not_found("Attachment")
        return Reply(200, data, content_type="application/octet-stream")

    def c_events(self, call: Call) -> Reply:
        where, params = _filters(call, {"event_type", "message_id", "event_id", "svix_id"})
        rows = _select(
            self.store,
            "SELECT id, event_id, svix_id, event_type, inbox_id, pod_id, message_id, body, "
            "created_at FROM events",
            where,
            params,
        )
        for row in rows:
            row["payload"] = json.loads(row.pop("body"))
        return Reply.json(200, {"count": len(rows), "events": rows})

    def c_trigger(self, call: Call) -> Reply:
        body = call.json()
        message_id = body.get("message_id")
        event_type = body.get("event_type")
        if not isinstance(message_id, str) or not isinstance(event_type, str):
            raise ApiError.validation("message_id and event_type are required")
        return Reply.json(
            200, self.store.sends.trigger(message_id=message_id, event_type=event_type, spec=body)
        )

    def c_deliveries(self, call: Call) -> Reply:
        where, params = _filters(call, {"webhook_id", "event_type", "svix_id", "event_id"})
        rows = _select(self.store, "SELECT * FROM delivery_attempts", where, params)
        pending = self.store.query(
            "SELECT COUNT(*) AS n FROM deliveries WHERE status IN ('pending', 'inflight')"
        )[0]["n"]
        return Reply.json(200, {"count": len(rows), "pending": pending, "attempts": rows})

    def c_redeliver(self, call: Call) -> Reply:
        body = call.json()
        count = self.store.events.redeliver(
            svix_id=body.get("svix_id"), event_id=body.get("event_id")
        )
        return Reply.json(200, {"queued": count})

    def c_suppressions(self, call: Call) -> Reply:
        rows = self.store.query("SELECT * FROM suppressions ORDER BY created_at")
        return Reply.json(200, {"count": len(rows), "suppressions": rows})

    def c_reset(self, call: Call) -> Reply:
        self.faults.clear()
        self.store.reset()
        return Reply.json(200, {"ok": True})


def _filters(call: Call, allowed: set[str]) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    for name in sorted(allowed):
        value = call.q(name)
        if value is not None:
            where.append(name + "=?")
            params.append(value)
    return where, params


def _select(store: Store, head: str, clauses: list[str], params: list[Any]) -> list[dict]:
    # Only column names from fixed allow-lists are spliced in; every value is a bound parameter.
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    return store.query(head + where + " ORDER BY id", params)
