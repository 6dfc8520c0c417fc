"""The send worker: claim, re-check, call AgentMail once per attempt, record fenced by the lease.

Life of one attempt (DESIGN.md "Send intent lifecycle"):

1. ``intent_claim`` moves due ``queued`` intents to ``sending`` under a lease whose token fences
   every later write and whose expiry comes from the database clock. ``intent_claim_uncertain``
   leases ``uncertain`` intents for reconciliation (their state stays ``uncertain``).
2. ``intent_begin_attempts`` re-checks everything the contract names for each intent of the
   claimed batch and, in the same transaction, commits their SendAttempt rows; only then is the
   provider called (the batch's calls concurrently, no transaction open). A failed check ends that
   intent (``blocked``/``expired``/``failed``) with zero provider calls; the others go on.
3. ``intent_record_accepted`` (the batch's accepted sends, one transaction) and
   ``intent_record_result`` (any other answer, one by one) write the classified outcome only while
   the lease is still ours. A worker whose lease was taken over writes its attempt row (outcome
   ``fenced``) and nothing else: the provider's idempotency key makes its call and the new
   owner's call one send.

Batching changes the number of transactions, not what is checked or written per intent; if a
batch transaction fails, its intents are retried one by one, so one intent's bad data cannot hold
back the others.

Time comes from the database (leases, next_attempt_at). The safe window is judged by the later of
the database clock and this process's clock, so neither a lagging host nor a lagging database
can stretch an automatic send past the provider's 24 h deduplication window.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from config.clock import db_now
from config.perprocess import PerProcess
from intents.hashing import version_hash
from intents.models import IntentEvent, ProviderThrottle, SendAttempt, SendIntent, Suppression
from intents.policy import (
    active_memberships,
    can_approve,
    normalize_address,
    recipient_problems,
    suppressed_addresses,
)
from intents.services import Entry, apply_deferred_events, journal, journal_many
from mailboxes import provider

log = logging.getLogger("intents.execution")

State = SendIntent.State
AttemptOutcome = SendAttempt.Outcome


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"[:100]


def _lease() -> timedelta:
    return timedelta(seconds=settings.SEND_LEASE_SECONDS)


def _safe_window() -> timedelta:
    return timedelta(seconds=settings.SEND_SAFE_WINDOW_SECONDS)


def _circuit_failures() -> int:
    # Settings win; the environment fallback stands in until config/settings.py names them.
    return int(settings.SEND_CIRCUIT_FAILURES)


def _circuit_cooldown() -> timedelta:
    return timedelta(seconds=float(settings.SEND_CIRCUIT_COOLDOWN_SECONDS))


def _strict_now(db: datetime) -> datetime:
    """The later of the database clock and ours: used only to refuse, never to allow."""
    return max(db, timezone.now())


def backoff_seconds(attempts: int, retry_after: float | None = None) -> float:
    """Exponential backoff with full jitter; the provider's Retry-After is a floor."""
    ceiling = min(
        settings.SEND_BACKOFF_CAP_SECONDS,
        settings.SEND_BACKOFF_BASE_SECONDS * (2 ** max(0, attempts - 1)),
    )
    delay = random.uniform(0, ceiling)
    if retry_after is not None:
        delay = max(delay, float(retry_after))
    return delay


def throttle_key(mailbox) -> str:
    return _key_ref(mailbox.provider_api_key_id, mailbox.pk)


def _key_ref(provider_api_key_id: str, mailbox_id: int) -> str:
    # Rate limits are per AgentMail key; each mailbox sends with its own inbox-scoped key.
    return f"key:{provider_api_key_id}" if provider_api_key_id else f"mailbox:{mailbox_id}"


@dataclass(frozen=True)
class Claim:
    intent_id: int
    lease_token: uuid.UUID
    worker: str
    reconcile: bool = False


# --- throttle and circuit breaker ----------------------------------------------------------------


def _lock_throttles(keys: set[str], now: datetime) -> dict[str, ProviderThrottle]:
    if not keys:
        return {}

    def lock(wanted):
        # Sorted: two claimers locking several keys always do it in the same order (no deadlock).
        rows = ProviderThrottle.objects.select_for_update().filter(key_ref__in=wanted)
        return {row.key_ref: row for row in rows.order_by("key_ref")}

    rows = lock(keys)
    missing = keys - rows.keys()
    if missing:
        # A key's first claim creates its bucket (full); a concurrent first claim's row wins.
        ProviderThrottle.objects.bulk_create(
            [
                ProviderThrottle(key_ref=k, tokens=settings.SEND_BURST_PER_KEY, refilled_at=now)
                for k in missing
            ],
            ignore_conflicts=True,
        )
        rows |= lock(missing)
    return rows


def _take_token(row: ProviderThrottle, now: datetime, probe: uuid.UUID) -> float:
    """0 when this claim may call the provider (token taken), else seconds to wait."""
    if (
        row.circuit != ProviderThrottle.Circuit.CLOSED
        and row.opened_until is not None
        and row.opened_until > now
    ):
        wait = (row.opened_until - now).total_seconds()
        if row.circuit == ProviderThrottle.Circuit.HALF_OPEN:
            # A probe is in flight. Its opened_until is the probe's lease expiry (for a lost
            # probe), but the probe answers within one provider call: re-check soon, or a
            # recovered provider's backlog waits a whole lease (BENCHMARKS.md, recovery).
            return max(0.05, min(wait, _circuit_cooldown().total_seconds(), 1.0))
        return max(0.5, wait)
    rate = max(settings.SEND_RATE_PER_KEY, 0.001)
    if row.refilled_at > now:
        # A 429 emptied the bucket until its Retry-After.
        return (row.refilled_at - now).total_seconds() + 1 / rate
    elapsed = (now - row.refilled_at).total_seconds()
    row.tokens = min(settings.SEND_BURST_PER_KEY, row.tokens + elapsed * rate)
    row.refilled_at = now
    if row.tokens < 1:
        return max(0.05, (1 - row.tokens) / rate)
    row.tokens -= 1
    if row.circuit != ProviderThrottle.Circuit.CLOSED:
        # Cool-down over (or the last probe was lost): exactly this request probes the provider.
        row.circuit = ProviderThrottle.Circuit.HALF_OPEN
        row.probe_token = probe
        row.opened_until = now + _lease()
    return 0.0


