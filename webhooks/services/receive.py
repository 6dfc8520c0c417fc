"""Receiving a webhook event: the ledger row, and applying it in the same transaction.

The receiver calls ``event_receive``: one short transaction that inserts the ledger row
(``UNIQUE(endpoint, svix_id)`` with ``ON CONFLICT DO NOTHING``, so a redelivery changes nothing)
and applies it (``apply._apply``, the apply step). A failure while applying rolls that transaction
back and stores the row alone, ``pending``, for ``apply.events_replay_pending`` (the sweep)
instead of answering 5xx.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import OperationalError, connection, transaction
from django.db.models import Q
from django.db.models.functions import Now
from psycopg.errors import LockNotAvailable

from common.counters import count, counters_add
from webhooks.models import WebhookEndpoint, WebhookEvent
from webhooks.normalize import DELIVERY_KINDS, NormalizedEvent, normalize
from webhooks.services.apply import _apply, _finish, _message_lock_key

# The name of the module this came from: log routing and filters keep working.
log = logging.getLogger("webhooks.services")

State = WebhookEvent.State
ENDPOINT_TOUCH_INTERVAL = timedelta(seconds=60)
APPLY_LOCK_TIMEOUT_MS = 2000


@dataclass(frozen=True)
class Received:
    """What the receiver answers: whether this delivery was new, and the event's state."""

    created: bool
    event_id: int | None
    state: str


def event_store(
    *, tenant, endpoint: WebhookEndpoint, svix_id: str, event: NormalizedEvent
) -> WebhookEvent | None:
    """Insert the ledger row; ``None`` when this (endpoint, svix-id) is already stored.

    Must run inside a transaction. A concurrent duplicate waits for the first insert's commit
    and then inserts nothing.
    """
    sql, params = _ledger_insert(tenant, endpoint, svix_id, event)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else _stored(row, tenant, endpoint, svix_id, event)


