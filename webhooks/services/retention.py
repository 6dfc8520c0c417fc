"""Retention of the webhook ledger: payloads and inbound previews go, the rows stay."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import (
    DateTimeField,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    Subquery,
    Value,
)
from django.db.models.functions import Now

from intents.journal import Entry, journal_many
from intents.models import Draft, IntentEvent, SendIntent
from intents.retention import OPEN_INTENT_STATES
from webhooks.models import InboundMessage, WebhookEvent
from webhooks.services.apply import CLOSED_REASON, CLOSED_UNAPPLIED, UNAPPLIED, send_named_by_event

# The name of the module this came from: log routing and filters keep working.
log = logging.getLogger("webhooks.services")

State = WebhookEvent.State

# A send in these states may have gone out without our knowing its message id: an event waiting
# for a message id in its inbox may be the one that tells its delivery, bounce or complaint.
_UNRESOLVED_SENDS = (
    SendIntent.State.SENDING,
    SendIntent.State.UNCERTAIN,
    SendIntent.State.NEEDS_ATTENTION,
)


# Events closed per transaction: each batch is one locking read and one statement that closes
# them and writes their journal rows.
CLOSE_BATCH = 1000
_CLOSED = "payload purged after the retention period before it could be applied"
_CLOSABLE = (*UNAPPLIED, State.FAILED)


def events_purge_payloads() -> int:
    """Drop payloads (and inbound previews) older than each tenant's retention period.

    The ledger row itself stays: it is tiny, and its svix-id must outlive every redelivery.
    Events still waiting to be applied, or failed (an operator's retry would find no payload),
    are closed as ignored, since nothing could apply them (``events_close_unapplied``);
    except an event deferred for its message id in an inbox with a send still unresolved: that
    send may be the message (it is recorded when a reconciliation or a person finds it), and a
    bounce or complaint closed unapplied would never suppress the address. It keeps its payload
    until no such send is left. An inbound message in a thread a pending draft of its mailbox
    answers, or a draft whose send is still open, keeps its preview too: the reviewer reads it
    to decide (the review deadline ends the wait; a send's outcome or a person's decision).
    """
    events_close_unapplied()
    with transaction.atomic():
        # An event still waiting here is one an applier held while it was being closed: it
        # keeps its payload until the next run closes it (or the applier has applied it).
        purged = _old().exclude(state__in=_CLOSABLE).update(payload=None)
        # A send still open decides on the thread too: a held one is released only once a
        # person has read what the customer wrote after the approval.
        open_send = SendIntent.objects.filter(draft=OuterRef("pk"), state__in=OPEN_INTENT_STATES)
        in_review = (
            Draft.objects.filter(mailbox=OuterRef("mailbox"))
            .filter(Q(status=Draft.Status.PENDING) | Exists(open_send))
            .filter(
                Q(in_reply_to=OuterRef("message_id"))
                | (~Q(thread_id="") & Q(thread_id=OuterRef("thread_id")))
            )
        )
        InboundMessage.objects.filter(received_at__lt=_cutoff()).exclude(preview="").exclude(
            Exists(in_review)
        ).update(preview="")
    if purged:
        log.info("webhooks.event.payloads_purged", extra={"count": purged})
    return purged


def events_close_unapplied(*, batch: int = CLOSE_BATCH) -> int:
    """Close as ignored the events past their tenant's retention that are still waiting to be
    applied, or failed, each with its journal row (``webhook.event_closed_unapplied``, naming
    the send its message id names, if one recorded it in the event's mailbox, so that the
    send's record says a delivery event about it was never applied). Returns how many.

    Each batch takes its events ``FOR UPDATE SKIP LOCKED`` and closes exactly those, still in the
    state read under the lock. An event an applier holds is being applied: closed (and
    journaled) as well, it would be both applied and closed. It is left for the next run, which
    finds it applied or still waiting. Run twice, the second finds nothing to close."""
    # The send an event's message id names, found as the apply step finds it (``apply._find``).
    sent = send_named_by_event()
    closed = 0
    while True:
        with transaction.atomic():
            rows = list(
                _old()
                .filter(state__in=_CLOSABLE)
                .select_for_update(skip_locked=True, of=("self",))
                .annotate(
                    intent_id=Subquery(sent.order_by("pk").values("pk")[:1]),
                    draft_id=Subquery(sent.order_by("pk").values("draft_id")[:1]),
                )
                .order_by("pk")
                .values_list("pk", "tenant_id", "state", "intent_id", "draft_id")[:batch]
            )
            if rows:
                _close(rows)
        closed += len(rows)
        if len(rows) < batch:
            break
    if closed:
        log.info("webhooks.event.closed_unapplied", extra={"count": closed})
    return closed


def _close(rows: list[tuple[int, int, str, int | None, int | None]]) -> None:
    """Close the events of ``rows`` (locked by this transaction) and write their journal rows,
    in one statement."""
    update = (
        f"UPDATE {WebhookEvent._meta.db_table} SET state = %s, outcome = %s, "  # noqa: S608
        "applied_at = statement_timestamp() WHERE id = ANY(%s::bigint[]) AND state = ANY(%s)",
        [State.IGNORED, _CLOSED, [pk for pk, *_ in rows], [str(s) for s in _CLOSABLE]],
    )
    journal_many(
        [
            Entry(
                tenant_id=tenant_id,
                draft_id=draft_id,
                intent_id=intent_id,
                actor_kind=IntentEvent.Actor.SWEEP,
                action=CLOSED_UNAPPLIED,
                from_state=state,
                to_state=State.IGNORED,
                reason=CLOSED_REASON,
                data={"webhook_event_id": pk},
            )
            for pk, tenant_id, state, intent_id, draft_id in rows
        ],
        along_with=update,
    )


def _cutoff() -> ExpressionWrapper:
    return ExpressionWrapper(
        Now() - F("tenant__retention_days") * Value(timedelta(days=1)),
        output_field=DateTimeField(),
    )


def _old():
    """Events with a payload past their tenant's retention, but for one deferred for its message
    id in an inbox with a send still unresolved (``events_purge_payloads``)."""
    unresolved = SendIntent.objects.filter(
        tenant=OuterRef("tenant"),
        # The ledger holds the inbox id lower-cased (normalize); the mailbox as AgentMail gave it.
        mailbox__inbox_id__iexact=OuterRef("inbox_id"),
        state__in=_UNRESOLVED_SENDS,
    )
    return WebhookEvent.objects.filter(payload__isnull=False, received_at__lt=_cutoff()).exclude(
        Exists(unresolved.filter(provider_message_id="")), state=State.DEFERRED
    )