def _throttle_feedback(key_ref: str, result: provider.SendResult) -> None:
    clean = result.http_status != 429 and result.outcome in (
        provider.Outcome.ACCEPTED,
        provider.Outcome.PERMANENT,
    )
    if clean:
        _throttles_clean([key_ref])
        return
    row = ProviderThrottle.objects.select_for_update().filter(key_ref=key_ref).first()
    if row is None:
        return
    now = db_now()
    fields = ["consecutive_failures", "circuit", "opened_until", "probe_token"]
    if result.http_status == 429:
        # The key is out of budget: nothing from it until Retry-After has passed.
        row.tokens = 0
        row.refilled_at = now + timedelta(seconds=result.retry_after or 1)
        fields += ["tokens", "refilled_at"]
    else:
        row.consecutive_failures += 1
        probe_failed = row.circuit == ProviderThrottle.Circuit.HALF_OPEN
        if probe_failed or row.consecutive_failures >= _circuit_failures():
            row.circuit = ProviderThrottle.Circuit.OPEN
            row.opened_until = now + _circuit_cooldown()
            row.probe_token = None
            log.warning("intents.circuit.opened", extra={"key_ref": key_ref})
    row.save(update_fields=fields)


def _throttles_clean(key_refs: list[str]) -> None:
    """A clean answer closes its key's circuit and resets its failure count. The common case is
    one conditional UPDATE that matches nothing (the rows are already closed and clean), instead
    of locking and rewriting them with the same values per send; rows that do change are locked
    in key order, as in ``_lock_throttles``."""
    table = ProviderThrottle._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET consecutive_failures = 0, circuit = %s, opened_until = NULL, "  # noqa: S608
            f"probe_token = NULL WHERE key_ref IN (SELECT key_ref FROM {table} "
            "WHERE key_ref = ANY(%s) AND (circuit <> %s OR consecutive_failures <> 0 "
            "OR opened_until IS NOT NULL OR probe_token IS NOT NULL) "
            "ORDER BY key_ref FOR UPDATE)",
            [
                ProviderThrottle.Circuit.CLOSED,
                sorted(set(key_refs)),
                ProviderThrottle.Circuit.CLOSED,
            ],
        )


# --- claiming ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    """A due intent as the claim reads it (plain values: up to 3x limit rows per claim)."""

    pk: int
    state: str
    attempts: int
    tenant_id: int
    draft_id: int
    key_ref: str


def _claim(*, worker: str, limit: int, intent_id: int | None, reconcile: bool) -> list[Claim]:
    leased: list[tuple[_Candidate, uuid.UUID]] = []
    with transaction.atomic():
        now = db_now()
        if reconcile:
            due = Q(state=State.UNCERTAIN, next_attempt_at__lte=now) & (
                Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now)
            )
        else:
            due = Q(state=State.QUEUED, held_reason="", next_attempt_at__lte=now) & (
                Q(not_after__isnull=True) | Q(not_after__gt=now)
            )
        qs = SendIntent.objects.select_for_update(skip_locked=True, of=("self",)).filter(due)
        if intent_id is not None:
            qs = qs.filter(pk=intent_id)
        candidates = [
            _Candidate(pk, state, attempts, tenant_id, draft_id, _key_ref(key_id, mailbox_id))
            for pk, state, attempts, tenant_id, draft_id, mailbox_id, key_id in qs.order_by(
                "-priority", "next_attempt_at", "id"
            ).values_list(
                "id",
                "state",
                "attempts",
                "tenant_id",
                "draft_id",
                "mailbox_id",
                "mailbox__provider_api_key_id",
            )[: max(limit * 3, limit)]
        ]
        throttles = _lock_throttles({c.key_ref for c in candidates}, now)
        if any(row.refilled_at > now for row in throttles.values()):
            # Another claimer refilled a bucket, with its own later clock reading, while this
            # one waited for the row: read the clock again, or that refill would look like a
            # 429's pause and the claim would skip (and postpone) intents that may go now.
            now = db_now()
        postponed: list[tuple[int, str, datetime]] = []
        for candidate in candidates:
            if len(leased) >= limit:
                break
            token = uuid.uuid4()
            wait = _take_token(throttles[candidate.key_ref], now, token)
            if wait:
                # Not due until the key has budget again; keeps claimers from spinning on it.
                postponed.append((candidate.pk, candidate.state, now + timedelta(seconds=wait)))
                continue
            leased.append((candidate, token))
        _postpone(postponed)
        won = _lease_rows(leased, worker=worker, expires=now + _lease(), reconcile=reconcile)
        if not reconcile:
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
                    for c, _ in leased
                    if c.pk in won
                ]
            )
        claims = [Claim(c.pk, token, worker, reconcile) for c, token in leased if c.pk in won]
        _save_throttles(throttles.values())
    return claims


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


