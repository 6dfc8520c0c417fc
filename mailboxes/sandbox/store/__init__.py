"""SQLite-backed state of the sandbox, one module per resource as in the real API.

`Store` is the core (connection, lock, clock, config: `core.py`) plus one attribute per
resource: `pods`, `inboxes`, `keys` (API keys and identities), `messages` (and threads, inbound
mail), `idempotency`, `sends` (the ledger, suppressions, triggered events), `events`,
`webhooks` (and their deliveries) and `requests` (the request log).
"""

from __future__ import annotations

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
