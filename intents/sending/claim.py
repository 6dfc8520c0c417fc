"""Claiming: due intents move to ``sending`` (or, for reconciliation, stay ``uncertain``) under a
lease whose token fences every later write and whose expiry comes from the database clock.
``FOR UPDATE SKIP LOCKED``, highest priority then oldest first, one token per send from the key's
bucket; a candidate without budget is postponed, not spun on."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.functions import Now

from config.clock import db_now
from intents.journal import Entry, journal, journal_many
from intents.models import IntentEvent, ProviderThrottle, SendAttempt, SendIntent
from intents.sending.lease import (
    Claim,
    broadcast_lets_reconcile,
    broadcast_lets_send,
    call_deadline,
    lease_duration,
    mailbox_key_usable,
)
from intents.sending.throttle import (
    broadcast_bucket,
    key_ref_for,
    lock_throttles,
    save_throttles,
    take_broadcast_token,
    take_token,
)

State = SendIntent.State


@dataclass(frozen=True)
class _Candidate:
    """A due intent as the claim reads it (plain values: up to 3x limit rows per claim)."""

    pk: int
    state: str
    attempts: int
    tenant_id: int
    draft_id: int | None
    key_ref: str
    # A broadcast's send also takes a token from its broadcast's own, slower bucket.
    broadcast_ref: str | None = None
    broadcast_rate: float | None = None


def _claim(
    *, worker: str, limit: int, intent_id: int | None, reconcile: bool, replies_only: bool = False
) -> list[Claim]:
    """Up to three times ``limit`` candidates are read so that a key without budget does not
    starve the others, but only when one of the first ``limit`` had none: a claim whose keys all
    have budget locks just the rows it leases, not twice as many more for nothing."""
    call_by = call_deadline(time.monotonic())
    wide = max(limit * 3, limit)

    def reading(reach: int) -> list[Claim] | None:
        return _claim_reading(
            reach=reach,
            wide=wide,
            worker=worker,
            limit=limit,
            intent_id=intent_id,
            reconcile=reconcile,
            replies_only=replies_only,
            call_by=call_by,
        )

    claims = reading(limit)
    if claims is None:
        claims = reading(wide)
    assert claims is not None
    return claims


def _claim_reading(
    *,
    reach: int,
    wide: int,
    worker: str,
    limit: int,
    intent_id: int | None,
    reconcile: bool,
    replies_only: bool,
    call_by: float,
) -> list[Claim] | None:
    """The claim over the first ``reach`` candidates, read on up to ``wide`` in all if one of
    them had no budget, as if all had been read at once (the buckets carry on from the first
    ones). None, with nothing written and every row let go, when those further candidates need
    a bucket not yet locked: it cannot be locked after the others (two claimers could each hold
    the bucket the other waits for), so the caller starts again reading ``wide`` at once."""
    with transaction.atomic():
        now = db_now()
        candidates = _candidates(
            now, reach=reach, intent_id=intent_id, reconcile=reconcile, replies_only=replies_only
        )
        throttles = lock_throttles(_buckets(candidates), now)
        if any(row.refilled_at > now for row in throttles.values()):
            # Another claimer refilled a bucket, with its own later clock reading, while this
            # one waited for the row: read the clock again, or that refill would look like a
            # 429's pause and the claim would skip (and postpone) intents that may go now.
            now = db_now()
        leased, postponed = _take_tokens(candidates, throttles, now, limit=limit)
        if postponed and len(candidates) == reach < wide:
            further = _candidates(
                now,
                reach=wide - reach,
                intent_id=intent_id,
                reconcile=reconcile,
                replies_only=replies_only,
                read=[c.pk for c in candidates],
            )
            if not _buckets(further) <= throttles.keys():
                transaction.set_rollback(True)
                return None
            more, more_postponed = _take_tokens(further, throttles, now, limit=limit - len(leased))
            leased += more
            postponed += more_postponed
        _postpone(postponed)
        won = _lease_rows(
            leased, worker=worker, expires=now + lease_duration(), reconcile=reconcile
        )
        if not reconcile:
            _journal_claimed([c for c, _ in leased if c.pk in won], worker=worker)
        claims = [
            Claim(c.pk, token, worker, reconcile, call_by) for c, token in leased if c.pk in won
        ]
        save_throttles(throttles.values())
    return claims


def _buckets(candidates: list[_Candidate]) -> set[str]:
    return {c.key_ref for c in candidates} | {
        c.broadcast_ref for c in candidates if c.broadcast_ref
    }


def _candidates(
    now: datetime,
    *,
    reach: int,
    intent_id: int | None,
    reconcile: bool,
    replies_only: bool = False,
    read: list[int] | None = None,
) -> list[_Candidate]:
    """Up to ``reach`` due intents, locked (``SKIP LOCKED``), highest priority then oldest
    first, after those already ``read``."""
    if reconcile:
        due = (
            Q(state=State.UNCERTAIN, next_attempt_at__lte=now)
            & (Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now))
            & broadcast_lets_reconcile()
        )
    else:
        due = (
            Q(state=State.QUEUED, held_reason="", next_attempt_at__lte=now)
            & (Q(not_after__isnull=True) | Q(not_after__gt=now))
            # Inside its undo window an intent is not ours to send (intent_undo may still win).
            & (Q(hold_until__isnull=True) | Q(hold_until__lte=now))
        )
        due &= broadcast_lets_send()
    if replies_only:
        due &= Q(broadcast__isnull=True)
    # A mailbox whose key AgentMail refused: its sends and reconciliations wait, uncalled.
    due &= mailbox_key_usable()
    qs = SendIntent.objects.select_for_update(skip_locked=True, of=("self",)).filter(due)
    if intent_id is not None:
        qs = qs.filter(pk=intent_id)
    if read:
        qs = qs.exclude(pk__in=read)
    return [
        _Candidate(
            pk,
            state,
            attempts,
            tenant_id,
            draft_id,
            key_ref_for(key_id, mailbox_id),
            broadcast_bucket(broadcast_id) if broadcast_id and not reconcile else None,
            rate,
        )
        for pk, state, attempts, tenant_id, draft_id, mailbox_id, key_id, broadcast_id, rate in (
            qs.order_by("-priority", "next_attempt_at", "id").values_list(
                "id",
                "state",
                "attempts",
                "tenant_id",
                "draft_id",
                "mailbox_id",
                "mailbox__provider_api_key_id",
                "broadcast_id",
                "broadcast__rate_per_second",
            )[:reach]
        )
    ]


def _take_tokens(
    candidates: list[_Candidate],
    throttles: dict[str, ProviderThrottle],
    now: datetime,
    *,
    limit: int,
) -> tuple[list[tuple[_Candidate, uuid.UUID]], list[tuple[int, str, datetime]]]:
    """(leased candidates with their new lease tokens, postponed (id, state, due) triples)."""
    leased: list[tuple[_Candidate, uuid.UUID]] = []
    postponed: list[tuple[int, str, datetime]] = []
    for candidate in candidates:
        if len(leased) >= limit:
            break
        token = uuid.uuid4()
        paced = throttles[candidate.broadcast_ref] if candidate.broadcast_ref else None
        wait = take_broadcast_token(paced, now, candidate.broadcast_rate) if paced else 0.0
        if not wait:
            wait = take_token(throttles[candidate.key_ref], now, token)
            if wait and paced is not None:
                paced.tokens += 1  # not sent: the broadcast's token goes back
        if wait:
            # Not due until the key has budget again; keeps claimers from spinning on it.
            postponed.append((candidate.pk, candidate.state, now + timedelta(seconds=wait)))
            continue
        leased.append((candidate, token))
    return leased, postponed


def _journal_claimed(claimed: list[_Candidate], *, worker: str) -> None:
    journal_many(
        [
            Entry(
                tenant_id=c.tenant_id,
                draft_id=c.draft_id,
                intent_id=c.pk,
                actor_kind=IntentEvent.Actor.WORKER,
                actor_label=worker,
                action="intent.claimed",
                from_state=State.QUEUED,
                to_state=State.SENDING,
                data={"attempt": c.attempts + 1},
            )
            for c in claimed
        ]
    )


def _postpone(postponed: list[tuple[int, str, datetime]]) -> None:
    """Move throttled candidates' next attempt, each guarded by the state it was read in."""
    if not postponed:
        return
    ids, states, due = (list(column) for column in zip(*postponed, strict=True))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SendIntent._meta.db_table} AS i SET next_attempt_at = u.due "  # noqa: S608
            "FROM unnest(%s::bigint[], %s::text[], %s::timestamptz[]) AS u(id, state, due) "
            "WHERE i.id = u.id AND i.state = u.state",
            [ids, states, due],
        )