def _save_throttles(rows) -> None:
    """Write back the locked buckets a claim changed, in one statement."""
    rows = list(rows)
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {ProviderThrottle._meta.db_table} AS t SET tokens = u.tokens, "  # noqa: S608
            "refilled_at = u.refilled_at, circuit = u.circuit, opened_until = u.opened_until, "
            "probe_token = u.probe_token FROM unnest(%s::text[], %s::float8[], "
            "%s::timestamptz[], %s::text[], %s::timestamptz[], %s::uuid[]) "
            "AS u(key_ref, tokens, refilled_at, circuit, opened_until, probe_token) "
            "WHERE t.key_ref = u.key_ref",
            [
                [r.key_ref for r in rows],
                [float(r.tokens) for r in rows],
                [r.refilled_at for r in rows],
                [r.circuit for r in rows],
                [r.opened_until for r in rows],
                [r.probe_token for r in rows],
            ],
        )


def _lease_rows(leased, *, worker: str, expires: datetime, reconcile: bool) -> set[int]:
    """One guarded UPDATE for the whole batch, each row with its own lease token; returns the ids
    it changed (rows still in their source state)."""
    if not leased:
        return set()
    table = SendIntent._meta.db_table
    values = ", ".join(["(%s, %s)"] * len(leased))
    params: list = []
    for intent, token in leased:
        params += [intent.pk, str(token)]
    source = State.UNCERTAIN if reconcile else State.QUEUED
    target = State.UNCERTAIN if reconcile else State.SENDING
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS i SET lease_token = v.token::uuid, lease_owner = %s, "  # noqa: S608
            "lease_expires_at = %s, attempts = i.attempts + 1, "
            "first_attempt_at = COALESCE(i.first_attempt_at, STATEMENT_TIMESTAMP()), "
            "updated_at = STATEMENT_TIMESTAMP(), state = %s "
            f"FROM (VALUES {values}) AS v(id, token) "
            "WHERE i.id = v.id::bigint AND i.state = %s RETURNING i.id",
            [worker[:100], expires, target, *params, source],
        )
        return {row[0] for row in cursor.fetchall()}


def intent_claim(*, worker: str, limit: int = 1, intent_id: int | None = None) -> list[Claim]:
    """Lease up to ``limit`` due queued intents (highest priority, then oldest first)."""
    return _claim(worker=worker, limit=limit, intent_id=intent_id, reconcile=False)


def intent_claim_uncertain(
    *, worker: str, limit: int = 1, intent_id: int | None = None
) -> list[Claim]:
    """Lease up to ``limit`` uncertain intents whose reconciliation is due."""
    return _claim(worker=worker, limit=limit, intent_id=intent_id, reconcile=True)


# --- the pre-call check and the attempt row ------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    attempt_id: int
    kind: str
    api_key: str
    request: provider.SendRequest | None
    inbox_id: str
    label: str
    key_ref: str
    # A lookup lists the inbox's messages from here when the labelled query finds nothing.
    first_attempt_at: datetime | None = None


def _lock_leased(claims: list[Claim], *, live: bool = True) -> dict[int, SendIntent]:
    """The batch's leased rows, locked (in id order), with what the pre-call check reads, in one
    statement; keyed by intent id. A claim whose lease is no longer ours is simply absent.

    The related rows are read in the same statement as the lock, so they are as fresh as a
    separate query would be. ``db_now`` (statement_timestamp) and the next attempt number come
    along, saving two round trips per intent.
    """
    if not claims:
        return {}
    tokens = {claim.intent_id: claim.lease_token for claim in claims}
    qs = SendIntent.objects.select_for_update(of=("self",)).filter(
        pk__in=list(tokens), state__in=(State.SENDING, State.UNCERTAIN)
    )
    if live:
        qs = qs.filter(lease_expires_at__gt=Now())
    last_number = (
        SendAttempt.objects.filter(intent_id=OuterRef("pk")).order_by("-number").values("number")
    )
    rows = (
        qs.select_related("mailbox", "tenant", "draft", "draft_version")
        .annotate(
            db_now=Now(),
            next_attempt_number=Coalesce(Subquery(last_number[:1]), Value(0)) + 1,
        )
        .order_by("id")
    )
    # The fence: a row whose lease another worker holds now was locked only until our commit,
    # and is not ours to touch.
    return {row.pk: row for row in rows if row.lease_token == tokens[row.pk]}


def _lock_leased_for_record(claims: list[Claim]) -> dict[int, _Leased]:
    """The batch's leased rows, locked (in id order), with only what recording a result reads
    (every write after it is fenced by the lease token); keyed by intent id. Plain SQL: this runs
    for every provider call."""
    if not claims:
        return {}
    values = ", ".join(["(%s::bigint, %s::uuid)"] * len(claims))
    params: list = []
    for claim in claims:
        params += [claim.intent_id, str(claim.lease_token)]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.id, i.tenant_id, i.draft_id, i.state, i.attempts, i.first_attempt_at, "  # noqa: S608
            f"i.recipients FROM {SendIntent._meta.db_table} AS i "
            f"JOIN (VALUES {values}) AS v(id, token) ON i.id = v.id AND i.lease_token = v.token "
            "WHERE i.state IN (%s, %s) ORDER BY i.id FOR UPDATE OF i",
            [*params, State.SENDING, State.UNCERTAIN],
        )
        rows = cursor.fetchall()
    locked = {}
    for pk, tenant_id, draft_id, state, attempts, first_attempt_at, recipients in rows:
        if isinstance(recipients, str | bytes):
            recipients = json.loads(recipients)
        locked[pk] = _Leased(pk, tenant_id, draft_id, state, attempts, first_attempt_at, recipients)
    return locked


