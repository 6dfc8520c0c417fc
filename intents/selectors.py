"""Every read of drafts and send intents that views, the API and tasks use. Always tenant-scoped:
another tenant's row and a missing row raise the same NotFound."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Min, Prefetch, Q
from django.db.models.functions import Now

from config.clock import db_now
from intents.errors import InvalidInput, NotFound
from intents.models import Draft, DraftVersion, IntentEvent, SendAttempt, SendIntent

DEFAULT_PAGE = 50
MAX_PAGE = 200


@dataclass
class DraftDetail:
    draft: Draft
    versions: list[DraftVersion]
    current: DraftVersion
    intent: SendIntent | None
    attempts: list[SendAttempt]
    events: list[IntentEvent]
    # Sends of earlier versions (the draft was reopened after they did not go out), newest first,
    # and which of them may have gone out anyway (their outcome was never proven).
    earlier_intents: list[SendIntent] = field(default_factory=list)
    unproven_intent_ids: set[int] = field(default_factory=set)


@dataclass
class Page:
    items: list
    next_cursor: str | None = None
    limit: int = DEFAULT_PAGE
    extra: dict = field(default_factory=dict)


def _as_int(value, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise NotFound("not_found", f"No such {what}.") from None


def _limit(limit) -> int:
    try:
        limit = int(limit)
    except (TypeError, ValueError):
        raise InvalidInput("limit_invalid", "limit must be an integer.", "limit") from None
    return max(1, min(limit, MAX_PAGE))


def _encode_cursor(*parts: object) -> str:
    raw = "|".join(p.isoformat() if isinstance(p, datetime) else str(p) for p in parts)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, n: int) -> list[str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = base64.urlsafe_b64decode(padded.encode()).decode().split("|")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor") from None
    if len(parts) != n:
        raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor")
    return parts


# --- drafts --------------------------------------------------------------------------------------


def draft_get(*, tenant, draft_id) -> Draft:
    draft = (
        Draft.objects.select_related("mailbox", "agent_token", "created_by", "decided_by")
        .filter(tenant=tenant, pk=_as_int(draft_id, "draft"))
        .first()
    )
    if draft is None:
        raise NotFound("not_found", "No such draft.")
    return draft


def draft_detail(*, tenant, draft_id) -> DraftDetail:
    """A draft with all its versions, its intent (if approved), the intent's attempts and the
    journal: a fixed number of queries whatever the history length."""
    draft = draft_get(tenant=tenant, draft_id=draft_id)
    versions = list(
        DraftVersion.objects.filter(tenant=tenant, draft=draft)
        .select_related("author_user", "author_token")
        .order_by("number")
    )
    current = next(v for v in versions if v.number == draft.current_version)
    # Newest first: a reopened draft has one intent per approved version, the latest is current.
    intents = list(
        SendIntent.objects.filter(tenant=tenant, draft=draft)
        .select_related("approver", "resolved_by", "draft_version")
        .order_by("-id")
    )
    intent = intents[0] if intents else None
    attempts = (
        list(SendAttempt.objects.filter(tenant=tenant, intent=intent).order_by("number"))
        if intent
        else []
    )
    # Every journal row of an intent also names its draft. An OR across the join to the intent
    # (intent__draft) defeated both foreign-key indexes: a sequential scan of the tenant's whole
    # journal per draft page (17 ms at 100,000 events, growing). Two plain columns give a
    # BitmapOr of the two indexes (0.3 ms, flat). See BENCHMARKS.md, review UI.
    journal = Q(draft=draft) if intent is None else Q(draft=draft) | Q(intent=intent)
    events = list(
        IntentEvent.objects.filter(tenant=tenant)
        .filter(journal)
        .select_related("actor_user", "actor_token")
        .order_by("created_at", "id")
    )
    unproven = {e.intent_id for e in events if e.intent_id and e.to_state in UNPROVEN_STATES}
    return DraftDetail(draft, versions, current, intent, attempts, events, intents[1:], unproven)


def draft_queue(
    *, tenant, status: str = Draft.Status.PENDING, mailbox_ids=None, cursor=None, limit=DEFAULT_PAGE
) -> Page:
    """Drafts in one status, oldest first (the review queue), keyset-paginated."""
    limit = _limit(limit)
    if status not in Draft.Status.values:
        raise InvalidInput("status_invalid", f"Unknown status {status!r}.", "status")
    qs = (
        Draft.objects.filter(tenant=tenant, status=status)
        .select_related("mailbox", "agent_token")
        .prefetch_related(
            Prefetch(
                "versions",
                queryset=DraftVersion.objects.order_by("number"),
                to_attr="all_versions",
            )
        )
        .order_by("created_at", "id")
    )
    if mailbox_ids is not None:
        qs = qs.filter(mailbox_id__in=list(mailbox_ids))
    if cursor:
        created, pk = _decode_cursor(cursor, 2)
        try:
            created_at = datetime.fromisoformat(created)
            pk = int(pk)
        except ValueError:
            raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor") from None
        qs = qs.filter(Q(created_at__gt=created_at) | Q(created_at=created_at, id__gt=pk))
    rows = list(qs[: limit + 1])
    for draft in rows:
        versions = draft.all_versions
        draft.current = next((v for v in versions if v.number == draft.current_version), None)
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = _encode_cursor(rows[-1].created_at, rows[-1].pk)
    return Page(rows, next_cursor, limit)


def draft_counts(*, tenant) -> dict[str, int]:
    counts = dict.fromkeys(Draft.Status.values, 0)
    for row in Draft.objects.filter(tenant=tenant).values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    return counts


# --- intents -------------------------------------------------------------------------------------


def intent_get(*, tenant, intent_id) -> SendIntent:
    intent = (
        SendIntent.objects.select_related("mailbox", "draft", "draft_version", "approver")
        .filter(tenant=tenant, pk=_as_int(intent_id, "send"))
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
    limit = _limit(limit)
    qs = SendIntent.objects.filter(tenant=tenant).select_related(
        "mailbox", "draft", "draft_version", "approver"
    )
    if state:
        states = [state] if isinstance(state, str) else list(state)
        unknown = [s for s in states if s not in SendIntent.State.values]
        if unknown:
            raise InvalidInput("state_invalid", f"Unknown state {unknown[0]!r}.", "state")
        qs = qs.filter(state__in=states)
    if cursor:
        (pk,) = _decode_cursor(cursor, 1)
        try:
            qs = qs.filter(id__lt=int(pk))
        except ValueError:
            raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor") from None
    rows = list(qs.order_by("-id")[: limit + 1])
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = _encode_cursor(rows[-1].pk)
    return Page(rows, next_cursor, limit)


def intent_counts(*, tenant=None) -> dict[str, int]:
    """Intents per state (every state present). Without a tenant: across all tenants, for
    operators only (the intents_status command and metrics)."""
    qs = SendIntent.objects.all() if tenant is None else SendIntent.objects.filter(tenant=tenant)
    counts = dict.fromkeys(SendIntent.State.values, 0)
    for row in qs.values("state").annotate(n=Count("id")):
        counts[row["state"]] = row["n"]
    return counts


def oldest_queued_age_seconds(*, tenant=None) -> float | None:
    """Seconds since the oldest due, unheld queued intent became due (database clock)."""
    qs = SendIntent.objects.filter(
        state=SendIntent.State.QUEUED, held_reason="", next_attempt_at__lte=Now()
    )
    if tenant is not None:
        qs = qs.filter(tenant=tenant)
    oldest = qs.aggregate(oldest=Min("next_attempt_at"))["oldest"]
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


def intent_reopenable(intent: SendIntent) -> bool:
    """Whether a person may re-approve this send's draft as a new send (see draft_reopen): the
    send did not go out, it is its draft's current one, and the draft was not reopened yet.
    Needs intent.draft and intent.draft_version loaded (intent_get does)."""
    from intents.services import REOPENABLE_STATES

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
