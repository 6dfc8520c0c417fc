"""Receiving a webhook event: the ledger row, stored first and applied after.

The receiver calls ``event_receive``: one statement that inserts the ledger row, ``pending``
(``UNIQUE(endpoint, svix_id)`` with ``ON CONFLICT DO NOTHING``, so a redelivery changes nothing),
durable before the receiver answers. Once it is committed the batch applier is woken
(``applier.applier_wake``); the sweep (``apply.events_replay_pending``) applies whatever the
applier leaves.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Q
from django.db.models.functions import Now

from common.counters import count, counters_add
from webhooks.models import WebhookEndpoint, WebhookEvent
from webhooks.normalize import NormalizedEvent, normalize
from webhooks.services.applier import applier_wake

# The name of the module this came from: log routing and filters keep working.
log = logging.getLogger("webhooks.services")

State = WebhookEvent.State
ENDPOINT_TOUCH_INTERVAL = timedelta(seconds=60)


@dataclass(frozen=True)
class Received:
    """What the receiver answers: whether this delivery was new, and the event's state."""

    created: bool
    event_id: int | None
    state: str


def event_store(
    *, tenant, endpoint: WebhookEndpoint, svix_id: str, event: NormalizedEvent
) -> int | None:
    """Insert the ledger row; its id, or ``None`` when this (endpoint, svix-id) is already stored.

    One statement: in autocommit it is its own transaction. A concurrent duplicate waits for the
    first insert's commit and then inserts nothing. (Only the id comes back: a model instance of
    the row was a twentieth of the receiver's CPU per event, for nothing.)
    """
    sql, params = _ledger_insert(tenant, endpoint, svix_id, event)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else row[0]


def _ledger_insert(tenant, endpoint: WebhookEndpoint, svix_id: str, event: NormalizedEvent):
    # ON CONFLICT DO NOTHING: a redelivery of a stored svix-id inserts and returns nothing.
    sql = (
        f"INSERT INTO {WebhookEvent._meta.db_table} (endpoint_id, tenant_id, svix_id, "  # noqa: S608
        "event_type, event_id, inbox_id, message_id, occurred_at, received_at, state, outcome, "
        "payload) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now(), %s, '', %s::jsonb) "
        "ON CONFLICT (endpoint_id, svix_id) DO NOTHING RETURNING id"
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


def event_receive(*, tenant, endpoint: WebhookEndpoint, svix_id: str, payload: dict) -> Received:
    """Store a verified delivery, ``pending``, and wake the applier once it is committed.

    One statement (in autocommit it is its own transaction, durable when it returns): applying
    is the batch applier's job (``applier.events_apply_batch``), so the answer never waits for a
    lock held by a worker or another event of the same message.
    """
    normalized = normalize(payload)
    event_id = event_store(tenant=tenant, endpoint=endpoint, svix_id=svix_id, event=normalized)
    if event_id is None:
        return _duplicate(tenant, endpoint, svix_id)
    transaction.on_commit(applier_wake)
    log.info(
        "webhooks.event.stored",
        extra={
            "tenant_id": tenant.pk,
            "endpoint_id": endpoint.pk,
            "svix_id": svix_id,
            "event_type": normalized.event_type,
            "state": State.PENDING,
        },
    )
    return Received(created=True, event_id=event_id, state=str(State.PENDING))


def _duplicate(tenant, endpoint: WebhookEndpoint, svix_id: str) -> Received:
    counters_add([count(tenant.pk, "webhook_duplicates")])
    log.info(
        "webhooks.event.duplicate",
        extra={"tenant_id": tenant.pk, "endpoint_id": endpoint.pk, "svix_id": svix_id},
    )
    return Received(created=False, event_id=None, state="duplicate")


def endpoint_touch(*, endpoint: WebhookEndpoint) -> None:
    """Record that the endpoint hears from the provider, at most once a minute: a write per event
    would serialise every delivery of a tenant on this one row."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).filter(
        Q(last_event_at__isnull=True) | Q(last_event_at__lt=Now() - ENDPOINT_TOUCH_INTERVAL)
    ).update(last_event_at=Now())
