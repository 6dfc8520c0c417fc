"""Reads of send intents: one intent, its attempts and journal, the outbox, counts and the
queue's age. Always tenant-scoped, except the operator-wide counts."""

from __future__ import annotations

from django.db.models import Count, F, Min, Q, QuerySet
from django.db.models.functions import Now

from config.clock import db_now
from intents.errors import InvalidInput, NotFound
from intents.models import Broadcast, Draft, IntentEvent, SendAttempt, SendIntent
from intents.selectors.common import (
    DEFAULT_PAGE,
    Page,
    as_int,
    counts_up_to,
    decode_cursor,
    encode_cursor,
    limit_of,
)


def current_sends(tenant) -> QuerySet[SendIntent]:
    """A tenant's intents, without those superseded by a re-approval: once a person reopened the
    draft (a newer version exists), the old send is history, not something left to act on. A
    broadcast's sends have no draft and are never superseded."""
    return SendIntent.objects.filter(tenant=tenant).filter(
        Q(broadcast__isnull=False) | Q(draft_version__number=F("draft__current_version"))
    )


def intent_get(*, tenant, intent_id) -> SendIntent:
    intent = (
        SendIntent.objects.select_related(
            "mailbox", "draft", "draft_version", "approver", "broadcast"
        )
        .filter(tenant=tenant, pk=as_int(intent_id, "send"))
        .first()
    )
    if intent is None:
        raise NotFound("not_found", "No such send.")
    return intent


def intent_attempts(*, tenant, intent_id) -> list[SendAttempt]:
    intent = intent_get(tenant=tenant, intent_id=intent_id)
    return list(SendAttempt.objects.filter(tenant=tenant, intent=intent).order_by("number"))


def outbox(*, tenant, state=None, cursor=None, limit=DEFAULT_PAGE) -> Page:
    """Send intents, most recent first, optionally in one state (or a list of states)."""
    limit = limit_of(limit)
    qs = SendIntent.objects.filter(tenant=tenant).select_related(
        "mailbox", "draft", "draft_version", "approver", "broadcast"
    )
    if state:
        states = [state] if isinstance(state, str) else list(state)
        unknown = [s for s in states if s not in SendIntent.State.values]
        if unknown:
            raise InvalidInput("state_invalid", f"Unknown state {unknown[0]!r}.", "state")
        qs = qs.filter(state__in=states)
    if cursor:
        (pk,) = decode_cursor(cursor, 1)
        try:
            qs = qs.filter(id__lt=int(pk))
        except ValueError:
            raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor") from None
    rows = list(qs.order_by("-id")[: limit + 1])
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1].pk)
    return Page(rows, next_cursor, limit)


def intent_counts(*, tenant=None) -> dict[str, int]:
    """Intents per state (every state present). Without a tenant: across all tenants, for
    operators only (the intents_status command and metrics)."""
    qs = SendIntent.objects.all() if tenant is None else SendIntent.objects.filter(tenant=tenant)
    counts = dict.fromkeys(SendIntent.State.values, 0)
    for row in qs.values("state").annotate(n=Count("id")):
        counts[row["state"]] = row["n"]
    return counts


def intent_counts_capped(*, tenant, cap: int) -> dict[str, int]:
    """One tenant's sends per state, each counted up to ``cap`` + 1 (a tab shows "10000+"), in
    one statement on the index (tenant, state, ...), and all of them under ``""`` (their sum).
    The outbox's tabs read it on every view: a whole count of the ended states grows with the
    tenant's history of sends, as the queue's tabs would with its drafts (``queue.view_counts``)."""
    base = SendIntent.objects.filter(tenant=tenant)
    counts = counts_up_to(
        {state: base.filter(state=state) for state in SendIntent.State.values}, cap
    )
    # All of them: the states' sum is above the cap exactly when the whole count is.
    counts[""] = sum(counts.values())
    return counts


# The states an intent leaves again: few rows at any time, so counting them scans an index
# (``intent_lease`` leads with the state), never the history of finished intents.
LIVE_STATES = tuple(state for state in SendIntent.State.values if state not in SendIntent.TERMINAL)


