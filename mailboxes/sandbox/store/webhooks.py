"""Webhooks (`/v0/webhooks` and the pod and inbox routes) and their queued deliveries (§8.4)."""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Callable

from ..records import Page, dumps, iso
from .core import Resource


class Webhooks(Resource):
    def all(self) -> list[dict]:
        return [json.loads(r[0]) for r in self.db.execute("SELECT doc FROM webhooks ORDER BY seq")]

    def create(self, *, spec: dict, headers: dict[str, str]) -> dict:
        with self.lock, self.core.tx():
            client_id = spec.get("client_id")
            if client_id:
                row = self.db.execute(
                    "SELECT doc FROM webhooks WHERE client_id=?", (client_id,)
                ).fetchone()
                if row:
                    return json.loads(row[0])
            now = iso(self.core.now())
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

    def get(self, webhook_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM webhooks WHERE webhook_id=?", (webhook_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def page(self, *, predicate: Callable[[dict], bool], limit: int, token: str | None) -> Page:
        page = self.core.page("webhooks", [], [], 10_000, token, False)
        items = [w for w in page.items if predicate(w)]
        return Page(items=items[:limit], next_token=None)

    def save(self, doc: dict, *, reenabled: bool) -> dict:
        doc["updated_at"] = iso(self.core.now())
        with self.lock, self.core.tx():
            self.db.execute(
                "UPDATE webhooks SET doc=?, failures=CASE WHEN ? THEN 0 ELSE failures END "
                "WHERE webhook_id=?",
                (dumps(doc), reenabled, doc["webhook_id"]),
            )
        return doc

    def delete(self, webhook_id: str) -> None:
        with self.lock, self.core.tx():
            self.db.execute("DELETE FROM webhooks WHERE webhook_id=?", (webhook_id,))
            self.db.execute(
                "UPDATE deliveries SET status='cancelled' WHERE webhook_id=? AND status='pending'",
                (webhook_id,),
            )

    # -- deliveries -------------------------------------------------------------------------

    def requeue_inflight(self) -> None:
        """Deliveries a dead process had in flight are due again."""
        self.db.execute("UPDATE deliveries SET status='pending' WHERE status='inflight'")

    def claim_due_deliveries(self, limit: int = 64) -> tuple[list[dict], float | None]:
        """Mark due deliveries in flight and return them, plus when the next one falls due."""
        now = time.time()
        if not self.core.config["webhooks_enabled"]:
            return [], now + 0.2
        with self.lock, self.core.tx():
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
        schedule = list(self.core.config["webhook_retry_schedule"])
        attempts = delivery["attempts"] + 1
        with self.lock, self.core.tx():
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
                self._count_failure(delivery["webhook_id"])

    def _count_failure(self, webhook_id: str) -> None:
        row = self.db.execute(
            "UPDATE webhooks SET failures = failures + 1 WHERE webhook_id=? RETURNING failures, doc",
            (webhook_id,),
        ).fetchone()
        if row is None or row[0] < int(self.core.config["webhook_disable_after"]):
            return
        doc = json.loads(row[1])
        if not doc["enabled"]:
            return
        doc["enabled"] = False
        doc["updated_at"] = iso(self.core.now())
        self.db.execute("UPDATE webhooks SET doc=? WHERE webhook_id=?", (dumps(doc), webhook_id))
        # Svix drops what a disabled endpoint had queued; re-enabling does not redeliver.
        self.db.execute(
            "UPDATE deliveries SET status='cancelled' WHERE webhook_id=? AND status='pending'",
            (webhook_id,),
        )
