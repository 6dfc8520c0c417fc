"""The webhook apply step: a stored event changes delivery state, suppressions, inbound mail, holds.

The receiver (``receive.event_receive``) only stores an event; the batch applier
(``applier.events_apply_batch``) applies it with the functions here. What could not be applied
then is applied later: ``event_apply`` for one event, ``events_apply_deferred`` (and ``_many``)
when the intents worker records the message id an early event was waiting for, and
``events_replay_pending``, the sweep, for whatever is left.

Applying can only move per-recipient delivery state forward and add suppressions. It writes no
table of intents itself: the journal row goes through ``intents.journal``, suppressions through
``intents.services.suppressions`` and holds through ``intents.services.intents`` (a person must
re-confirm).

The names starting with ``_`` that ``applier`` and ``backfill`` use (``_apply``, ``_finish``,
``_finish_many``, ``_Outcome``, ``_message_lock_key``) are private to this package, not to this
module.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from email.utils import parseaddr
from typing import Any

from django.db import OperationalError, connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from psycopg.errors import LockNotAvailable

from intents.journal import Entry, journal_many
from intents.models import IntentEvent, SendIntent, Suppression
from intents.sending.precheck import HOLD_REASON
from intents.services.intents import Holds, intents_hold_stale
from mailboxes.models import Mailbox
from webhooks.models import InboundMessage, WebhookEvent
from webhooks.normalize import DELIVERY_KINDS, Kind, NormalizedEvent, normalize
from webhooks.selectors import approved_addresses
from webhooks.services.deliveries import DeliveryPlan
from webhooks.services.failures import apply_may_succeed_later, event_count_failure
from webhooks.services.suppressing import SuppressionPlan, suppress

# The name of the module this came from: log routing and filters keep working.
log = logging.getLogger("webhooks.services")

State = WebhookEvent.State
UNAPPLIED = (State.PENDING, State.DEFERRED)

# Bounces and complaints feed the suppression list; so does a provider rejection. A transient
# (soft) bounce says nothing lasting about the address, so it moves state but does not suppress.
_SUPPRESSING = {
    Kind.BOUNCED: Suppression.Reason.BOUNCED,
    Kind.COMPLAINED: Suppression.Reason.COMPLAINED,
    Kind.REJECTED: Suppression.Reason.REJECTED,
}
_TRANSIENT_BOUNCE = "transient"
_NAMES_ITS_RECIPIENTS = frozenset({Kind.BOUNCED, Kind.COMPLAINED})
_PURGED_UNAPPLIED = "payload purged before it could be applied"
# The journal row of an event closed so: the row retention writes for the events it closes
# (``retention.events_close_unapplied``); only retention purges payloads.
CLOSED_UNAPPLIED = "webhook.event_closed_unapplied"
CLOSED_REASON = "retention period passed"
# The outcome of an event whose inbox no mailbox of the tenant has (yet): ``reapply`` looks for it.
NOT_A_MAILBOX = "the event's inbox is not a mailbox of this tenant"
# The svix-id of an event the backfill found (webhooks.services.backfill): Svix ids are msg_...
BACKFILL_PREFIX = "backfill:"
# The sweep gives up on an event whose message lock is held longer, and takes it next time.
SWEEP_LOCK_TIMEOUT_MS = 2000


def backfill_svix_id(event_type: str, message_id: str, inbox_id: str = "") -> str:
    """The ledger id of an event the backfill found. A received message's names its inbox too:
    one customer writing to two mailboxes of a tenant (or anyone reusing a Message-ID, which for
    inbound mail is the sender's) gives two messages with one id, and the second mailbox's was
    refused as a copy of the first, on every run."""
    named = f"{inbox_id.lower()}\n{message_id}" if inbox_id else message_id
    digest = hashlib.sha256(named.encode("utf-8", "replace")).hexdigest()[:40]
    return f"{BACKFILL_PREFIX}{event_type.removeprefix('message.')}:{digest}"


def event_apply(*, event_id: int, lock_timeout_ms: int | None = None) -> str:
    """Apply one stored, not yet applied event; safe to call twice or concurrently.

    ``lock_timeout_ms``: give up (``LockNotAvailable``, the event stays pending) rather than wait
    longer for its message lock."""
    with transaction.atomic():
        if lock_timeout_ms is not None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('lock_timeout', %s, true)", [f"{lock_timeout_ms}ms"]
                )
        event = (
            WebhookEvent.objects.select_for_update(skip_locked=True)
            .filter(pk=event_id, state__in=UNAPPLIED)
            .first()
        )
        if event is None:
            return ""
        if event.payload is None:
            return _finish(event, closed_unapplied([event])[event.pk])
        try:
            normalized = normalize(event.payload)
        except Exception as exc:
            log.exception("webhooks.event.apply_failed", extra={"webhook_event_id": event.pk})
            return event_count_failure(event=event, error=exc)
        if normalized.kind in DELIVERY_KINDS and normalized.message_id:
            _lock_message(event.tenant_id, normalized.message_id)
        return _apply_guarded(event, normalized)


def events_apply_deferred_many(messages: Iterable[tuple[int, str]]) -> int:
    """``events_apply_deferred`` for every (tenant id, message id) a worker batch just recorded:
    one statement takes (and, in autocommit, releases) all their message locks, one query finds
    which have deferred events, and only those take the locked path."""
    messages = sorted({(t, m) for t, m in messages if m})
    if not messages:
        return 0
    if connection.in_atomic_block:
        return sum(events_apply_deferred(tenant_id=t, message_id=m) for t, m in messages)
    keys = [_message_lock_key(t, m) for t, m in messages]
    with connection.cursor() as cursor:
        # The same barrier as one at a time: any webhook transaction that looked for one of
        # these intents before our commit has finished once this statement returns.
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) "
            "FROM (SELECT unnest(%s::text[]) AS k ORDER BY 1) AS keys",
            [keys],
        )
    waiting = set(
        WebhookEvent.objects.filter(
            tenant_id__in={t for t, _ in messages},
            message_id__in={m for _, m in messages},
            state=State.DEFERRED,
        ).values_list("tenant_id", "message_id")
    )
    return sum(
        events_apply_deferred(tenant_id=t, message_id=m) for t, m in messages if (t, m) in waiting
    )


def events_apply_deferred(*, tenant_id: int, message_id: str) -> int:
    """Apply the events that arrived before an intent recorded ``message_id``.

    Called by the intents worker on commit after recording a provider message id. The message
    lock closes the race with a webhook transaction that looked for the intent just before that
    commit: either it saw the intent, or its deferred row is visible here once it commits.
    """
    if not message_id:
        return 0
    if not connection.in_atomic_block:
        # The common case is that no event beat the commit. Taking and at once releasing the
        # message lock (autocommit) waits out any webhook transaction that looked for the intent
        # before our commit; a later one sees the intent itself. After that barrier an unlocked
        # look at the (small) deferred set is enough to skip the locked path when it is empty.
        _lock_message(tenant_id, message_id)
        if not WebhookEvent.objects.filter(
            tenant_id=tenant_id, message_id=message_id, state=State.DEFERRED
        ).exists():
            return 0
    with transaction.atomic():
        _lock_message(tenant_id, message_id)
        events = list(
            WebhookEvent.objects.select_for_update(skip_locked=True)
            .filter(tenant_id=tenant_id, message_id=message_id, state=State.DEFERRED)
            .order_by("received_at", "id")
        )
        applied = 0
        purged = closed_unapplied([event for event in events if event.payload is None])
        for event in events:
            if event.payload is None:
                _finish(event, purged[event.pk])
                continue
            if _apply_guarded(event, normalize(event.payload)) == State.APPLIED:
                applied += 1
    if applied:
        log.info(
            "webhooks.event.deferred_applied",
            extra={"tenant_id": tenant_id, "message_id": message_id, "count": applied},
        )
    return applied


def events_replay_pending(*, batch: int = 500) -> int:
    """The sweep: apply events left pending, and deferred events whose message id has since been
    recorded (the on-commit call from the worker may have been lost). Returns how many changed
    state."""
    # The exclude is the partial index's predicate (`intent_provider_message`), so the
    # correlated lookup is an index probe, not a scan of every intent per deferred event.
    # Recorded in the event's own mailbox, as the apply step (`_find`) looks for it: matched by
    # tenant alone, an id an intent of another mailbox recorded was taken on every run and left
    # deferred, and enough such events, oldest first, filled every batch for ever.
    recorded = send_named_by_event()
    candidates = list(
        WebhookEvent.objects.filter(
            Q(state=State.PENDING)
            | (Q(state=State.DEFERRED) & ~Q(message_id="") & Exists(recorded))
        )
        # Fewest failures first: events whose apply keeps raising go behind the others until
        # they are set aside (``failures``), rather than fill every run.
        .order_by("apply_failures", "received_at", "id")
        .values_list("pk", flat=True)[:batch]
    )
    moved = 0
    for event_id in candidates:
        try:
            state = event_apply(event_id=event_id, lock_timeout_ms=SWEEP_LOCK_TIMEOUT_MS)
        except OperationalError as exc:
            if not isinstance(exc.__cause__, LockNotAvailable):
                raise
            log.warning("webhooks.event.apply_postponed", extra={"webhook_event_id": event_id})
            continue
        if state and state not in UNAPPLIED:
            moved += 1
    if moved:
        log.info("webhooks.event.replayed", extra={"count": moved})
    return moved


def closed_unapplied(events: list[WebhookEvent]) -> dict[int, _Outcome]:
    """The outcomes, by event id, of ``events`` (locked, still waiting to be applied) whose
    payload is gone: closed as ignored, each with the journal row retention writes for the
    events it closes, naming the send the event's message id names, if one recorded it. One
    query, for the batch."""
    if not events:
        return {}
    sent = send_named_by_event().order_by("pk")
    named = {
        pk: (intent_id, draft_id)
        for pk, intent_id, draft_id in WebhookEvent.objects.filter(pk__in=[e.pk for e in events])
        .annotate(
            intent_id=Subquery(sent.values("pk")[:1]),
            draft_id=Subquery(sent.values("draft_id")[:1]),
        )
        .values_list("pk", "intent_id", "draft_id")
    }
    return {
        event.pk: _Outcome(
            State.IGNORED,
            _PURGED_UNAPPLIED,
            _Journal(
                intent_id=named[event.pk][0],
                draft_id=named[event.pk][1],
                action=CLOSED_UNAPPLIED,
                data={"webhook_event_id": event.pk},
                from_state=str(event.state),
                to_state=State.IGNORED,
                reason=CLOSED_REASON,
            ),
        )
        for event in events
    }


def send_named_by_event() -> QuerySet[SendIntent]:
    """The send that recorded the message id of the outer event, in the event's own mailbox (as
    ``_find`` looks for it; see ``events_replay_pending``)."""
    return SendIntent.objects.filter(
        tenant_id=OuterRef("tenant_id"),
        provider_message_id=OuterRef("message_id"),
        mailbox__inbox_id__iexact=OuterRef("inbox_id"),
    ).exclude(provider_message_id="")


def _message_lock_key(tenant_id: int, message_id: str) -> str:
    return f"webhooks.message:{tenant_id}:{message_id}"


def _lock_message(tenant_id: int, message_id: str) -> None:
    # A statement of its own: it must complete before the statement that reads the intent, so
    # that one's snapshot includes an intent committed while we waited for the lock.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [_message_lock_key(tenant_id, message_id)],
        )


def _apply_guarded(event: WebhookEvent, normalized: NormalizedEvent) -> str:
    """Apply in a savepoint. A lock timeout, deadlock or serialization conflict leaves the event
    as it was, for the next applier or the sweep; any other error is counted against the event
    (``failures.event_count_failure``), which sets it aside once it has failed too often."""
    try:
        with transaction.atomic():
            if normalized.kind in DELIVERY_KINDS and normalized.message_id:
                _lock_message(event.tenant_id, normalized.message_id)
            return _finish(event, _apply(event, normalized))
    except Exception as exc:
        if apply_may_succeed_later(exc):
            log.warning(
                "webhooks.event.apply_postponed",
                extra={"tenant_id": event.tenant_id, "svix_id": event.svix_id},
            )
            return str(State.PENDING)
        log.exception(
            "webhooks.event.apply_failed",
            extra={"tenant_id": event.tenant_id, "svix_id": event.svix_id},
        )
        return event_count_failure(event=event, error=exc)


@dataclass(frozen=True)
class _Journal:
    """The ``IntentEvent`` row of an applied delivery event (actor: the webhook), or of an event
    closed unapplied (``closed_unapplied``; no send if none recorded its message id)."""

    draft_id: int | None
    intent_id: int | None
    action: str
    data: dict
    from_state: str = ""
    to_state: str = ""
    reason: str = ""


@dataclass(frozen=True)
class _Outcome:
    state: str
    text: str
    journal: _Journal | None = None


_FINISHED = (State.APPLIED, State.IGNORED, State.REJECTED)


def _finish(event: WebhookEvent, outcome: _Outcome) -> str:
    """Record the event's state and outcome, with its journal row if it has one, in one statement."""
    return _finish_many([(event, outcome)])[0]


