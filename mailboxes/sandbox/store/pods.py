"""Pods (`/v0/pods`), with AgentMail's default pod."""

from __future__ import annotations

import json
import uuid

from ..records import Page, dumps, iso
from .core import Resource


class Pods(Resource):
    def ensure(self, pod_id: str) -> None:
        """Create the default pod unless it exists (inside the caller's lock)."""
        if self.db.execute("SELECT 1 FROM pods WHERE pod_id=?", (pod_id,)).fetchone():
            return
        now = iso(self.core.now())
        doc = {
            "pod_id": pod_id,
            "name": "Default Pod",
            "created_at": now,
            "updated_at": now,
        }
        self.db.execute("INSERT INTO pods (pod_id, doc) VALUES (?, ?)", (pod_id, dumps(doc)))

    def create(self, *, name: str | None, client_id: str | None) -> dict:
        with self.lock, self.core.tx():
            if client_id:
                row = self.db.execute(
                    "SELECT doc FROM pods WHERE client_id=?", (client_id,)
                ).fetchone()
                if row is None:
                    row = self.core.deleted_with_client_id("pod", client_id)
                if row:
                    return json.loads(row[0])
            now = iso(self.core.now())
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

    def get(self, pod_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute("SELECT doc FROM pods WHERE pod_id=?", (pod_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def page(self, *, only: str | None, limit: int, token: str | None, asc: bool) -> Page:
        where, params = ([], []) if only is None else (["pod_id=?"], [only])
        return self.core.page("pods", where, params, limit, token, asc)
