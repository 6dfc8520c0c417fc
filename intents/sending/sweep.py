"""The sweep's share of sending (called from ``intents.tasks.sweep_once``, safe to run on every
cluster at once): expired leases go back to the queue or to ``uncertain``, queued intents past
their ``not_after`` expire, and due retries and reconciliations are found to wake workers."""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import Min, Q
from django.db.models.functions import Now

from common.counters import counters_add
from config.clock import db_now
from intents.journal import journal
from intents.models import Broadcast, IntentEvent, SendAttempt, SendIntent
from intents.sending.lease import (
    Claim,
    attempt_counts,
    broadcast_lets_reconcile,
    broadcast_lets_send,
    mailbox_key_usable,
)

State = SendIntent.State
AttemptOutcome = SendAttempt.Outcome

# The journal's reason and the send's last error when a worker's lease ran out (stored in English
# with the worker's label; intents.reason_words reads them in the reader's words).
LEASE_EXPIRED_REASON = "lease of %(worker)s expired"
LEASE_EXPIRED_DETAIL = "The lease of %(worker)s expired."


def _mark_attempts_uncertain(intent: SendIntent) -> None:
    """The lease's attempt, still pending: its call may have happened. Counted here, once (a late
    worker's ``fenced`` completes the row without counting it again)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SendAttempt._meta.db_table} SET outcome = %s, error_code = %s "  # noqa: S608
            "WHERE intent_id = %s AND lease_token = %s AND outcome = %s RETURNING kind",
            [
                AttemptOutcome.UNCERTAIN,
                "lease_expired",
                intent.pk,
                intent.lease_token,
                AttemptOutcome.PENDING,
            ],
        )
        kinds = [kind for (kind,) in cursor.fetchall()]
    counters_add(
        c
        for kind in kinds
        for c in attempt_counts(intent.tenant_id, kind, AttemptOutcome.UNCERTAIN, None)
    )


def intents_release_expired_leases(*, batch: int = 500) -> int:
    """Leases that outlived their worker. If the attempt row was never committed, no call was made
    and the intent simply goes back to the queue; otherwise the call may have happened: uncertain."""
    moved = 0
    with transaction.atomic():
        expired = list(
            SendIntent.objects.select_for_update(skip_locked=True)
            .filter(state__in=(State.SENDING, State.UNCERTAIN), lease_expires_at__lte=Now())
            .order_by("lease_expires_at")[:batch]
        )
        for intent in expired:
            called = SendAttempt.objects.filter(
                intent_id=intent.pk, lease_token=intent.lease_token
            ).exists()
            _mark_attempts_uncertain(intent)
            # Claiming sets the token with the expiry this query matched on.
            assert intent.lease_token is not None
            claim = Claim(intent.pk, intent.lease_token, "sweep")
            if intent.state == State.UNCERTAIN:
                to_state, action = State.UNCERTAIN, "intent.reconcile_pending"
            elif called:
                to_state, action = State.UNCERTAIN, "intent.uncertain"
            else:
                to_state, action = State.QUEUED, "intent.lease_expired"
            changed = SendIntent.objects.filter(
                pk=intent.pk, lease_token=intent.lease_token, state=intent.state
            ).update(
                state=to_state,
                lease_token=None,
                lease_owner="",
                lease_expires_at=None,
                next_attempt_at=Now(),
                last_error_code="lease_expired",
                last_error_detail=LEASE_EXPIRED_DETAIL % {"worker": intent.lease_owner},
                updated_at=Now(),
            )
            if changed and to_state != intent.state:
                moved += 1
                journal(
                    tenant=intent.tenant_id,
                    intent=intent.pk,
                    draft=intent.draft_id,
                    action=action,
                    actor_kind=IntentEvent.Actor.SWEEP,
                    actor_label=claim.worker,
                    from_state=intent.state,
                    to_state=to_state,
                    reason=LEASE_EXPIRED_REASON % {"worker": intent.lease_owner},
                    data={"attempt_committed": called},
                )
    return moved


def intents_expire_not_after(*, batch: int = 500) -> int:
    expired = 0
    with transaction.atomic():
        due = list(
            SendIntent.objects.select_for_update(skip_locked=True)
            .filter(state=State.QUEUED, not_after__lte=Now())
            .values_list("pk", "tenant_id", "draft_id")[:batch]
        )
        for pk, tenant_id, draft_id in due:
            if SendIntent.objects.filter(pk=pk, state=State.QUEUED).update(
                state=State.EXPIRED, last_error_code="not_after_passed", updated_at=Now()
            ):
                expired += 1
                journal(
                    tenant=tenant_id,
                    intent=pk,
                    draft=draft_id,
                    action="intent.expired",
                    actor_kind=IntentEvent.Actor.SWEEP,
                    from_state=State.QUEUED,
                    to_state=State.EXPIRED,
                    reason="not_after passed before sending",
                )
    return expired


def due_intent_ids(*, limit: int = 100) -> tuple[list[int], list[int]]:
    """(due queued ids, due uncertain ids), for waking workers."""
    queued = list(
        SendIntent.objects.filter(state=State.QUEUED, held_reason="", next_attempt_at__lte=Now())
        .filter(Q(hold_until__isnull=True) | Q(hold_until__lte=Now()))
        .filter(broadcast_lets_send(), mailbox_key_usable())
        .order_by("-priority", "next_attempt_at", "id")
        .values_list("pk", flat=True)[:limit]
    )
    uncertain = list(
        SendIntent.objects.filter(state=State.UNCERTAIN, next_attempt_at__lte=Now())
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=Now()))
        .filter(broadcast_lets_reconcile(), mailbox_key_usable())
        .order_by("next_attempt_at", "id")
        .values_list("pk", flat=True)[:limit]
    )
    return queued, uncertain


def seconds_until_next_due() -> float | None:
    """Seconds (database clock) until the next retry, reconciliation, lease expiry or end of a
    broadcast's undo window, if any."""
    now = db_now()
    soonest = [
        # A paused broadcast's sends, or those of a mailbox whose key AgentMail refused, are
        # not due: the sweep does not spin on them.
        SendIntent.objects.filter(state=State.QUEUED, held_reason="")
        .filter(broadcast_lets_send(), mailbox_key_usable())
        .aggregate(at=Min("next_attempt_at"))["at"],
        SendIntent.objects.filter(state=State.UNCERTAIN)
        .filter(broadcast_lets_reconcile(), mailbox_key_usable())
        .aggregate(at=Min("next_attempt_at"))["at"],
        SendIntent.objects.filter(state=State.SENDING).aggregate(at=Min("lease_expires_at"))["at"],
        # A broadcast's fan-out waits for the end of its undo window.
        Broadcast.objects.filter(
            state__in=(Broadcast.State.APPROVED, Broadcast.State.FANNING_OUT),
            hold_until__gt=now,
        ).aggregate(at=Min("hold_until"))["at"],
    ]
    times = [t for t in soonest if t is not None]
    if not times:
        return None
    return max(0.0, (min(times) - now).total_seconds())