def _finish_many(finished: list[tuple[WebhookEvent, _Outcome]]) -> list[str]:
    """Record each event's state and outcome, with the journal rows of those that have one: one
    statement for the whole list (the batch applier's, or one event's); returns the states.

    Raw SQL because compiling ORM queries (Django 6.1 hashes expressions with
    ``inspect.signature``) cost ~0.3-0.6 ms CPU each, several times the applier's other work per
    statement. ``applied_at`` comes from the journal rows' clock (``statement_timestamp()``, which
    is Django's ``Now()``); the journal rows themselves are written by ``intents.journal``. Inside
    a batch nothing reads an event's own ledger row after applying it, so writing the rows
    together at the end changes no outcome.
    """
    if not finished:
        return []
    update = (
        f"UPDATE {WebhookEvent._meta.db_table} AS e SET state = u.state, outcome = u.outcome, "  # noqa: S608
        "applied_at = CASE WHEN u.done THEN statement_timestamp() END "
        "FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::boolean[]) AS u(id, state, outcome, "
        "done) WHERE e.id = u.id",
        [
            [event.pk for event, _ in finished],
            [str(outcome.state) for _, outcome in finished],
            [outcome.text[:200] for _, outcome in finished],
            [outcome.state in _FINISHED for _, outcome in finished],
        ],
    )
    entries = [
        Entry(
            tenant_id=event.tenant_id,
            draft_id=outcome.journal.draft_id,
            intent_id=outcome.journal.intent_id,
            actor_kind=(
                IntentEvent.Actor.SWEEP
                if event.svix_id.startswith(BACKFILL_PREFIX)
                else IntentEvent.Actor.WEBHOOK
            ),
            actor_label=event.svix_id,
            action=outcome.journal.action,
            from_state=outcome.journal.from_state,
            to_state=outcome.journal.to_state,
            reason=outcome.journal.reason,
            data=outcome.journal.data,
        )
        for event, outcome in finished
        if outcome.journal is not None
    ]
    journal_many(entries, along_with=update)
    for event, outcome in finished:
        if outcome.state == State.REJECTED:
            log.warning(
                "webhooks.event.rejected",
                extra={
                    "tenant_id": event.tenant_id,
                    "svix_id": event.svix_id,
                    "outcome": outcome.text,
                },
            )
    return [str(outcome.state) for _, outcome in finished]


