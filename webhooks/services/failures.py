"""Events whose apply keeps raising: counted, set aside as ``failed``, retried by an operator.

An event whose apply raises every time (a bug, data the apply step cannot take: a "poison"
event) stayed pending for ever, and, oldest first, was taken first by every batch and every
sweep: with a batch of them no newer event was applied again, though nothing was lost. Now each
failure is counted (``event_count_failure``), the take puts events that failed more often
behind the others (``applier._take_pending``, ``apply.events_replay_pending``), and at
``WEBHOOK_APPLY_MAX_FAILURES`` the event is ``failed``: nothing takes it any more. A lock
timeout, a deadlock or a serialization conflict is no failure of the event (it is retried as it
was). Only an operator moves a failed event back (``events_retry_failed``, through
``manage.py webhooks_apply --retry-failed``), once the cause is fixed.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from django.conf import settings
from django.db import OperationalError, connection, transaction
from psycopg.errors import DeadlockDetected, LockNotAvailable, SerializationFailure

from mailboxes.provisioning import audit
from tenants.models import Tenant
from webhooks.models import WebhookEvent

log = logging.getLogger("webhooks.services")

State = WebhookEvent.State
_UNAPPLIED = (State.PENDING, State.DEFERRED)
# Another transaction held a lock past our timeout, or PostgreSQL chose us to give way: the
# event may well apply next time, so trying again costs it nothing.
_TRY_AGAIN = (LockNotAvailable, DeadlockDetected, SerializationFailure)


def apply_may_succeed_later(exc: BaseException) -> bool:
    """Whether ``exc``, raised applying an event, is a conflict with other transactions rather
    than something about the event."""
    return isinstance(exc, OperationalError) and isinstance(exc.__cause__, _TRY_AGAIN)


def event_count_failure(*, event: WebhookEvent, error: BaseException) -> str:
    """Count one failed apply of ``event`` (pending or deferred), and set it aside as ``failed``
    at ``WEBHOOK_APPLY_MAX_FAILURES``; returns its state.

    Called in the transaction that holds the event's row lock, once the apply's own work has
    rolled back (to its savepoint, or the batch's whole transaction), so the count is all it
    commits of that attempt. The outcome names the error's class only: its text may quote what
    the event carried. An event in any other state (a rejected one re-applied) is left as it
    is."""
    limit = settings.WEBHOOK_APPLY_MAX_FAILURES
    name = type(error).__name__
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {WebhookEvent._meta.db_table} SET apply_failures = apply_failures + 1, "  # noqa: S608
            "state = CASE WHEN apply_failures + 1 >= %s THEN %s ELSE state END, "
            "outcome = left(CASE WHEN apply_failures + 1 >= %s "
            "THEN 'applying it raised ' || %s || ' ' || (apply_failures + 1) || "
            "' times; an operator retries it (webhooks_apply --retry-failed)' "
            "ELSE 'applying it raised ' || %s || ' (' || (apply_failures + 1) || ' of ' || %s "
            "|| ' tries)' END, 200) "
            "WHERE id = %s AND state IN (%s, %s) RETURNING state, apply_failures",
            [limit, State.FAILED, limit, name, name, limit, event.pk, *_UNAPPLIED],
        )
        row = cursor.fetchone()
    if row is None:
        return str(State.PENDING)
    state, failures = row
    if state == State.FAILED:
        log.error(
            "webhooks.event.failed",
            extra={
                "webhook_event_id": event.pk,
                "tenant_id": event.tenant_id,
                "error": name,
                "failures": failures,
            },
        )
    else:
        log.warning(
            "webhooks.event.apply_failure_counted",
            extra={
                "webhook_event_id": event.pk,
                "tenant_id": event.tenant_id,
                "error": name,
                "failures": failures,
            },
        )
    return str(state)


class NotFailed(ValueError):
    """Ids given to ``events_retry_failed`` that name no failed event (missing, or in another
    state): nothing was retried."""

    def __init__(self, event_ids: list[int]):
        self.event_ids = event_ids
        super().__init__("not a failed webhook event: " + ", ".join(str(pk) for pk in event_ids))


def events_retry_failed(*, event_ids: Collection[int] | None = None) -> list[int]:
    """Put failed events back to ``pending`` with their failures forgotten, for the appliers to
    take again: all of them, or those of ``event_ids`` (each must be a failed event, or none is
    retried: ``NotFailed``). The one move back the ledger's states make, an operator's, after
    the cause is fixed; each tenant's audit log names its events. Returns the ids retried."""
    with transaction.atomic():
        failed = WebhookEvent.objects.select_for_update().filter(state=State.FAILED)
        if event_ids is not None:
            failed = failed.filter(pk__in=set(event_ids))
        rows = list(failed.order_by("pk").values_list("pk", "tenant_id"))
        if event_ids is not None:
            missing = sorted(set(event_ids) - {pk for pk, _ in rows})
            if missing:
                raise NotFailed(missing)
        retried = [pk for pk, _ in rows]
        if not retried:
            return []
        WebhookEvent.objects.filter(pk__in=retried, state=State.FAILED).update(
            state=State.PENDING, apply_failures=0, outcome=""
        )
        by_tenant: dict[int, list[int]] = {}
        for pk, tenant_id in rows:
            by_tenant.setdefault(tenant_id, []).append(pk)
        for tenant in Tenant.objects.filter(pk__in=by_tenant).order_by("pk"):
            audit(
                tenant=tenant,
                actor=None,
                action="webhook.events_retried",
                obj=tenant,
                data={"webhook_event_ids": by_tenant[tenant.pk]},
            )
    log.info("webhooks.event.retried", extra={"count": len(retried), "webhook_event_ids": retried})
    return retried
