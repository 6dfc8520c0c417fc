"""Inboxes (`/v0/inboxes`, `/v0/pods/{pod_id}/inboxes`)."""

from __future__ import annotations

import json
import random
from typing import Any

from ..errors import ApiError
from ..records import Page, dumps, iso
from .core import Resource

ADJECTIVES = ("brisk", "calm", "eager", "gentle", "lucky", "quiet", "rapid", "sunny", "witty")
NOUNS = ("otter", "falcon", "maple", "harbor", "comet", "meadow", "lantern", "pebble", "river")
# reference/agentmail-api.md §2.3: at most 256 keys, 256 characters per key or string value.
MAX_METADATA_KEYS = 256
MAX_METADATA_LENGTH = 256


class Inboxes(Resource):
    def find_by_client_id(self, client_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM inboxes WHERE client_id=?", (client_id,)
            ).fetchone() or self.core.deleted_with_client_id("inbox", client_id)
        return json.loads(row[0]) if row else None

    def create(
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
        with self.lock, self.core.tx():
            if client_id:
                row = self.db.execute(
                    "SELECT doc FROM inboxes WHERE client_id=?", (client_id,)
                ).fetchone() or self.core.deleted_with_client_id("inbox", client_id)
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
            now = iso(self.core.now())
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

    def get(self, inbox_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM inboxes WHERE inbox_id=?", (inbox_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def update(self, inbox_id: str, changes: dict[str, Any]) -> dict | None:
        """Apply a validated PATCH to the inbox (None if it does not exist). ``display_name`` ""
        or None removes the name; ``status`` "active" removes the status; ``metadata`` None
        clears it, a dict is merged (a None value removes its key)."""
        with self.lock, self.core.tx():
            row = self.db.execute(
                "SELECT doc FROM inboxes WHERE inbox_id=?", (inbox_id,)
            ).fetchone()
            if row is None:
                return None
            doc = json.loads(row[0])
            if "display_name" in changes:
                _set_or_drop(doc, "display_name", changes["display_name"] or None)
            if "status" in changes:
                _set_or_drop(doc, "status", None if changes["status"] == "active" else "paused")
            if "metadata" in changes:
                doc["metadata"] = merged_metadata(doc.get("metadata"), changes["metadata"])
                if len(doc["metadata"]) > MAX_METADATA_KEYS:
                    raise ApiError.validation(
                        f"metadata may hold at most {MAX_METADATA_KEYS} keys", ["metadata"]
                    )
                if not doc["metadata"]:
                    del doc["metadata"]
            doc["updated_at"] = iso(self.core.now())
            self.db.execute("UPDATE inboxes SET doc=? WHERE inbox_id=?", (dumps(doc), inbox_id))
            return doc

    def page(
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
        return self.core.page("inboxes", where, params, limit, token, asc)

    def ids_in_pod(self, pod_id: str) -> list[str]:
        with self.lock:
            rows = self.db.execute("SELECT inbox_id FROM inboxes WHERE pod_id=?", (pod_id,))
            return [r[0] for r in rows]


def merged_metadata(current: dict | None, change: dict | None) -> dict:
    """AgentMail's PATCH semantics: None clears everything, otherwise keys are merged and a key
    set to None is removed (reference/agentmail-api.md §2.3)."""
    if change is None:
        return {}
    out = dict(current or {})
    for key, value in change.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _set_or_drop(doc: dict, name: str, value: Any) -> None:
    # Absent optional fields are omitted, never null (reference §8.1, JSON output).
    if value is None:
        doc.pop(name, None)
    else:
        doc[name] = value