@dataclass(frozen=True)
class _Sent:
    """The intent an event is about: the first, by id, of its mailbox with the message id."""

    intent_id: int
    draft_id: int
    recipients: dict


_Found = tuple[int, _Sent | None] | None
# _apply's marker for "not looked up yet" (None means: looked up, no such mailbox).
_LOOK_UP: Any = object()


def _find(event: WebhookEvent, normalized: NormalizedEvent) -> _Found:
    """(mailbox id, intent or None) of the event's inbox in the event's tenant; None if no such
    mailbox. One statement; the intent is looked up only for a delivery kind with a message id."""
    return _find_many([(event, normalized)]).get(event.pk)


def _find_many(
    events: list[tuple[WebhookEvent, NormalizedEvent]],
) -> dict[int, tuple[int, _Sent | None]]:
    """``_find`` for a batch's events, in one statement; keyed by event id (absent: no mailbox).

    The same rules as ``Mailbox.objects.filter(tenant_id=, inbox_id__iexact=).exclude(
    inbox_id="").first()`` then ``SendIntent.objects.filter(tenant_id=, mailbox=,
    provider_message_id=).order_by("id").first()``, without the ORM's compile cost per event.
    The batch applier runs it after taking the batch's message locks, like the one-event path.
    """
    wanted = [(e, n) for e, n in events if n.inbox_id]
    if not wanted:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT u.event_id, m.id, i.id, i.draft_id, i.recipients "  # noqa: S608
            "FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[]) "
            "AS u(event_id, tenant_id, inbox_id, message_id) "
            f"JOIN LATERAL (SELECT id, tenant_id FROM {Mailbox._meta.db_table} "
            "WHERE tenant_id = u.tenant_id AND UPPER(inbox_id) = UPPER(u.inbox_id) "
            "AND inbox_id <> '' ORDER BY id LIMIT 1) m ON true "
            f"LEFT JOIN LATERAL (SELECT id, draft_id, recipients FROM {SendIntent._meta.db_table} "
            "WHERE tenant_id = m.tenant_id AND mailbox_id = m.id "
            # Redundant for the result (NULL or a real id never equals ''), but it is the
            # predicate of the partial index `intent_provider_message`: without it the planner
            # cannot use that index and scans every intent once per event.
            "AND provider_message_id = u.message_id AND provider_message_id <> '' "
            "ORDER BY id LIMIT 1) i ON true",
            [
                [e.pk for e, _ in wanted],
                [e.tenant_id for e, _ in wanted],
                [n.inbox_id for _, n in wanted],
                # NULL matches no intent (an inbound message needs none, and an empty id would
                # match the intents that have not recorded one yet).
                [(n.message_id or None) if n.kind in DELIVERY_KINDS else None for _, n in wanted],
            ],
        )
        rows = cursor.fetchall()
    found: dict[int, tuple[int, _Sent | None]] = {}
    for event_id, mailbox_id, intent_id, draft_id, recipients in rows:
        if intent_id is None:
            found[event_id] = (mailbox_id, None)
            continue
        # Django reads jsonb as text (its psycopg setup) and leaves decoding to the field.
        if isinstance(recipients, str | bytes):
            recipients = json.loads(recipients)
        found[event_id] = (mailbox_id, _Sent(intent_id, draft_id, recipients or {}))
    return found


