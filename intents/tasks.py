"""django-q2 entry points. Each takes ids, loads rows and calls the sending worker; each is safe to run twice
or concurrently on several clusters: the intents table, not the queue, says what is due."""

from __future__ import annotations

import logging
import math
import time

from django.conf import settings
from django.db import connection

from config.clock import db_now
from intents.events.delivery import deliver_due, due_endpoint_ids
from intents.events.outbox import wake_delivery
from intents.models import Broadcast, SendIntent
from intents.retention import api_idempotency_purge, api_rate_windows_purge
from intents.sending.fanout import broadcast_run, broadcasts_sweep
from intents.sending.sweep import (
    due_intent_ids,
    intents_expire_not_after,
    intents_release_expired_leases,
    seconds_until_next_due,
)
from intents.sending.worker import run_once, run_rounds, worker_id
from intents.services import draft_expire_due
from intents.services.assignment import (
    drafts_release_lapsed_claims,
    drafts_release_undecidable_holds,
)
from intents.services.deadlines import drafts_escalate_due, drafts_warn_due
from intents.services.presence import presence_purge
from tenants.once_forms import form_receipts_purge

log = logging.getLogger("intents.tasks")

WAKE_LIMIT = 200


def execute_intent(intent_id: int) -> int:
    """Send (or reconcile) this one intent if it is due and unclaimed; otherwise do nothing."""
    return run_once(limit=1, intent_id=int(intent_id))


# Longer undo windows are left to the sweep (django-q2's task timeout is 120 s by default).
HOLD_WAIT_LIMIT = 60.0


def execute_intent_after_hold(intent_id: int) -> int:
    """Wait (database clock) for this intent's undo window to end, then send it if it is still
    queued. An undo during the wait leaves nothing to send; a window longer than
    HOLD_WAIT_LIMIT is left to the sweep, which wakes workers for every due intent."""
    for _ in range(3):
        row = (
            SendIntent.objects.filter(pk=int(intent_id), state=SendIntent.State.QUEUED)
            .values_list("hold_until", flat=True)
            .first()
        )
        if row is None:
            return 0
        left = (row - db_now()).total_seconds() if row else 0.0
        if left > HOLD_WAIT_LIMIT:
            return 0
        if left <= 0:
            return execute_intent(intent_id)
        # Close this connection while sleeping: a held approval must not pin one.
        connection.close()
        time.sleep(left + 0.05)
    return execute_intent(intent_id)


def drain(max_intents: int = 100) -> int:
    """Work through due intents until none is left or the budget is spent (the next batch
    claimed while the calls of the one before it are at the provider: ``run_rounds``)."""
    return run_rounds(worker=worker_id(), limit=settings.SEND_BATCH_SIZE, most=max_intents)


def sweep(budget_seconds: float = 50.0) -> int:
    """The scheduled safety net (safe on every cluster at once).

    django-q2 schedules in whole minutes, so one run keeps sweeping every SWEEP_INTERVAL_SECONDS
    while something (a retry, a reconciliation, a lease) falls due within its budget, and returns
    at once when the queue is idle, so it does not hold a worker for nothing.
    """
    started = time.monotonic()
    rounds = 0
    while True:
        sweep_once()
        rounds += 1
        remaining = budget_seconds - (time.monotonic() - started)
        wait = seconds_until_next_due()
        if wait is None or wait > remaining:
            return rounds
        time.sleep(max(wait, min(1.0, settings.SWEEP_INTERVAL_SECONDS)))


def serve_replies() -> int:
    """One round of reply sends (never a broadcast's), between the pages of a long broadcast job.

    The queue is first in, first out and its workers are few (Q_WORKERS, 2 by default): while
    one runs a fan-out and another the sweep, a reply's own ``execute_intent`` task waits in the
    queue. The round sends that reply from inside the long job instead. ``drain`` needs none:
    its every claim takes due replies before broadcast sends."""
    return run_once(limit=settings.SEND_BATCH_SIZE, replies_only=True)