@dataclass(frozen=True)
class _Leased:
    """A leased intent as recording reads it (plain values; a model instance per row costs more
    than the rest of recording it)."""

    pk: int
    tenant_id: int
    draft_id: int
    state: str
    attempts: int
    first_attempt_at: datetime | None
    recipients: dict


@dataclass(frozen=True)
class CheckFacts:
    """What the pre-call check reads besides the locked rows, for a whole batch in two queries:
    active memberships by (tenant id, user id), suppressed (tenant id, address) pairs."""

    memberships: dict
    suppressed: set

    @classmethod
    def load(cls, intents: list[SendIntent]) -> CheckFacts:
        pairs = []
        for intent in intents:
            for raw in intent.draft_version.all_recipients:
                try:
                    pairs.append((intent.tenant_id, normalize_address(raw)))
                except ValueError:
                    continue  # reported as invalid by the check itself
        return cls(
            memberships=active_memberships(
                (i.tenant_id, i.approver_id) for i in intents if i.approver_id is not None
            ),
            suppressed=suppressed_addresses(pairs),
        )


def policy_problem(intent: SendIntent, facts: CheckFacts) -> tuple[str, str] | None:
    """(code, reason) for the first contract check that fails, or None.

    Expects ``intent`` from ``_lock_leased``: its tenant, mailbox, draft and version were read in
    the locking statement (fresh). ``facts`` are the membership and suppressions read in the same
    transaction (``CheckFacts.load`` of the whole batch).
    """
    tenant = intent.tenant
    if not tenant.is_active:
        return "tenant_inactive", "The tenant is suspended."
    mailbox = intent.mailbox
    if mailbox.tenant_id != intent.tenant_id:
        return "mailbox_foreign", "The mailbox does not belong to the intent's tenant."
    if not mailbox.is_active:
        return "mailbox_inactive", f"{mailbox.address} is not active."
    membership = facts.memberships.get((intent.tenant_id, intent.approver_id))
    if not can_approve(membership=membership, mailbox=mailbox):
        return (
            "approver_no_right",
            "The approver no longer has the right to send from this mailbox.",
        )
    version = intent.draft_version
    if version.draft_id != intent.draft_id or version.tenant_id != intent.tenant_id:
        return "hash_mismatch", "The approved version does not belong to this draft."
    if version.body_purged_at is not None:
        return "body_purged", "The approved body was purged by retention."
    # Same draft row as the one locked with the intent (checked above): no reload for the hash.
    version.draft = intent.draft
    if intent.content_hash != version.content_hash or intent.content_hash != version_hash(version):
        return "hash_mismatch", "The stored content no longer matches what was approved."
    if intent.recipients != version.recipients:
        return "recipients_changed", "The recipients differ from those approved."
    problems = recipient_problems(
        tenant=tenant,
        mailbox=mailbox,
        addresses=version.all_recipients,
        suppressed={a for t, a in facts.suppressed if t == intent.tenant_id},
    )
    if problems:
        code = {"invalid": "recipient_invalid", "not_allowed": "recipient_not_allowed"}.get(
            problems[0].code, "recipient_suppressed"
        )
        return code, problems[0].message
    return None


def _finish(
    intent: SendIntent | _Leased,
    claim: Claim,
    *,
    to_state: str,
    action: str,
    reason: str = "",
    code: str = "",
    data: dict | None = None,
    **fields,
) -> bool:
    """Fenced transition out of the lease. True when the row was still ours."""
    changed = SendIntent.objects.filter(
        pk=intent.pk, lease_token=claim.lease_token, state=intent.state
    ).update(
        state=to_state,
        lease_token=None,
        lease_owner="",
        lease_expires_at=None,
        updated_at=Now(),
        **({"last_error_code": code[:64], "last_error_detail": reason} if code else {}),
        **fields,
    )
    if changed:
        journal(
            tenant=intent.tenant_id,
            intent=intent.pk,
            draft=intent.draft_id,
            action=action,
            actor_kind=IntentEvent.Actor.WORKER,
            actor_label=claim.worker,
            from_state=intent.state,
            to_state=to_state,
            reason=reason,
            data={**({"code": code} if code else {}), **(data or {})},
        )
    return bool(changed)


def intent_begin_attempts(claims: list[Claim]) -> dict[int, Prepared | None]:
    """Re-check a claimed batch, then commit its attempt rows, in one transaction.

    Per intent exactly what one at a time would do: the locked rows, memberships and
    suppressions are read in this transaction, an intent that fails a check ends here with zero
    provider calls, and every other gets its attempt row. Nothing is sent before the commit.
    Returns, per claimed intent id, what to call, or None when nothing may be sent (and nothing
    was): blocked, failed, or no longer ours.
    """
    prepared: dict[int, Prepared | None] = {claim.intent_id: None for claim in claims}
    with transaction.atomic():
        locked = _lock_leased(claims)
        facts = CheckFacts.load(list(locked.values()))
        started = []
        for claim in claims:
            intent = locked.get(claim.intent_id)
            if intent is None:
                continue
            kind = _attempt_kind(intent, claim, policy_problem(intent, facts))
            if kind is None:
                continue
            started.append((intent, claim, kind))
        attempt_ids = _insert_attempts(started)
        api_keys: dict[int, str] = {}  # opened once per mailbox of the batch
        for intent, _, kind in started:
            mailbox = intent.mailbox
            if mailbox.pk not in api_keys:
                api_keys[mailbox.pk] = mailbox.api_key()
            prepared[intent.pk] = _prepared(
                intent, attempt_ids[intent.pk], kind, api_keys[mailbox.pk]
            )
    return prepared