def _lease_rows(leased, *, worker: str, expires: datetime, reconcile: bool) -> set[int]:
    """One guarded UPDATE for the whole batch, each row with its own lease token; returns the ids
    it changed (rows still in their source state)."""
    if not leased:
        return set()
    table = SendIntent._meta.db_table
    source = State.UNCERTAIN if reconcile else State.QUEUED
    target = State.UNCERTAIN if reconcile else State.SENDING
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS i SET lease_token = v.token, lease_owner = %s, "  # noqa: S608
            "lease_expires_at = %s, attempts = i.attempts + 1, "
            "first_attempt_at = COALESCE(i.first_attempt_at, STATEMENT_TIMESTAMP()), "
            "updated_at = STATEMENT_TIMESTAMP(), state = %s "
            "FROM unnest(%s::bigint[], %s::uuid[]) AS v(id, token) "
            "WHERE i.id = v.id AND i.state = %s RETURNING i.id",
            [
                worker[:100],
                expires,
                target,
                [intent.pk for intent, _ in leased],
                [token for _, token in leased],
                source,
            ],
        )
        return {row[0] for row in cursor.fetchall()}


def intent_claim(
    *, worker: str, limit: int = 1, intent_id: int | None = None, replies_only: bool = False
) -> list[Claim]:
    """Lease up to ``limit`` due queued intents (highest priority, then oldest first);
    ``replies_only``: none of a broadcast's."""
    return _claim(
        worker=worker,
        limit=limit,
        intent_id=intent_id,
        reconcile=False,
        replies_only=replies_only,
    )