def _apply(
    event: WebhookEvent,
    normalized: NormalizedEvent,
    found: Any = _LOOK_UP,
    deliveries: DeliveryPlan | None = None,
    suppressions: SuppressionPlan | None = None,
) -> _Outcome:
    """The event's outcome; ``found``: what ``_find`` answers for it, when the caller looked it up
    with the rest of its batch (``_find_many``); ``deliveries``: the batch's recipient rows, which
    the caller writes once at the end of the batch (without it, this event's are written here);
    ``suppressions``: the batch's suppressions, which the caller writes last and then completes
    the outcome with (``with_suppressed``); without it, this event's are written here."""
    if normalized.kind is Kind.OTHER:
        return _Outcome(
            State.IGNORED, f"event type {normalized.event_type or '(none)'} is not tracked"
        )
    if found is _LOOK_UP:
        found = _find(event, normalized) if normalized.inbox_id else None
    if found is None:
        return _Outcome(State.REJECTED, NOT_A_MAILBOX)
    if not normalized.message_id:
        return _Outcome(State.IGNORED, "the event names no message id")
    mailbox_id, sent = found
    if normalized.kind is Kind.RECEIVED:
        # Rarer than delivery events; the ORM is fine here.
        mailbox = Mailbox.objects.get(pk=mailbox_id)
        return _Outcome(*_apply_received(event, normalized, mailbox))
    if sent is None:
        return _Outcome(State.DEFERRED, "no send has recorded this message id yet")
    return _apply_delivery(event, normalized, sent, deliveries, suppressions)