def _insert_attempts(started: list[tuple[SendIntent, Claim, str]]) -> dict[int, int]:
    """The batch's attempt rows (outcome pending, started on the database clock), in one
    statement whose text does not depend on the batch size; returns attempt ids by intent id."""
    if not started:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {SendAttempt._meta.db_table} (intent_id, tenant_id, number, kind, "  # noqa: S608
            "worker, lease_token, started_at, outcome, error_code, error_detail, "
            "provider_message_id) SELECT i, t, n, k, w, l, s, %s, '', '', '' FROM unnest("
            "%s::bigint[], %s::bigint[], %s::int[], %s::text[], %s::text[], %s::uuid[], "
            "%s::timestamptz[]) AS u(i, t, n, k, w, l, s) RETURNING intent_id, id",
            [
                AttemptOutcome.PENDING,
                [intent.pk for intent, _, _ in started],
                [intent.tenant_id for intent, _, _ in started],
                [intent.next_attempt_number for intent, _, _ in started],
                [kind for _, _, kind in started],
                [claim.worker[:100] for _, claim, _ in started],
                [claim.lease_token for _, claim, _ in started],
                [intent.db_now for intent, _, _ in started],
            ],
        )
        return dict(cursor.fetchall())


def intent_begin_attempt(claim: Claim) -> Prepared | None:
    """Re-check one claim, then commit its attempt row (``intent_begin_attempts`` of one)."""
    return intent_begin_attempts([claim])[claim.intent_id]


def _attempt_kind(intent: SendIntent, claim: Claim, problem) -> str | None:
    """The kind of attempt this leased intent may make now, or None after ending it here."""
    strict = _strict_now(intent.db_now)
    window_passed = (
        intent.first_attempt_at is not None and strict - intent.first_attempt_at > _safe_window()
    )
    not_after_passed = intent.not_after is not None and intent.not_after <= strict
    if intent.state == State.UNCERTAIN:
        # A replay may perform the first send, so it needs every check a send needs; a label
        # lookup only reads, and is the only way left once the key may have expired.
        exhausted = intent.attempts > settings.SEND_MAX_ATTEMPTS
        if problem or not_after_passed or window_passed or exhausted:
            return SendAttempt.Kind.LOOKUP
        return SendAttempt.Kind.REPLAY
    if not_after_passed:
        # The claim skips these (the sweep expires them from queued); this closes the gap
        # between claim and call, as a policy stop.
        _finish(
            intent,
            claim,
            to_state=State.BLOCKED,
            action="intent.blocked",
            reason="not_after passed before sending",
            code="not_after_passed",
        )
        return None
    if problem:
        _finish(
            intent,
            claim,
            to_state=State.BLOCKED,
            action="intent.blocked",
            reason=problem[1],
            code=problem[0],
        )
        log.info("intents.intent.blocked", extra={"intent_id": intent.pk, "code": problem[0]})
        return None
    if window_passed:
        # Every earlier attempt was certainly not processed (else it would be uncertain).
        _finish(
            intent,
            claim,
            to_state=State.FAILED,
            action="intent.failed",
            reason="Gave up: the safe retry window passed.",
            code="max_age",
        )
        return None
    return SendAttempt.Kind.SEND


def _prepared(intent: SendIntent, attempt_id: int, kind: str, api_key: str) -> Prepared:
    version = intent.draft_version
    request = None
    if kind != SendAttempt.Kind.LOOKUP:
        request = provider.SendRequest(
            inbox_id=intent.mailbox.inbox_id,
            to=list(version.to),
            cc=list(version.cc),
            bcc=list(version.bcc),
            subject=version.subject,
            text=version.text,
            html=version.html,
            labels=[intent.label],
            idempotency_key=intent.idempotency_key,
            reply_to_message_id=intent.draft.in_reply_to,
        )
    return Prepared(
        attempt_id=attempt_id,
        kind=kind,
        api_key=api_key,
        request=request,
        inbox_id=intent.mailbox.inbox_id,
        label=intent.label,
        key_ref=throttle_key(intent.mailbox),
        first_attempt_at=intent.first_attempt_at,
    )


# --- recording results ---------------------------------------------------------------------------


def _close_attempt(attempt_id: int, outcome: str, result: provider.SendResult | None, **extra):
    fields = {"finished_at": Now(), "outcome": outcome}
    if result is not None:
        fields.update(
            http_status=result.http_status,
            error_code=result.error_code[:64],
            error_detail=result.error_message[:2000],
            latency_ms=result.latency_ms,
            provider_message_id=result.message_id,
        )
    fields.update(extra)
    SendAttempt.objects.filter(pk=attempt_id).update(**fields)


_ATTEMPT_OUTCOME = {
    provider.Outcome.ACCEPTED: AttemptOutcome.ACCEPTED,
    provider.Outcome.RETRY_LATER: AttemptOutcome.RETRY,
    provider.Outcome.UNCERTAIN: AttemptOutcome.UNCERTAIN,
    provider.Outcome.PERMANENT: AttemptOutcome.PERMANENT,
}


@dataclass(frozen=True)
class _Acceptance:
    intent: _Leased
    claim: Claim
    message_id: str
    thread_id: str
    how: str