def intent_claim_uncertain(
    *, worker: str, limit: int = 1, intent_id: int | None = None, replies_only: bool = False
) -> list[Claim]:
    """Lease up to ``limit`` uncertain intents whose reconciliation is due; ``replies_only``:
    none of a broadcast's."""
    return _claim(
        worker=worker,
        limit=limit,
        intent_id=intent_id,
        reconcile=True,
        replies_only=replies_only,
    )


def intents_hand_back(claims: list[Claim]) -> int:
    """A stopping worker gives back the leases it took but has not used, so that another worker
    may claim them at once instead of after the lease expires.

    Only a lease with no attempt row under its token is given back: without that row no provider
    call was made (the row is committed before every call), so the intent is exactly as it was
    before the claim. One whose row exists may have its call on the way; it is left to its
    worker or, if that worker dies, to the sweep. Fenced by the lease token: a lease another
    worker took over in the meantime is not touched. Returns the number given back.
    """
    if not claims:
        return 0
    tokens = {claim.intent_id: claim.lease_token for claim in claims}
    attempted = SendAttempt.objects.filter(
        intent_id=OuterRef("pk"), lease_token=OuterRef("lease_token")
    )
    handed = 0
    with transaction.atomic():
        rows = list(
            SendIntent.objects.select_for_update(of=("self",))
            .filter(pk__in=list(tokens), state__in=(State.SENDING, State.UNCERTAIN))
            .exclude(Exists(attempted))
            .order_by("id")
            .values_list("pk", "state", "lease_token", "lease_owner", "tenant_id", "draft_id")
        )
        for pk, state, token, owner, tenant_id, draft_id in rows:
            if token != tokens[pk]:
                continue
            to_state = State.QUEUED if state == State.SENDING else State.UNCERTAIN
            changed = SendIntent.objects.filter(pk=pk, lease_token=token, state=state).update(
                state=to_state,
                lease_token=None,
                lease_owner="",
                lease_expires_at=None,
                # The claim counted an attempt that was never made.
                attempts=F("attempts") - 1,
                updated_at=Now(),
            )
            if not changed:
                continue
            handed += 1
            if to_state != state:
                journal(
                    tenant=tenant_id,
                    intent=pk,
                    draft=draft_id,
                    action="intent.handed_back",
                    actor_kind=IntentEvent.Actor.WORKER,
                    actor_label=owner,
                    from_state=state,
                    to_state=to_state,
                    reason="the worker stopped before its call",
                )
    return handed