# How many of a delivery event's recipients nobody approved its journal row names, and how
# much of each (an address has at most 254 characters; a provider's payload may hold anything).
MAX_UNAPPROVED_KEPT = 20
MAX_UNAPPROVED_LENGTH = 320


def _apply_delivery(
    event: WebhookEvent,
    normalized: NormalizedEvent,
    sent: _Sent,
    deliveries: DeliveryPlan | None = None,
    suppressions: SuppressionPlan | None = None,
) -> _Outcome:
    plan = deliveries or DeliveryPlan()
    if normalized.kind is Kind.REJECTED:
        if _rejection_backfilled(event, normalized, plan):
            return _Outcome(State.IGNORED, "the backfill applied this message's rejection already")
        if event.svix_id.startswith(BACKFILL_PREFIX):
            plan.backfilled_rejections.add((event.endpoint_id, normalized.message_id))
    approved = approved_addresses(sent.recipients)
    # An event without recipients (message.rejected) concerns the whole message. A bounce or a
    # complaint is about the recipients it names: one naming nobody we can read (a provider's
    # broken payload) was read as the whole message, and bounced and suppressed every recipient.
    named = list(normalized.recipients)
    if not named and normalized.kind not in _NAMES_ITS_RECIPIENTS:
        named = approved
    targets = [a for a in named if a in approved]
    strangers = [a for a in named if a not in approved]
    if strangers:
        log.warning(
            "webhooks.event.unknown_recipients",
            extra={"tenant_id": event.tenant_id, "svix_id": event.svix_id, "count": len(strangers)},
        )
    moved = plan.advance(event, sent.intent_id, normalized.kind.value, targets)
    if deliveries is None:
        plan.write()
    reason = _SUPPRESSING.get(normalized.kind)
    if normalized.bounce_type.lower() == _TRANSIENT_BOUNCE:
        reason = None
    # Built as if nothing was suppressed; ``with_suppressed`` adds what was.
    journal = _Journal(
        draft_id=sent.draft_id,
        intent_id=sent.intent_id,
        action=f"delivery.{normalized.kind.value}",
        data={
            "webhook_event_id": event.pk,
            "event_id": normalized.event_id,
            "moved": moved,
            "unchanged": [a for a in targets if a not in moved],
            "suppressed": [],
            "unknown_recipients": len(strangers),
            # Whom AgentMail says the message went to that nobody approved (its reply route's
            # own recipients, say): evidence the send page names, not a count alone.
            "unapproved_recipients": [a[:MAX_UNAPPROVED_LENGTH] for a in strangers][
                :MAX_UNAPPROVED_KEPT
            ],
            **({"source": "backfill"} if event.svix_id.startswith(BACKFILL_PREFIX) else {}),
        },
    )
    text = f"{len(moved)} of {len(targets)} recipients moved to {normalized.kind.value}"
    outcome = _Outcome(State.APPLIED, text, journal)
    if not reason:
        return outcome
    if suppressions is None:
        return with_suppressed(outcome, suppress(event, normalized, reason, targets))
    suppressions.add(event, normalized, reason, targets)
    return outcome