def _mark_accepted(acceptances: list[_Acceptance]) -> set[int]:
    """Fenced move of each intent to ``accepted`` with its provider ids and a journal row, in two
    statements for the whole batch; returns the ids moved. Runs inside the caller's transaction,
    after the rows were locked."""
    if not acceptances:
        return set()
    values = ", ".join(["(%s::bigint, %s::uuid, %s::text, %s::text, %s::text)"] * len(acceptances))
    params: list = []
    for a in acceptances:
        params += [a.intent.pk, str(a.claim.lease_token), a.intent.state, a.message_id]
        params.append(a.thread_id[:255])
    with connection.cursor() as cursor:
        # What _finish writes for any transition out of the lease, plus the provider's ids.
        cursor.execute(
            f"UPDATE {SendIntent._meta.db_table} AS i SET state = %s, lease_token = NULL, "  # noqa: S608
            "lease_owner = '', lease_expires_at = NULL, updated_at = STATEMENT_TIMESTAMP(), "
            "last_error_code = '', last_error_detail = '', provider_message_id = v.message_id, "
            "provider_thread_id = v.thread_id "
            f"FROM (VALUES {values}) AS v(id, token, from_state, message_id, thread_id) "
            "WHERE i.id = v.id AND i.lease_token = v.token AND i.state = v.from_state "
            "RETURNING i.id",
            [State.ACCEPTED, *params],
        )
        moved = {row[0] for row in cursor.fetchall()}
    done = [a for a in acceptances if a.intent.pk in moved]
    journal_many(
        [
            Entry(
                tenant_id=a.intent.tenant_id,
                draft_id=a.intent.draft_id,
                intent_id=a.intent.pk,
                actor_kind=IntentEvent.Actor.WORKER,
                actor_label=a.claim.worker,
                action="intent.accepted",
                from_state=a.intent.state,
                to_state=State.ACCEPTED,
                reason=a.how,
                data={"provider_message_id": a.message_id},
            )
            for a in done
        ]
    )
    recorded = [(a.intent.tenant_id, a.message_id) for a in done]
    if recorded:
        transaction.on_commit(lambda: apply_deferred_events(recorded))
    for a in done:
        log.info("intents.intent.accepted", extra={"intent_id": a.intent.pk, "how": a.how})
    return moved


def intent_record_accepted(
    answers: list[tuple[Claim, Prepared, provider.SendResult]],
) -> dict[int, str]:
    """Record a batch of sends the provider accepted, in one transaction: the common case of a
    batch, with the same writes as ``intent_record_result`` per intent (attempt row closed,
    fenced move to ``accepted``, journal row). Returns each intent's new state, or "fenced"."""
    states: dict[int, str] = {}
    with transaction.atomic():
        locked = _lock_leased_for_record([claim for claim, _, _ in answers])
        acceptances = []
        for claim, prepared, result in answers:
            intent = locked.get(claim.intent_id)
            if intent is None:
                _close_attempt(prepared.attempt_id, AttemptOutcome.FENCED, result)
                log.warning("intents.intent.fenced", extra={"intent_id": claim.intent_id})
                states[claim.intent_id] = "fenced"
                continue
            acceptances.append(
                _Acceptance(
                    intent=intent,
                    claim=claim,
                    message_id=result.message_id,
                    thread_id=result.thread_id,
                    how="replayed with the same key" if intent.state == State.UNCERTAIN else "sent",
                )
            )
            states[claim.intent_id] = State.ACCEPTED
        live = [(c, p, r) for c, p, r in answers if c.intent_id in locked]
        _close_attempts_accepted([(p, r) for _, p, r in live])
        # Every answer here is clean: once per key is the same as once per send.
        if live:
            _throttles_clean([p.key_ref for _, p, _ in live])
        _mark_accepted(acceptances)
    return states


def _close_attempts_accepted(answers: list[tuple[Prepared, provider.SendResult]]) -> None:
    """``_close_attempt`` for a batch of accepted sends, in one statement."""
    if not answers:
        return
    values = ", ".join(
        ["(%s::bigint, %s::int, %s::text, %s::text, %s::int, %s::text)"] * len(answers)
    )
    params: list = []
    for prepared, result in answers:
        params += [
            prepared.attempt_id,
            result.http_status,
            result.error_code[:64],
            result.error_message[:2000],
            result.latency_ms,
            result.message_id,
        ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SendAttempt._meta.db_table} AS a SET finished_at = STATEMENT_TIMESTAMP(), "  # noqa: S608
            "outcome = %s, http_status = v.http_status, error_code = v.error_code, "
            "error_detail = v.error_detail, latency_ms = v.latency_ms, "
            "provider_message_id = v.message_id "
            f"FROM (VALUES {values}) AS v(id, http_status, error_code, error_detail, latency_ms, "
            "message_id) WHERE a.id = v.id",
            [AttemptOutcome.ACCEPTED, *params],
        )