def live_intent_counts_by_tenant() -> dict[tuple[int, str], int]:
    """Intents in a non-terminal state, per (tenant id, state), across all tenants: for operators
    only (metrics). Terminal states are counted as they happen (``intents.journal``)."""
    rows = (
        SendIntent.objects.filter(state__in=LIVE_STATES)
        .values("tenant_id", "state")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(row["tenant_id"], row["state"]): row["n"] for row in rows}


def oldest_queued_age_seconds(*, tenant=None) -> float | None:
    """Seconds since the oldest due, unheld queued intent became due (database clock). The sends
    of a mailbox whose key AgentMail refused wait for an admin, not for a worker: not late
    (the mailbox's state says why they wait)."""
    qs = SendIntent.objects.filter(
        state=SendIntent.State.QUEUED,
        held_reason="",
        next_attempt_at__lte=Now(),
        mailbox__key_refused_at__isnull=True,
    )
    if tenant is not None:
        qs = qs.filter(tenant=tenant)
    oldest = qs.aggregate(oldest=Min("next_attempt_at"))["oldest"]
    if oldest is None:
        return None
    return max(0.0, (db_now() - oldest).total_seconds())


def oldest_uncertain_age_seconds() -> float | None:
    """Seconds since the oldest uncertain intent's reconciliation (a replay with its key, or a
    label lookup) fell due with no worker taking it (database clock), across all tenants: what
    a stopped worker leaves behind besides queued sends, and an outcome unknown past its safe
    window stays unknown until one runs. Not counted, as in the claim: one under a live lease
    (a worker has it), one of a paused broadcast, one of a mailbox whose key was refused (it
    waits for an admin)."""
    oldest = (
        SendIntent.objects.filter(
            state=SendIntent.State.UNCERTAIN,
            next_attempt_at__lte=Now(),
            mailbox__key_refused_at__isnull=True,
        )
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=Now()))
        .filter(Q(broadcast__isnull=True) | ~Q(broadcast__state=Broadcast.State.PAUSED))
        .aggregate(oldest=Min("next_attempt_at"))["oldest"]
    )
    if oldest is None:
        return None
    return max(0.0, (db_now() - oldest).total_seconds())


# An intent that ever reached one of these states may have been sent by the provider even if we
# never learnt a message id: the call may have completed after our read timed out.
UNPROVEN_STATES = (SendIntent.State.UNCERTAIN, SendIntent.State.NEEDS_ATTENTION)


def intents_that_may_have_gone_out(*, tenant, intent_ids) -> set[int]:
    """Of these intents (not accepted), the ones whose journal shows an unproven outcome."""
    ids = [int(i) for i in intent_ids]
    if not ids:
        return set()
    return set(
        IntentEvent.objects.filter(
            tenant=tenant, intent_id__in=ids, to_state__in=UNPROVEN_STATES
        ).values_list("intent_id", flat=True)
    )


# A send in one of these states certainly did not go out by our hand (failed, blocked, expired,
# cancelled before a call) or nobody could prove it did (needs_attention). DESIGN.md: "a resend is a
# new approval and a new intent", never a retry of the old one with its key.
REOPENABLE_STATES = frozenset(
    {
        SendIntent.State.NEEDS_ATTENTION,
        SendIntent.State.FAILED,
        SendIntent.State.BLOCKED,
        SendIntent.State.CANCELLED,
        SendIntent.State.EXPIRED,
    }
)


def intent_reopenable(intent: SendIntent) -> bool:
    """Whether a person may re-approve this send's draft as a new send (see draft_reopen): the
    send did not go out, it is its draft's current one, and the draft was not reopened yet.
    Needs intent.draft and intent.draft_version loaded (intent_get does)."""
    if intent.draft is None or intent.draft_version is None:
        return False  # a broadcast's send: no draft to reopen
    return (
        intent.state in REOPENABLE_STATES
        and intent.draft.status == Draft.Status.APPROVED
        and intent.draft_version.number == intent.draft.current_version
    )


def intent_events(*, tenant, intent_id) -> list[IntentEvent]:
    intent = intent_get(tenant=tenant, intent_id=intent_id)
    return list(
        IntentEvent.objects.filter(tenant=tenant, intent=intent)
        .select_related("actor_user")
        .order_by("created_at", "id")
    )