def _rejection_backfilled(
    event: WebhookEvent, normalized: NormalizedEvent, plan: DeliveryPlan
) -> bool:
    """Whether this is AgentMail's own webhook of a rejection the backfill found and applied
    (``backfill``): the same news, late. Applied again, it suppressed once more every address
    an admin had let receive mail since. (A copy of a delivery moves nothing and suppresses
    nothing, so only the rejection is looked for: one probe of the ledger's unique index.)
    ``plan``: the batch's, which knows the backfill's rejections applied earlier in the batch:
    their ledger rows are written only at its end, so the probe did not see them, and the
    webhook that came in before the applier took either was applied (and journaled) again."""
    if event.svix_id.startswith(BACKFILL_PREFIX):
        return False
    if (event.endpoint_id, normalized.message_id) in plan.backfilled_rejections:
        return True
    return WebhookEvent.objects.filter(
        endpoint_id=event.endpoint_id,
        svix_id=backfill_svix_id(normalized.event_type, normalized.message_id),
        state=State.APPLIED,
    ).exists()


def with_suppressed(outcome: _Outcome, suppressed: list[str]) -> _Outcome:
    """A delivery event's outcome once its suppressions are written: the addresses whose row
    changed in its journal row, and how many in its text."""
    if not suppressed or outcome.journal is None:
        return outcome
    return _Outcome(
        outcome.state,
        f"{outcome.text}; {len(suppressed)} suppressed",
        replace(outcome.journal, data={**outcome.journal.data, "suppressed": suppressed}),
    )


