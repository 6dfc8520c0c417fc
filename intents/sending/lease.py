"""What every step of sending shares: the lease a worker holds on an intent (``Claim``), the
attempt it committed under that lease (``Prepared``), the clocks they are judged by, and what an
attempt's outcome adds to the ``/metrics`` counters.

Time for leases comes from the database clock; the safe window is judged by the later of the
database clock and this process's clock (``strict_now``), so neither a lagging host nor a lagging
database can stretch an automatic send past the provider's 24 h deduplication window.
"""

from __future__ import annotations

import math
import os
import random
import socket
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from common.counters import Count, count
from intents.models import Broadcast
from mailboxes import provider


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"[:100]


def broadcast_lets_send() -> Q:
    """A queued intent may be claimed: a reply, or a send of a broadcast that is fanning out or
    sending (a paused or cancelled broadcast's sends are held back: no new provider call)."""
    return Q(broadcast__isnull=True) | Q(broadcast__state__in=Broadcast.SENDABLE)


def broadcast_lets_reconcile() -> Q:
    """An uncertain intent may be reconciled unless its broadcast is paused. A replay with the
    same key performs the first send when the original never reached the provider, and even a
    label lookup is a call with the broadcast's key: paused means no provider call for it at
    all. A cancelled broadcast's uncertain sends are still reconciled, by label lookup only (the
    cancellation is a pre-call problem, and a problem turns a replay into a lookup)."""
    return Q(broadcast__isnull=True) | ~Q(broadcast__state=Broadcast.State.PAUSED)


def mailbox_key_usable() -> Q:
    """An intent's mailbox key may be used: AgentMail has not refused it (mailboxes.key_health).
    The sends of a mailbox whose key was refused wait, queued or uncertain, until an admin shows
    it works: no claim, no call, nothing due for the sweep to wake."""
    return Q(mailbox__key_refused_at__isnull=True)


def lease_duration() -> timedelta:
    return timedelta(seconds=settings.SEND_LEASE_SECONDS)


# The error code of an attempt whose call was not made: its lease would have run out first
# (``worker._call``). Nothing reached AgentMail, so recording it restores the intent's attempt
# count and tells the key's circuit nothing (``record.record_not_called``); its attempt row is
# closed as ``retry`` (and counted so in /metrics) with this code.
CALL_TOO_LATE = "lease_ending"


def call_deadline(leased_at: float) -> float:
    """The latest ``time.monotonic()`` at which a call may start under a lease taken after
    ``leased_at`` (read before the claim's transaction, so the lease's own expiry, from the
    database clock, is later still): late enough for the call to end inside the lease, however
    AgentMail answers (``provider.call_seconds``, a hard bound: ``mailboxes.provider.deadline``).
    A call that could not start by then is not made (``worker._call``): a batch waiting behind
    another on the same call pool (``intents_worker --threads``, the pipelined rounds) must not
    call after its lease ran out, when the sweep may have handed the intent on and a lookup
    counts on every earlier call having started inside its lease
    (``reconcile._earlier_call_in_flight``). A lease shorter than twice a call's timeouts keeps
    its first half."""
    lease = float(settings.SEND_LEASE_SECONDS)
    return leased_at + lease - min(provider.call_seconds(), lease / 2)


def safe_window() -> timedelta:
    return timedelta(seconds=settings.SEND_SAFE_WINDOW_SECONDS)


def strict_now(db: datetime) -> datetime:
    """The later of the database clock and ours: used only to refuse, never to allow."""
    return max(db, timezone.now())


def backoff_seconds(attempts: int, retry_after: float | None = None) -> float:
    """Exponential backoff with full jitter; the provider's Retry-After is a floor."""
    ceiling = min(
        settings.SEND_BACKOFF_CAP_SECONDS,
        settings.SEND_BACKOFF_BASE_SECONDS * (2 ** max(0, attempts - 1)),
    )
    delay = random.uniform(0, ceiling)
    if retry_after is not None:
        delay = max(delay, float(retry_after))
    return delay


@dataclass(frozen=True)
class Claim:
    """A worker's lease on one intent: ``lease_token`` fences every write after the claim."""

    intent_id: int
    lease_token: uuid.UUID
    worker: str
    reconcile: bool = False
    # ``time.monotonic()`` after which this lease's provider call is not started (call_deadline);
    # a claim made elsewhere (the sweep's, a test's) has none.
    call_by: float = math.inf


@dataclass(frozen=True)
class Prepared:
    """One attempt whose row is committed (``precheck.py``): everything its provider call needs,
    so the call itself reads no database."""

    attempt_id: int
    kind: str
    api_key: str
    request: provider.SendRequest | None
    inbox_id: str
    label: str
    key_ref: str
    tenant_id: int
    # A lookup lists the inbox's messages from here when the labelled query finds nothing.
    first_attempt_at: datetime | None = None
    # The mailbox and the AgentMail key id the call uses: a refusal of the key marks them
    # (mailboxes.key_health), and only while the mailbox still has that key.
    mailbox_id: int = 0
    api_key_id: str = ""


def attempt_counts(tenant_id: int, kind: str, outcome: str, http_status: int | None) -> list[Count]:
    """What ``/metrics`` counts when an attempt gets its outcome (once: when it leaves pending)."""
    counts = [count(tenant_id, "attempts", kind=kind, outcome=outcome)]
    if http_status == 429:
        counts.append(count(tenant_id, "provider_429"))
    return counts
