"""The bounds of one backfill run (``webhooks.services.backfill``): its report, and the provider
calls it may still make, per key and per run, paced per key, begun only inside the run's window."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.conf import settings


@dataclass
class BackfillReport:
    mailboxes: int = 0
    calls: int = 0
    deliveries: int = 0
    inbound: int = 0
    errors: int = 0
    limited: list[int] = field(default_factory=list)  # mailbox ids cut short by the bounds
    # Tenant ids skipped because another run was asking about them (``backfill_lease``).
    skipped_tenants: list[int] = field(default_factory=list)
    # What AgentMail answered instead, one line per failed call, for whoever ran the command.
    problems: list[str] = field(default_factory=list)


def run_window() -> float:
    """Seconds after a run starts during which it may begin provider calls: each may last a
    connect and a read timeout, and all must end inside the task's time limit (``Q_TIMEOUT``, a
    tenth to spare). Behind an inbox answering each page in seconds, a run was killed at the
    limit, at the same place every time: the tenants after it were never asked."""
    limit = float(settings.Q_CLUSTER.get("timeout", 120))
    call = float(settings.AGENTMAIL_CONNECT_TIMEOUT) + float(settings.AGENTMAIL_READ_TIMEOUT)
    return max(0.0, 0.9 * limit - call)


class Budget:
    """Provider calls left for one key and for the run, paced per key, in the run's window."""

    def __init__(self, run_left: int):
        self.run_left = run_left
        self.key_left = 0
        self.last_call = 0.0
        self.made = 0
        self.closes = time.monotonic() + run_window()

    def run_over(self) -> bool:
        return self.run_left <= 0 or (self.made > 0 and time.monotonic() >= self.closes)

    def for_key(self) -> None:
        self.key_left = int(settings.WEBHOOK_BACKFILL_CALLS_PER_KEY)
        self.last_call = 0.0

    def take(self) -> bool:
        if self.run_left <= 0 or self.key_left <= 0:
            return False
        rate = float(settings.WEBHOOK_BACKFILL_CALLS_PER_SECOND)
        if rate > 0 and self.last_call:
            wait = self.last_call + 1 / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        if self.run_over():
            return False
        self.last_call = time.monotonic()
        self.made += 1
        self.run_left -= 1
        self.key_left -= 1
        return True