# How far before our receipt, or after it, a received message's own timestamp may lie. Outside,
# it is not believed and the receipt time stands in: the message's time orders the thread, starts
# its reply deadline and says when retention purges it, so one skewed value (a message "from
# 2099") would sort it above everything and keep it for ever.
RECEIVED_AT_BEFORE = timedelta(days=30)
RECEIVED_AT_AFTER = timedelta(minutes=5)


def believed_time(claimed, received_at):
    """``claimed`` if it lies within the window around ``received_at``; else ``received_at``."""
    if claimed is None:
        return received_at
    if received_at - RECEIVED_AT_BEFORE <= claimed <= received_at + RECEIVED_AT_AFTER:
        return claimed
    log.info("webhooks.event.time_not_believed", extra={"claimed": claimed.isoformat()})
    return received_at


def _apply_received(
    event: WebhookEvent, normalized: NormalizedEvent, mailbox: Mailbox
) -> tuple[str, str]:
    inbound_facts = normalized.inbound
    occurred_at = believed_time(normalized.occurred_at, event.received_at)
    message, created = InboundMessage.objects.get_or_create(
        mailbox=mailbox,
        message_id=normalized.message_id,
        defaults={
            "tenant_id": event.tenant_id,
            "thread_id": normalized.thread_id,
            "sender": inbound_facts.sender if inbound_facts else "",
            "subject": inbound_facts.subject if inbound_facts else "",
            "subject_replaced": inbound_facts.subject_replaced if inbound_facts else False,
            "preview": inbound_facts.preview if inbound_facts else "",
            "reply_to": list(inbound_facts.reply_to) if inbound_facts else [],
            "received_at": occurred_at,
        },
    )
    if not created:
        if _another_message(message, inbound_facts, normalized.thread_id):
            # A Message-ID is the sender's to choose: another message under one we recorded
            # (a copy reusing it, a broken client) is not a redelivery. Still one row per
            # mailbox and Message-ID; the ledger and the log name it. The customer still wrote
            # in the thread: its queued replies are held as for any message, those answering
            # the recorded one too (its id now names two messages). Held by nothing, a reply
            # approved before "cancel it, do not ship" went out unread.
            log.warning(
                "webhooks.inbound.message_id_reused",
                extra={"tenant_id": event.tenant_id, "svix_id": event.svix_id},
            )
            holds = intents_hold_stale(
                mailbox=mailbox,
                thread_id=normalized.thread_id,
                message_id="",
                written_at=occurred_at,
                recorded_at=event.received_at,
                reason=HOLD_REASON,
            )
            _log_holds(event, holds)
            return (
                State.IGNORED,
                "another message under this Message-ID is recorded (other sender, thread or "
                f"subject): not this one; {len(holds.held)} queued send(s) held",
            )
        if _reply_to_filled(event, normalized, mailbox, message):
            return (
                State.APPLIED,
                "inbound message already recorded (by the backfill); its Reply-To added",
            )
        return State.APPLIED, "inbound message already recorded"
    held = _hold_stale_intents(event, normalized, mailbox, message)
    return State.APPLIED, f"inbound message recorded; {held} queued send(s) held"