def intent_record_result(claim: Claim, prepared: Prepared, result: provider.SendResult) -> str:
    """Apply a send or replay result; returns the intent's new state, or "fenced"."""
    if result.outcome == provider.Outcome.ACCEPTED:
        return intent_record_accepted([(claim, prepared, result)])[claim.intent_id]
    with transaction.atomic():
        intent = _lock_leased_for_record([claim]).get(claim.intent_id)
        if intent is None:
            _close_attempt(prepared.attempt_id, AttemptOutcome.FENCED, result)
            log.warning("intents.intent.fenced", extra={"intent_id": claim.intent_id})
            return "fenced"
        _close_attempt(prepared.attempt_id, _ATTEMPT_OUTCOME[result.outcome], result)
        _throttle_feedback(prepared.key_ref, result)
        detail = f"{result.http_status or '-'} {result.error_code}: {result.error_message}"[:2000]
        if result.outcome == provider.Outcome.PERMANENT:
            if result.suppress_recipients:
                _suppress(intent, source=f"intent:{intent.pk}")
            if intent.state == State.UNCERTAIN:
                # A refusal of the replay does not prove the first call never landed.
                _finish(
                    intent,
                    claim,
                    to_state=State.NEEDS_ATTENTION,
                    action="intent.needs_attention",
                    reason=f"The replay was refused ({detail}); the first call's fate is unknown.",
                    code=result.error_code or f"http_{result.http_status}",
                )
                return State.NEEDS_ATTENTION
            _finish(
                intent,
                claim,
                to_state=State.FAILED,
                action="intent.failed",
                reason=detail,
                code=result.error_code or f"http_{result.http_status}",
            )
            return State.FAILED
        delay = timedelta(seconds=backoff_seconds(intent.attempts, result.retry_after))
        if intent.state == State.UNCERTAIN or result.outcome == provider.Outcome.UNCERTAIN:
            # Unknown stays unknown: only a replay with the same key or a lookup may resolve it.
            _finish(
                intent,
                claim,
                to_state=State.UNCERTAIN,
                action="intent.uncertain"
                if intent.state == State.SENDING
                else "intent.reconcile_pending",
                reason=detail,
                code=result.error_code or "uncertain",
                next_attempt_at=Now() + delay,
            )
            return State.UNCERTAIN
        # RETRY_LATER from a fresh send: the provider certainly did not process it.
        age_limit = intent.first_attempt_at + _safe_window()
        if intent.attempts >= settings.SEND_MAX_ATTEMPTS or db_now() + delay > age_limit:
            code = "max_attempts" if intent.attempts >= settings.SEND_MAX_ATTEMPTS else "max_age"
            _finish(
                intent,
                claim,
                to_state=State.FAILED,
                action="intent.failed",
                reason=f"Gave up after {intent.attempts} attempts; last: {detail}",
                code=code,
            )
            return State.FAILED
        _finish(
            intent,
            claim,
            to_state=State.QUEUED,
            action="intent.retry_scheduled",
            reason=detail,
            code=result.error_code or "retry_later",
            next_attempt_at=Now() + delay,
            data={"delay_seconds": round(delay.total_seconds(), 3)},
        )
        return State.QUEUED


def intent_record_lookup(claim: Claim, prepared: Prepared, lookup: provider.LookupResult) -> str:
    """Apply a label lookup: found proves the send; nothing found leaves it to a person."""
    with transaction.atomic():
        intent = _lock_leased_for_record([claim]).get(claim.intent_id)
        outcome = (
            AttemptOutcome.ACCEPTED
            if lookup.ok and lookup.message_ids
            else AttemptOutcome.NOT_FOUND
            if lookup.ok
            else AttemptOutcome.UNCERTAIN
        )
        fields = {
            "http_status": lookup.http_status,
            "error_code": lookup.error_code[:64],
            "provider_message_id": lookup.message_ids[0] if lookup.message_ids else "",
        }
        if intent is None:
            SendAttempt.objects.filter(pk=prepared.attempt_id).update(
                finished_at=Now(), outcome=AttemptOutcome.FENCED, **fields
            )
            return "fenced"
        SendAttempt.objects.filter(pk=prepared.attempt_id).update(
            finished_at=Now(), outcome=outcome, **fields
        )
        if outcome == AttemptOutcome.ACCEPTED:
            _mark_accepted(
                [
                    _Acceptance(
                        intent=intent,
                        claim=claim,
                        message_id=lookup.message_ids[0],
                        thread_id="",
                        how=f"found by label {prepared.label}"
                        + (" (inbox scan)" if lookup.method == "inbox_scan" else ""),
                    )
                ]
            )
            return State.ACCEPTED
        if outcome == AttemptOutcome.NOT_FOUND or intent.attempts > 2 * settings.SEND_MAX_ATTEMPTS:
            _finish(
                intent,
                claim,
                to_state=State.NEEDS_ATTENTION,
                action="intent.needs_attention",
                reason=(
                    "Outcome unknown: no message carries the label "
                    f"{prepared.label} (read {lookup.scanned} since the first attempt); "
                    "a person must decide."
                    if lookup.ok
                    else f"Outcome unknown and the label lookup keeps failing ({lookup.error_code})."
                ),
                code="unresolved",
            )
            return State.NEEDS_ATTENTION
        _finish(
            intent,
            claim,
            to_state=State.UNCERTAIN,
            action="intent.reconcile_pending",
            reason=f"label lookup failed: {lookup.error_code}",
            code=lookup.error_code or "lookup_failed",
            next_attempt_at=Now() + timedelta(seconds=backoff_seconds(intent.attempts)),
        )
        return State.UNCERTAIN


def _suppress(intent: SendIntent, *, source: str) -> None:
    addresses = {a.lower() for values in intent.recipients.values() for a in values}
    Suppression.objects.bulk_create(
        [
            Suppression(
                tenant_id=intent.tenant_id,
                address=address,
                reason=Suppression.Reason.REJECTED,
                source=source[:100],
            )
            for address in sorted(addresses)
        ],
        ignore_conflicts=True,
    )


# --- driving one claim ---------------------------------------------------------------------------


def _call(prepared: Prepared) -> provider.SendResult | provider.LookupResult:
    """The provider call of one prepared attempt: network only, no database."""
    if prepared.kind == SendAttempt.Kind.LOOKUP:
        return provider.find_messages_by_label(
            api_key=prepared.api_key,
            inbox_id=prepared.inbox_id,
            label=prepared.label,
            sent_after=prepared.first_attempt_at,
        )
    return provider.send_message(api_key=prepared.api_key, request=prepared.request)


def _record(claim: Claim, prepared: Prepared, answer) -> str:
    if prepared.kind == SendAttempt.Kind.LOOKUP:
        return intent_record_lookup(claim, prepared, answer)
    return intent_record_result(claim, prepared, answer)


def _state_of(intent_id: int) -> str:
    state = SendIntent.objects.filter(pk=intent_id).values_list("state", flat=True).first()
    return state or "missing"