def _store_and_lock(
    *, tenant, endpoint: WebhookEndpoint, svix_id: str, event: NormalizedEvent
) -> WebhookEvent | None:
    """``event_store``, then the receiver's lock timeout and (for a delivery event) the message
    lock, in one round trip. ``None`` for a duplicate, which sets and locks nothing.

    Svix gives up on a delivery after ~15 s: applying that has to wait for a lock held elsewhere
    fails after ``APPLY_LOCK_TIMEOUT_MS`` instead, and the event is kept pending for the sweep.
    The timeout is set after the insert, so a concurrent duplicate still waits for the first
    insert's commit, however long. The statement that takes the message lock completes before
    ``_apply`` reads the intent, in a later statement with a later snapshot (see ``_lock_message``).
    """
    insert_sql, params = _ledger_insert(tenant, endpoint, svix_id, event)
    params.append(f"{APPLY_LOCK_TIMEOUT_MS}ms")
    lock = ""
    if event.kind in DELIVERY_KINDS and event.message_id:
        lock = ", pg_advisory_xact_lock(hashtextextended(%s, 0))"
        params.append(_message_lock_key(tenant.pk, event.message_id))
    # The inserted row (none for a duplicate) drives the rest: the materialized CTE sets the
    # transaction-local timeout once the row exists and before the outer SELECT waits for the lock.
    sql = (
        f"WITH stored AS ({insert_sql}), "  # noqa: S608
        "timed AS MATERIALIZED (SELECT id, received_at, "
        "set_config('lock_timeout', %s, true) AS lock_timeout FROM stored) "
        f"SELECT id, received_at{lock} FROM timed"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else _stored(row, tenant, endpoint, svix_id, event)


def _ledger_insert(tenant, endpoint: WebhookEndpoint, svix_id: str, event: NormalizedEvent):
    # ON CONFLICT DO NOTHING: a redelivery of a stored svix-id inserts and returns nothing.
    sql = (
        f"INSERT INTO {WebhookEvent._meta.db_table} (endpoint_id, tenant_id, svix_id, "  # noqa: S608
        "event_type, event_id, inbox_id, message_id, occurred_at, received_at, state, outcome, "
        "payload) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now(), %s, '', %s::jsonb) "
        "ON CONFLICT (endpoint_id, svix_id) DO NOTHING RETURNING id, received_at"
    )
    params = [
        endpoint.pk,
        tenant.pk,
        svix_id,
        event.event_type,
        event.event_id,
        event.inbox_id,
        event.message_id,
        event.occurred_at,
        State.PENDING,
        json.dumps(event.minimal_payload),
    ]
    return sql, params


def _stored(row, tenant, endpoint: WebhookEndpoint, svix_id: str, event: NormalizedEvent):
    # What the insert wrote, without reading the row back.
    return WebhookEvent(
        pk=row[0],
        endpoint_id=endpoint.pk,
        tenant_id=tenant.pk,
        svix_id=svix_id,
        event_type=event.event_type,
        event_id=event.event_id,
        inbox_id=event.inbox_id,
        message_id=event.message_id,
        occurred_at=event.occurred_at,
        received_at=row[1],
        state=State.PENDING,
        outcome="",
        payload=event.minimal_payload,
    )


def event_receive(*, tenant, endpoint: WebhookEndpoint, svix_id: str, payload: dict) -> Received:
    """Store a verified delivery and apply it, in one short transaction (no savepoint).

    If applying fails (a lock wait past ``APPLY_LOCK_TIMEOUT_MS``, an unexpected error), that
    transaction is rolled back and the event is stored alone, ``pending``, for the sweep.
    """
    normalized = normalize(payload)
    stored = False
    try:
        with transaction.atomic():
            event = _store_and_lock(
                tenant=tenant, endpoint=endpoint, svix_id=svix_id, event=normalized
            )
            if event is None:
                return _duplicate(tenant, endpoint, svix_id)
            stored = True
            state = _finish(event, _apply(event, normalized))
    except Exception as exc:
        if stored:
            _log_apply_failure(exc, tenant_id=tenant.pk, svix_id=svix_id)
        # If the failed statement was the one that both inserts the row and takes the message
        # lock, storing alone tells which part failed: a failing insert fails again here and its
        # error propagates, as a failed store always has; otherwise it was the lock.
        with transaction.atomic():
            event = event_store(tenant=tenant, endpoint=endpoint, svix_id=svix_id, event=normalized)
        if not stored:
            _log_apply_failure(exc, tenant_id=tenant.pk, svix_id=svix_id)
        if event is None:
            return _duplicate(tenant, endpoint, svix_id)
        state = str(State.PENDING)
    log.info(
        "webhooks.event.stored",
        extra={
            "tenant_id": tenant.pk,
            "endpoint_id": endpoint.pk,
            "svix_id": svix_id,
            "event_type": normalized.event_type,
            "state": state,
        },
    )
    return Received(created=True, event_id=event.pk, state=state)


def _duplicate(tenant, endpoint: WebhookEndpoint, svix_id: str) -> Received:
    counters_add([count(tenant.pk, "webhook_duplicates")])
    log.info(
        "webhooks.event.duplicate",
        extra={"tenant_id": tenant.pk, "endpoint_id": endpoint.pk, "svix_id": svix_id},
    )
    return Received(created=False, event_id=None, state="duplicate")


def _log_apply_failure(exc: Exception, *, tenant_id: int, svix_id: str) -> None:
    if isinstance(exc, OperationalError) and isinstance(exc.__cause__, LockNotAvailable):
        log.warning(
            "webhooks.event.apply_postponed", extra={"tenant_id": tenant_id, "svix_id": svix_id}
        )
    else:
        log.error(
            "webhooks.event.apply_failed",
            exc_info=exc,
            extra={"tenant_id": tenant_id, "svix_id": svix_id},
        )


def endpoint_touch(*, endpoint: WebhookEndpoint) -> None:
    """Record that the endpoint hears from the provider, at most once a minute: a write per event
    would serialise every delivery of a tenant on this one row."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).filter(
        Q(last_event_at__isnull=True) | Q(last_event_at__lt=Now() - ENDPOINT_TOUCH_INTERVAL)
    ).update(last_event_at=Now())
