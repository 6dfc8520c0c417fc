"""Bringing a mailbox's display name to AgentMail after a rename.

AgentMail holds the name: it is the phrase of the From header of everything the inbox sends.
``mailbox_update_policy`` stores a new name and, on commit, wakes ``mailboxes.tasks
.sync_display_name``; the sweep (``mailboxes.tasks.sync_display_names``, every minute) takes
what is still pending after a lost wake-up or a failed call, with backoff. ``Mailbox
.provider_display_name`` is the name AgentMail last reported; the mailbox page says so while the
two differ.

One run at a time per mailbox: a run takes a lease on the row (a token and an expiry on the
database clock) before its call and keeps it until it has recorded the answer. Two runs calling
at once could be answered out of order, the older name landing last: AgentMail would keep the
old name while we recorded the new one. A rename during a run leaves the run's lease alone; the
run finds the name changed when it records, and calls again with the latest one. Calls happen
outside any transaction; every write is a conditional UPDATE fenced by the lease token.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Now

from mailboxes import provider
from mailboxes.models import Mailbox

logger = logging.getLogger("mailboxes.display_names")

# Longer than MAX_ROUNDS calls, each bounded by AGENTMAIL_CONNECT_TIMEOUT + READ_TIMEOUT (18 s).
SYNC_LEASE = timedelta(minutes=2)
# Renames that land during a run are followed this many times by the run; then the sweep.
MAX_ROUNDS = 3
BACKOFF_BASE_SECONDS = 30.0
BACKOFF_CAP_SECONDS = 3600.0
# The sweep's bounds per run (django-q2's task timeout is 120 s): a provider that does not
# answer costs each mailbox up to MAX_ROUNDS timed-out calls.
SWEEP_LIMIT = 20
SWEEP_BUDGET_SECONDS = 45.0


@dataclass(frozen=True)
class _Leased:
    display_name: str
    provider_display_name: str
    inbox_id: str
    pod_id: str


def display_name_sync_wake(mailbox_id: int) -> None:
    """Queue the sync of this mailbox's name (on the commit of a rename). Losing it is harmless:
    the sweep finds every mailbox whose name AgentMail does not hold yet."""
    try:
        from django_q.tasks import async_task

        async_task(
            "mailboxes.tasks.sync_display_name",
            mailbox_id,
            task_name=f"mailbox-name-{mailbox_id}",
        )
    except Exception:
        logger.exception("mailboxes.display_name.wake_failed", extra={"mailbox_id": mailbox_id})


def _pending() -> QuerySet[Mailbox]:
    """Mailboxes with an inbox whose name AgentMail does not hold yet."""
    return Mailbox.objects.exclude(inbox_id="").exclude(display_name=F("provider_display_name"))


def _free() -> Q:
    """No run holds the mailbox (or its lease ran out) and no backoff is running."""
    return Q(display_name_sync_not_before__isnull=True) | Q(display_name_sync_not_before__lte=Now())


def mailbox_sync_display_name(*, mailbox_id: int) -> bool:
    """Bring AgentMail to the mailbox's current display name and record it; True when this run
    recorded a name AgentMail confirmed. Does nothing (False) when nothing is pending, another
    run holds the mailbox, or the backoff after a failure has not passed. Safe to run twice."""
    token = uuid.uuid4()
    claimed = (
        _pending()
        .filter(_free(), pk=mailbox_id)
        .update(display_name_sync_token=token, display_name_sync_not_before=Now() + SYNC_LEASE)
    )
    if not claimed:
        return False
    try:
        for _ in range(MAX_ROUNDS):
            leased = _leased(mailbox_id, token)
            if leased is None or leased.display_name == leased.provider_display_name:
                return False
            try:
                if not leased.pod_id:
                    raise provider.ProviderError("The tenant has no AgentMail pod", code="no_pod")
                sent = provider.update_inbox_display_name(
                    pod_id=leased.pod_id,
                    inbox_id=leased.inbox_id,
                    display_name=leased.display_name,
                )
            except provider.ProviderError as exc:
                _sync_failed(mailbox_id=mailbox_id, token=token, error=exc)
                return False
            if _sync_confirm(mailbox_id=mailbox_id, token=token, sent=sent):
                return True
        return False
    finally:
        _sync_release(mailbox_id=mailbox_id, token=token)


def _leased(mailbox_id: int, token: uuid.UUID) -> _Leased | None:
    """What the run holding ``token`` is to send, or None when it no longer holds the lease."""
    row = (
        Mailbox.objects.filter(pk=mailbox_id, display_name_sync_token=token)
        .values_list(
            "display_name",
            "provider_display_name",
            "inbox_id",
            "tenant__agentmail_pod_id",
        )
        .first()
    )
    return _Leased(*row) if row else None


def _sync_confirm(*, mailbox_id: int, token: uuid.UUID, sent: str) -> bool:
    """Record that AgentMail holds ``sent``, if the mailbox is still named so (a rename since
    wins: the run goes on with it) and the run still holds its lease; releases the lease."""
    with transaction.atomic():
        recorded = Mailbox.objects.filter(
            pk=mailbox_id, display_name_sync_token=token, display_name=sent
        ).update(
            provider_display_name=sent,
            display_name_sync_token=None,
            display_name_sync_not_before=None,
            display_name_sync_failures=0,
        )
    if recorded:
        logger.info("mailboxes.display_name.applied", extra={"mailbox_id": mailbox_id})
    return bool(recorded)


def _sync_failed(*, mailbox_id: int, token: uuid.UUID, error: provider.ProviderError) -> None:
    """Release the lease with a backoff before the next run: exponential with jitter for what
    may pass (the provider's Retry-After as a floor), the cap at once for a refused request."""
    with transaction.atomic():
        failures = (
            Mailbox.objects.filter(pk=mailbox_id, display_name_sync_token=token)
            .values_list("display_name_sync_failures", flat=True)
            .first()
        )
        if failures is None:
            return
        failures += 1
        delay = _backoff_seconds(failures, error)
        Mailbox.objects.filter(pk=mailbox_id, display_name_sync_token=token).update(
            display_name_sync_token=None,
            display_name_sync_not_before=Now() + timedelta(seconds=delay),
            display_name_sync_failures=failures,
        )
    logger.warning(
        "mailboxes.display_name.sync_failed",
        extra={
            "mailbox_id": mailbox_id,
            "status": error.status,
            "code": error.code,
            "failures": failures,
            "retry_in_seconds": round(delay),
        },
    )


def _backoff_seconds(failures: int, error: provider.ProviderError) -> float:
    if not error.transient:
        return BACKOFF_CAP_SECONDS
    ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (failures - 1))
    return max(random.uniform(ceiling / 2, ceiling), error.retry_after or 0.0)


def _sync_release(*, mailbox_id: int, token: uuid.UUID) -> None:
    """Give up the lease if the run still holds it (it recorded nothing): due again at once."""
    Mailbox.objects.filter(pk=mailbox_id, display_name_sync_token=token).update(
        display_name_sync_token=None, display_name_sync_not_before=None
    )


def mailboxes_sync_display_names(
    *, limit: int = SWEEP_LIMIT, budget_seconds: float = SWEEP_BUDGET_SECONDS
) -> int:
    """The sweep: sync the names AgentMail does not hold yet, those due longest first, at most
    ``limit`` mailboxes and no new one after ``budget_seconds``; safe on several clusters at
    once (each run leases its mailbox). Returns how many names were confirmed."""
    due = list(
        _pending()
        .filter(_free())
        .order_by(F("display_name_sync_not_before").asc(nulls_first=True), "pk")
        .values_list("pk", flat=True)[:limit]
    )
    started = time.monotonic()
    confirmed = 0
    for mailbox_id in due:
        if time.monotonic() - started > budget_seconds:
            break
        confirmed += mailbox_sync_display_name(mailbox_id=mailbox_id)
    return confirmed