def execute_claim(claim: Claim) -> str:
    """Run one leased intent to its next state. No transaction is open during the provider call."""
    return execute_claims([claim])[0]


def _new_call_pool() -> ThreadPoolExecutor:
    size = max(1, int(settings.SEND_CALL_CONCURRENCY))
    return ThreadPoolExecutor(max_workers=size, thread_name_prefix="send")


# One small pool per process (worker processes fork; threads do not survive a fork).
_call_pool = PerProcess(_new_call_pool).get


def _begin(claims: list[Claim], errors: list[BaseException]) -> dict[int, Prepared | None]:
    """``intent_begin_attempts`` for the batch; if that fails, each claim alone, so one intent's
    bad data cannot hold back the others (the failed transaction changed nothing)."""
    try:
        return intent_begin_attempts(claims)
    except Exception as exc:
        if len(claims) == 1:
            errors.append(exc)
            return {}
        log.warning("intents.batch.begin_failed", extra={"count": len(claims)}, exc_info=exc)
    begun: dict[int, Prepared | None] = {}
    for claim in claims:
        try:
            begun[claim.intent_id] = intent_begin_attempt(claim)
        except Exception as exc:  # the sweep takes over this lease
            errors.append(exc)
    return begun


def _record_all(answers, errors: list[BaseException]) -> dict[int, str]:
    """Record the batch's answers: accepted sends together in one transaction, the rest (and,
    if the batch transaction fails, everything) one by one, each fenced by its lease."""
    states: dict[int, str] = {}
    accepted = [
        (claim, prepared, answer)
        for claim, prepared, answer in answers
        if prepared.kind != SendAttempt.Kind.LOOKUP and answer.outcome == provider.Outcome.ACCEPTED
    ]
    if len(accepted) > 1:
        try:
            states.update(intent_record_accepted(accepted))
        except Exception as exc:
            log.warning("intents.batch.record_failed", extra={"count": len(accepted)}, exc_info=exc)
    for claim, prepared, answer in answers:
        if claim.intent_id in states:
            continue
        try:
            states[claim.intent_id] = _record(claim, prepared, answer)
        except Exception as exc:
            errors.append(exc)
    return states


def execute_claims(claims: list[Claim]) -> list[str]:
    """Run a claimed batch: the re-checks and attempt rows are committed together, then the
    provider calls go out concurrently, then the results are recorded, fenced by their leases.

    Each call happens only after its attempt row is committed, with no transaction open, and
    only the lease owner records; the pool threads make HTTP calls and never touch the database.
    If one step fails, the others still run to the end and the first error is raised.
    """
    if not claims:
        return []
    errors: list[BaseException] = []
    begun = _begin(claims, errors)
    states = {
        intent_id: _state_of(intent_id) for intent_id, prepared in begun.items() if prepared is None
    }
    ready = [(claim, begun[claim.intent_id]) for claim in claims if begun.get(claim.intent_id)]
    answers = []
    if len(ready) == 1:
        claim, prepared = ready[0]
        try:
            answers.append((claim, prepared, _call(prepared)))
        except Exception as exc:
            errors.append(exc)
    else:
        pool = _call_pool()
        calls = [(claim, prepared, pool.submit(_call, prepared)) for claim, prepared in ready]
        wait([call for _, _, call in calls])  # one wake-up for the batch, not one per call
        for claim, prepared, call in calls:
            try:
                answers.append((claim, prepared, call.result()))
            except Exception as exc:
                errors.append(exc)
    states.update(_record_all(answers, errors))
    if errors:
        raise errors[0]
    return [states.get(claim.intent_id, "") for claim in claims]


def run_once(*, worker: str | None = None, limit: int = 10, intent_id: int | None = None) -> int:
    """Claim and execute up to ``limit`` due intents (sends first, then reconciliations)."""
    worker = worker or worker_id()
    claims = intent_claim(worker=worker, limit=limit, intent_id=intent_id)
    execute_claims(claims)
    done = len(claims)
    if done < limit:
        more = intent_claim_uncertain(worker=worker, limit=limit - done, intent_id=intent_id)
        execute_claims(more)
        done += len(more)
    return done


# --- the sweep -----------------------------------------------------------------------------------


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
            SendAttempt.objects.filter(
                intent_id=intent.pk, lease_token=intent.lease_token, outcome=AttemptOutcome.PENDING
            ).update(outcome=AttemptOutcome.UNCERTAIN, error_code="lease_expired")
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
                last_error_detail=f"The lease of {intent.lease_owner} expired.",
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
                    reason=f"lease of {intent.lease_owner} expired",
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
        .order_by("-priority", "next_attempt_at", "id")
        .values_list("pk", flat=True)[:limit]
    )
    uncertain = list(
        SendIntent.objects.filter(state=State.UNCERTAIN, next_attempt_at__lte=Now())
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=Now()))
        .order_by("next_attempt_at", "id")
        .values_list("pk", flat=True)[:limit]
    )
    return queued, uncertain


def seconds_until_next_due() -> float | None:
    """Seconds (database clock) until the next retry, reconciliation or lease expiry, if any."""
    from django.db.models import Min

    now = db_now()
    soonest = [
        SendIntent.objects.filter(state=State.QUEUED, held_reason="").aggregate(
            at=Min("next_attempt_at")
        )["at"],
        SendIntent.objects.filter(state=State.UNCERTAIN).aggregate(at=Min("next_attempt_at"))["at"],
        SendIntent.objects.filter(state=State.SENDING).aggregate(at=Min("lease_expires_at"))["at"],
    ]
    times = [t for t in soonest if t is not None]
    if not times:
        return None
    return max(0.0, (min(times) - now).total_seconds())