def fan_out_broadcast(broadcast_id: int) -> None:
    """The fan-out of an approved broadcast (and its cancellation or completion), with a round
    of reply sends after each page; safe to run twice: pages are guarded by the broadcast's row
    lock and its position. Inside the broadcast's undo window it first waits (database clock)
    for its end, as ``execute_intent_after_hold`` does; a window longer than HOLD_WAIT_LIMIT is
    left to the sweep."""
    held_until = (
        Broadcast.objects.filter(
            pk=int(broadcast_id),
            state__in=(Broadcast.State.APPROVED, Broadcast.State.FANNING_OUT),
        )
        .values_list("hold_until", flat=True)
        .first()
    )
    left = (held_until - db_now()).total_seconds() if held_until else 0.0
    if left > HOLD_WAIT_LIMIT:
        return
    if left > 0:
        # Close this connection while sleeping: a held approval must not pin one.
        connection.close()
        time.sleep(left + 0.05)
    broadcast_run(broadcast_id, between=serve_replies)


def sweep_once() -> dict[str, int]:
    report = {
        "leases_released": intents_release_expired_leases(),
        "intents_expired": intents_expire_not_after(),
        "drafts_expired": draft_expire_due(),
        "claims_lapsed": drafts_release_lapsed_claims(),
        "holds_released": drafts_release_undecidable_holds(),
        "sla_warned": drafts_warn_due(),
        "sla_breached": drafts_escalate_due(),
        "idempotency_keys_purged": api_idempotency_purge(),
        "api_rate_windows_purged": api_rate_windows_purge(),
        "broadcasts_run": broadcasts_sweep(between=serve_replies),
    }
    report["agent_event_endpoints_due"] = _wake_agent_events()
    queued, uncertain = due_intent_ids(limit=WAKE_LIMIT)
    report["due_queued"] = len(queued)
    report["due_uncertain"] = len(uncertain)
    _wake(queued, uncertain)
    if any(report.values()):
        log.info("intents.sweep.done", extra=report)
    return report


def _wake(queued: list[int], uncertain: list[int]) -> None:
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    workers = int(settings.Q_CLUSTER.get("workers", 2))
    if "orm" in settings.Q_CLUSTER and OrmQ.objects.count() >= 2 * workers:
        # Workers are already behind on wake-ups; more of them would only pile up.
        return
    drains = min(workers, math.ceil(len(queued) / settings.SEND_BATCH_SIZE))
    try:
        for _ in range(drains):
            async_task("intents.tasks.drain", task_name="intents-drain")
        for intent_id in uncertain:
            async_task("intents.tasks.execute_intent", intent_id, task_name=f"intent-{intent_id}")
    except Exception:
        # The broker is down or cut off (Redis timeouts): wake-ups are only a hint. A sender that
        # sweeps goes on to claim the due intents itself; raising here killed its threads.
        log.exception("intents.sweep.wake_failed", extra={"queued": len(queued)})


def deliver_agent_events(limit: int = 200) -> int:
    """Deliver due agent events (woken on commit by the outbox and by the sweep)."""
    return deliver_due(limit=int(limit))


def _wake_agent_events() -> int:
    due = due_endpoint_ids(limit=WAKE_LIMIT)
    if due:
        # Guarded like the intents' wake-ups: a broker that is down must not end the sweep.
        wake_delivery(due)
    return len(due)


def retention_purge() -> int:
    """Daily: empty draft and broadcast bodies past each tenant's retention, with the attachment
    bytes only purged drafts name (webhooks purge their own payloads); forget presence rows and
    the shown-once forms' receipts past their own fixed retention."""
    from intents.retention import (
        attachment_bytes_purge,
        broadcast_bodies_purge,
        draft_bodies_purge,
        purged_drafts_events_purge,
    )

    total = 0
    while step := draft_bodies_purge():
        total += step
    while attachment_bytes_purge():
        pass
    while broadcast_bodies_purge():
        pass
    purged_drafts_events_purge()
    presence_purge()
    form_receipts_purge()
    return total