def _reply_to_filled(
    event: WebhookEvent, normalized: NormalizedEvent, mailbox: Mailbox, message: InboundMessage
) -> bool:
    """Give a message the backfill recorded the Reply-To its own webhook brings, if it had none.

    The backfill reads AgentMail's listing of the inbox, whose items (``MessageItem``, reference
    §2.4) leave out ``reply_to``: such a message was recorded without one, and its webhook,
    arriving later (after our receiver was down, say), was "already recorded", so the draft page
    never said where the customer asked replies to go. Only for a row the backfill made (its
    ledger event applied), and only where it is still empty: a conditional UPDATE, so another
    message reusing the Message-ID cannot change what a row says."""
    reply_to = list(normalized.inbound.reply_to) if normalized.inbound else []
    if not reply_to or message.reply_to or event.svix_id.startswith(BACKFILL_PREFIX):
        return False
    backfilled = WebhookEvent.objects.filter(
        tenant_id=event.tenant_id,
        message_id=normalized.message_id,
        svix_id=backfill_svix_id("message.received", normalized.message_id, mailbox.inbox_id),
        state=State.APPLIED,
    ).exists()
    if not backfilled:
        return False
    return bool(InboundMessage.objects.filter(pk=message.pk, reply_to=[]).update(reply_to=reply_to))


def _another_message(message: InboundMessage, facts, thread_id: str) -> bool:
    """Whether a received message under the Message-ID of ``message`` is another message, not
    a copy (a redelivery, the backfill's and the webhook's of one message): another thread,
    sender or subject. AgentMail gives a copy the subject as it gives the message."""
    sender = facts.sender if facts else ""
    subject = facts.subject if facts else ""
    return (
        message.thread_id != thread_id
        or _address(message.sender) != _address(sender)
        or message.subject != subject
    )


def _address(sender: str) -> str:
    """The address of a From (its display name may be written differently by a listing)."""
    return parseaddr(sender)[1].lower()


def _hold_stale_intents(
    event, normalized: NormalizedEvent, mailbox: Mailbox, message: InboundMessage
) -> int:
    """Hold the queued replies this new customer message may make stale (``intents_hold_stale``)."""
    holds = intents_hold_stale(
        mailbox=mailbox,
        thread_id=normalized.thread_id,
        message_id=normalized.message_id,
        written_at=message.received_at,
        recorded_at=message.recorded_at,
        reason=HOLD_REASON,
    )
    _log_holds(event, holds)
    return len(holds.held)


def _log_holds(event: WebhookEvent, holds: Holds) -> None:
    for intent_id, code in holds.skipped:
        log.info(
            "webhooks.intent.hold_skipped",
            extra={"tenant_id": event.tenant_id, "intent_id": intent_id, "code": code},
        )
    for intent_id in holds.held:
        log.info(
            "webhooks.intent.held",
            extra={"tenant_id": event.tenant_id, "intent_id": intent_id, "svix_id": event.svix_id},
        )
