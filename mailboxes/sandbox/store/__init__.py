"""SQLite-backed state of the sandbox, one module per resource as in the real API.

`Store` is the core (connection, lock, clock, config: `core.py`) plus one attribute per
resource: `pods`, `inboxes`, `keys` (API keys and identities), `messages` (and threads, inbound
mail), `idempotency`, `sends` (the ledger, suppressions, triggered events), `events`,
`webhooks` (and their deliveries) and `requests` (the request log).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

from ..records import dumps
from .core import DEFAULT_CONFIG, Core
from .events import Events
from .idempotency import IdempotencyKeys
from .inboxes import Inboxes
from .keys import ApiKeys
from .messages import Messages
from .pods import Pods
from .requests import RequestLog
from .schema import WIPED_TABLES
from .sends import Sends
from .webhooks import Webhooks

__all__ = ["Store"]


class Store(Core):
    def __init__(self, path: str, org_key: str, on_enqueue: Callable[[], None] | None = None):
        super().__init__(path, on_enqueue)
        self.pods = Pods(self)
        self.inboxes = Inboxes(self)
        self.keys = ApiKeys(self, org_key)
        self.webhooks = Webhooks(self)
        self.events = Events(self, self.webhooks)
        self.messages = Messages(self, self.events)
        self.idempotency = IdempotencyKeys(self)
        self.sends = Sends(self, self.messages, self.events, self.idempotency)
        self.requests = RequestLog(self)
        with self.lock:
            self.organization_id = self.meta("organization_id") or str(uuid.uuid4())
            self.set_meta("organization_id", self.organization_id)
            # AgentMail's default pod shares the organization's id [U in the reference notes].
            self.default_pod_id = self.organization_id
            self.pods.ensure(self.default_pod_id)
            self.idempotency.fail_interrupted()
            self.webhooks.requeue_inflight()

    def reset(self) -> None:
        with self.lock, self.tx():
            for table in WIPED_TABLES:
                self.db.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
            self.clock_offset = 0.0
            self.config = dict(DEFAULT_CONFIG)
            self.set_meta("clock_offset", "0.0")
            self.set_meta("config", dumps(self.config))
            self.pods.ensure(self.default_pod_id)
            self.keys.forget()

    def delete_inbox(self, inbox_id: str) -> None:
        """Delete the inbox with what lives in it (reference §2.3: messages, threads, drafts)
        and what is scoped to it (its keys and webhooks). The ledger keeps what it sent, the
        idempotency keys stay the organization's, and its client_id stays taken by it."""
        with self.lock, self.tx():
            self._delete_inbox(inbox_id)
            self.keys.forget()

    def delete_pod(self, pod_id: str) -> bool:
        """Delete the pod with its keys and webhooks; False (nothing deleted) while it holds
        inboxes (AgentMail's 409 ``cannot_delete``, reference §2.2)."""
        with self.lock, self.tx():
            if self.db.execute("SELECT 1 FROM inboxes WHERE pod_id=?", (pod_id,)).fetchone():
                return False
            row = self.db.execute("SELECT doc FROM pods WHERE pod_id=?", (pod_id,)).fetchone()
            self._bury("pod", row[0])
            self.db.execute("DELETE FROM pods WHERE pod_id=?", (pod_id,))
            self.db.execute("DELETE FROM api_keys WHERE pod_id=?", (pod_id,))
            self._delete_webhooks("pod_id", pod_id)
            self.keys.forget()
        return True

    def _delete_inbox(self, inbox_id: str) -> None:
        row = self.db.execute("SELECT doc FROM inboxes WHERE inbox_id=?", (inbox_id,)).fetchone()
        self._bury("inbox", row[0])
        for table in ("inboxes", "messages", "message_labels", "message_attachments", "api_keys"):
            self.db.execute(f"DELETE FROM {table} WHERE inbox_id=?", (inbox_id,))  # noqa: S608
        self._delete_webhooks("inbox_id", inbox_id)

    def _bury(self, kind: str, doc: str) -> None:
        client_id = json.loads(doc).get("client_id")
        if client_id:
            self.db.execute(
                "INSERT OR REPLACE INTO deleted_objects (kind, client_id, doc) VALUES (?, ?, ?)",
                (kind, client_id, doc),
            )

    def _delete_webhooks(self, owner: str, owner_id: str) -> None:
        """The webhooks that belong to the pod or inbox (``owner``: the document's field that
        says so), with their pending deliveries."""
        for hook in self.webhooks.all():
            if hook.get(owner) == owner_id:
                self.db.execute("DELETE FROM webhooks WHERE webhook_id=?", (hook["webhook_id"],))
                self.db.execute(
                    "UPDATE deliveries SET status='cancelled' "
                    "WHERE webhook_id=? AND status='pending'",
                    (hook["webhook_id"],),
                )
