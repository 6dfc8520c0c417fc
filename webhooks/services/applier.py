"""The batch applier: events the receiver stored (``pending``) are applied here, in batches.

Store first, apply after (as Sentry and Stripe do): the receiver only verifies and inserts the
ledger row, so its answer never waits for delivery state, suppressions, inbound mail or holds.
``events_apply_batch`` takes up to a batch of pending events with ``FOR UPDATE SKIP LOCKED``,
oldest first, and applies them in that order (so in order per message) in one transaction, then
marks them. A batch is all or nothing: an applier that dies mid-batch rolls back and leaves every
event of it pending for the next one, and two appliers never hold the same event.

Who runs it:

- ``applier_wake``, on the receiver's commit, enqueues the django-q2 task ``apply_pending`` (at most
  one per process per ``WAKE_INTERVAL``; the task drains until it has seen the ledger empty at least
  ``WAKE_INTERVAL`` after it started, so an event whose wake was skipped is still taken);
- ``manage.py webhooks_apply`` (a loop, for deployments that want the lowest lag without the queue);
- the sweep (``webhooks.tasks.replay_pending``, every minute), whatever the others left.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, connections, transaction
from psycopg.errors import LockNotAvailable

from intents.services.intents import intents_lock_threads
from webhooks.models import WebhookEvent
from webhooks.normalize import DELIVERY_KINDS, Kind, normalize
from webhooks.services.apply import (
    UNAPPLIED,
    _apply,
    _find_many,
    _finish_many,
    _message_lock_key,
    closed_unapplied,
    event_apply,
    with_suppressed,
)
from webhooks.services.deliveries import DeliveryPlan
from webhooks.services.suppressing import SuppressionPlan

log = logging.getLogger("webhooks.services")

State = WebhookEvent.State
APPLY_BATCH_SIZE = 200
# A batch that has to wait this long for a message lock (a worker recording that message, a
# holder elsewhere) gives up and is retried; the events stay pending.
APPLY_LOCK_TIMEOUT_MS = 2000
WAKE_INTERVAL = 0.05
# One woken task drains at most this long, then hands over to a fresh task (queue fairness).
DRAIN_SECONDS = 20.0

_wake_lock = threading.Lock()
_last_wake = -WAKE_INTERVAL


def events_apply_batch(*, limit: int = APPLY_BATCH_SIZE) -> tuple[int, int]:
    """Apply up to ``limit`` pending events in one transaction; returns (taken, finished).

    ``finished`` counts the events that left ``pending`` (applied, ignored, rejected, or
    ``deferred`` until their message id is recorded). If the batch fails as a whole (a lock wait
    past ``APPLY_LOCK_TIMEOUT_MS``, a deadlock, an unexpected error), it is rolled back and its
    events are applied one by one, each in its own transaction, so one bad event does not hold
    back the others.
    """
    taken: list[int] = []
    try:
        with transaction.atomic():
            events = _take_pending(limit)
            taken = [event.pk for event in events]
            if not events:
                return 0, 0
            prepared = [
                (e, normalize(e.payload) if e.payload is not None else None) for e in events
            ]
            _lock_messages(
                _message_lock_key(e.tenant_id, n.message_id)
                for e, n in prepared
                if n is not None and n.kind in DELIVERY_KINDS and n.message_id
            )
            # Their mailboxes and intents in one statement, after the message locks; applied in
            # order; their ledger rows and journal rows written in one statement.
            found = _find_many(
                [(e, n) for e, n in prepared if n is not None and n.kind is not Kind.OTHER]
            )
            # The threads its received messages name, all locked now in id order (drafts, then
            # queued sends), not message by message in the order they came.
            intents_lock_threads(
                (found[e.pk][0], n.thread_id)
                for e, n in prepared
                if n is not None and n.kind is Kind.RECEIVED and e.pk in found
            )
            # Their intents' recipient rows, locked, advanced event by event, written once.
            deliveries = DeliveryPlan().load(sent.intent_id for _, sent in found.values() if sent)
            # Their suppressions, written after everything else but the ledger and journal rows:
            # intents first, suppressions last, as the console and the worker take them.
            suppressions = SuppressionPlan()
            purged = closed_unapplied([e for e, n in prepared if n is None])
            outcomes = [
                (
                    event,
                    purged[event.pk]
                    if normalized is None
                    else _apply(event, normalized, found.get(event.pk), deliveries, suppressions),
                )
                for event, normalized in prepared
            ]
            deliveries.write()
            suppressions.write()
            states = _finish_many(
                [(e, with_suppressed(o, suppressions.changed_of(e))) for e, o in outcomes]
            )
            finished = sum(1 for state in states if state != State.PENDING)
    except Exception as exc:
        if not taken:
            raise
        _log_batch_failure(exc, len(taken))
        return len(taken), sum(1 for pk in taken if _apply_alone(pk))
    log.info("webhooks.batch.applied", extra={"taken": len(taken), "finished": finished})
    return len(taken), finished


def _apply_alone(event_id: int) -> bool:
    """One event of a failed batch in its own transaction; whether it left ``pending``."""
    try:
        return event_apply(event_id=event_id, lock_timeout_ms=APPLY_LOCK_TIMEOUT_MS) not in (
            "",
            *UNAPPLIED,
        )
    except Exception as exc:
        _log_batch_failure(exc, 1)
        return False


def events_apply_pending(
    *,
    settle: float = WAKE_INTERVAL,
    max_seconds: float = DRAIN_SECONDS,
    limit: int = APPLY_BATCH_SIZE,
) -> int:
    """Apply batches until the ledger has no pending event, and has been seen so at least
    ``settle`` seconds after we started; returns how many events were finished.

    Unlike ``events_apply_loop`` it looks again at once after a partial batch, and returns as
    soon as it has seen the ledger empty: it runs in the django-q2 cluster, whose few workers
    also send, so it gives its worker back rather than wait for more of a slow stream (the next
    receiver commit wakes a new task)."""
    started = time.monotonic()
    total = 0
    while True:
        taken, finished = events_apply_batch(limit=limit)
        total += finished
        elapsed = time.monotonic() - started
        if elapsed >= max_seconds:
            if taken:
                applier_wake(force=True)
            return total
        if taken and finished:
            continue
        if elapsed >= settle:
            return total
        time.sleep(settle - elapsed)


def events_apply_loop(
    *, stop: threading.Event, interval: float = 0.1, limit: int = APPLY_BATCH_SIZE
) -> int:
    """The dedicated applier: full batches back to back while there is a backlog, else a look
    every ``interval``.

    After a partial batch it waits too: each batch is a transaction and a commit whatever its
    size, and under a steady stream of deliveries looking again at once meant batches of one or
    two events, back to back (measured: 0.6 ms of applier CPU per event under load against 0.16
    for full batches). Waiting gathers about ``interval`` of events per batch, and adds at most
    ``interval`` to an event's apply lag.

    A lost database (a restart, a failover, a killed backend) is waited out, as the send
    worker's loop does, backing off while it lasts: the loop died on it, and no event was
    applied until someone started it again. A batch it interrupted committed nothing.
    """
    total = 0
    outage = 0
    while not stop.is_set():
        try:
            taken, finished = events_apply_batch(limit=limit)
        except (OperationalError, InterfaceError) as exc:
            outage += 1
            log.warning(
                "webhooks.applier.database_unavailable",
                extra={"error": type(exc).__name__, "streak": outage},
            )
            connections.close_all()
            stop.wait(min(5.0, 0.2 * 2**outage))
            continue
        outage = 0
        total += finished
        if taken < limit or not finished:
            stop.wait(interval)
    return total


def applier_wake(*, force: bool = False) -> None:
    """Wake an applier (django-q2). Losing a wake is harmless: the sweep applies what is left.
    Nothing to do where ``WEBHOOK_APPLY_WAKE`` is off (a dedicated loop applies)."""
    global _last_wake
    if not settings.WEBHOOK_APPLY_WAKE:
        return
    now = time.monotonic()
    with _wake_lock:
        if not force and now - _last_wake < WAKE_INTERVAL:
            return
        _last_wake = now
    try:
        from django_q.tasks import async_task

        async_task("webhooks.tasks.apply_pending", task_name="webhooks-apply")
    except Exception:
        log.exception("webhooks.applier.wake_failed")


def _take_pending(limit: int) -> list[WebhookEvent]:
    """Lock up to ``limit`` pending events, oldest first, skipping those another applier holds.
    Those whose apply raised before come after all that failed fewer times (``failures``):
    oldest first alone, a batch's worth of them was every batch's, for ever. An event that
    failed is then applied after newer ones of its message, which delivery state allows (it
    only moves forward, whatever the order).

    Raw SQL: the ORM's compile cost and five model fields per row are most of a batch's CPU.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, endpoint_id, tenant_id, svix_id, event_type, message_id, received_at, "  # noqa: S608
            f"payload FROM {WebhookEvent._meta.db_table} WHERE state = %s "
            "ORDER BY apply_failures, received_at, id LIMIT %s FOR UPDATE SKIP LOCKED",
            [State.PENDING, limit],
        )
        rows = cursor.fetchall()
    return [
        WebhookEvent(
            pk=pk,
            endpoint_id=endpoint_id,
            tenant_id=tenant_id,
            svix_id=svix_id,
            event_type=event_type,
            message_id=message_id,
            received_at=received_at,
            state=State.PENDING,
            # Django reads jsonb as text (its psycopg setup) and leaves decoding to the field.
            payload=json.loads(payload) if isinstance(payload, str) else payload,
        )
        for pk, endpoint_id, tenant_id, svix_id, event_type, message_id, received_at, payload in rows
    ]


def _lock_messages(keys: Iterable[str]) -> None:
    """The lock timeout, then (one statement) the message locks of the batch's delivery events, sorted (two
    batches never wait for each other in a cycle), in one statement that completes before any
    intent is read: an intent committed while we waited is seen (see ``apply._lock_message``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('lock_timeout', %s, true)", [f"{APPLY_LOCK_TIMEOUT_MS}ms"]
        )
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) "
            "FROM (SELECT unnest(%s::text[]) AS k ORDER BY 1) AS keys",
            [sorted(set(keys))],
        )


def _log_batch_failure(exc: Exception, taken: int) -> None:
    if isinstance(exc, OperationalError) and isinstance(exc.__cause__, LockNotAvailable):
        log.warning("webhooks.event.apply_postponed", extra={"taken": taken})
    else:
        log.error("webhooks.batch.failed", exc_info=exc, extra={"taken": taken})
