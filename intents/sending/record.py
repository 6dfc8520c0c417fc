"""Recording a provider answer, fenced by the lease: the attempt row is closed, and the classified
outcome is written only while the lease is still ours (``... WHERE id = %s AND lease_token =
%s``). A worker whose lease was taken over writes its attempt row (outcome ``fenced``) and nothing
else: the provider's idempotency key makes its call and the new owner's call one send.

Classification (DESIGN.md "Send intent lifecycle"): accepted -> ``accepted``; certainly not
processed -> ``queued`` with backoff, until the attempts or the safe window run out; may have been
processed -> ``uncertain``; permanent -> ``failed`` (a refused replay -> ``needs_attention``).
``intent_record_accepted`` records a batch's accepted sends in one transaction.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models.functions import Now

from common.counters import counters_add
from config.clock import db_now
from intents.journal import Entry, journal, journal_many
from intents.models import IntentEvent, SendAttempt, SendIntent, Suppression
from intents.sending.lease import (
    CALL_TOO_LATE,
    Claim,
    Prepared,
    attempt_counts,
    backoff_seconds,
    safe_window,
)
from intents.sending.throttle import throttle_feedback, throttles_clean
from intents.services.intents import apply_deferred_events
from intents.services.suppressions import suppressions_record
from mailboxes import provider
from mailboxes.key_health import mailbox_key_refused

log = logging.getLogger("intents.sending")

State = SendIntent.State
AttemptOutcome = SendAttempt.Outcome

# The reason (and last error) of a send that failed once its attempts or safe window ran out,
# with the provider's last answer (intents.reason_words reads it in the reader's words).
GAVE_UP = "Gave up after %(attempts)s attempts; last: %(last)s"
# The reason (and last error) of a send whose replay AgentMail refused, with its answer.
REPLAY_REFUSED = "The replay was refused (%(answer)s); the first call's fate is unknown."


def lock_leased_for_record(claims: list[Claim]) -> dict[int, Leased]:
    """The batch's leased rows, locked (in id order), with only what recording a result reads
    (every write after it is fenced by the lease token); keyed by intent id. Plain SQL: this runs
    for every provider call."""
    if not claims:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.id, i.tenant_id, i.draft_id, i.state, i.attempts, i.first_attempt_at, "  # noqa: S608
            f"i.recipients FROM {SendIntent._meta.db_table} AS i "
            "JOIN unnest(%s::bigint[], %s::uuid[]) AS v(id, token) "
            "ON i.id = v.id AND i.lease_token = v.token "
            "WHERE i.state IN (%s, %s) ORDER BY i.id FOR UPDATE OF i",
            [
                [claim.intent_id for claim in claims],
                [claim.lease_token for claim in claims],
                State.SENDING,
                State.UNCERTAIN,
            ],
        )
        rows = cursor.fetchall()
    locked = {}
    for pk, tenant_id, draft_id, state, attempts, first_attempt_at, recipients in rows:
        if isinstance(recipients, str | bytes):
            recipients = json.loads(recipients)
        locked[pk] = Leased(pk, tenant_id, draft_id, state, attempts, first_attempt_at, recipients)
    return locked


@dataclass(frozen=True)
class Leased:
    """A leased intent as recording reads it (plain values; a model instance per row costs more
    than the rest of recording it)."""

    pk: int
    tenant_id: int
    draft_id: int
    state: str
    attempts: int
    first_attempt_at: datetime | None
    recipients: dict


def finish_leased(
    intent: SendIntent | Leased,
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


def close_attempt(prepared: Prepared, outcome: str, **fields) -> None:
    """Give the attempt row its outcome (with ``fields``), and count it the first time: when a
    sweep took the lease over, it already marked (and counted) the attempt uncertain, and the
    late worker's ``fenced`` only completes the row."""
    fields.update(finished_at=Now(), outcome=outcome)
    attempt = SendAttempt.objects.filter(pk=prepared.attempt_id)
    if attempt.filter(outcome=AttemptOutcome.PENDING).update(**fields):
        http_status = fields.get("http_status")
        counters_add(attempt_counts(prepared.tenant_id, prepared.kind, outcome, http_status))
    else:
        attempt.update(**fields)


def _close_attempt(prepared: Prepared, outcome: str, result: provider.SendResult) -> None:
    close_attempt(
        prepared,
        outcome,
        http_status=result.http_status,
        error_code=result.error_code[:64],
        error_detail=result.error_message[:2000],
        latency_ms=result.latency_ms,
        provider_message_id=result.message_id,
    )


_ATTEMPT_OUTCOME = {
    provider.Outcome.ACCEPTED: AttemptOutcome.ACCEPTED,
    provider.Outcome.RETRY_LATER: AttemptOutcome.RETRY,
    provider.Outcome.UNCERTAIN: AttemptOutcome.UNCERTAIN,
    provider.Outcome.PERMANENT: AttemptOutcome.PERMANENT,
}


@dataclass(frozen=True)
class Acceptance:
    intent: Leased
    claim: Claim
    message_id: str
    thread_id: str
    how: str
    # Other messages of the inbox that carry the intent's label (a lookup found more than one):
    # AgentMail sent it more than once. Kept in the journal, the evidence a person needs.
    also_found: tuple[str, ...] = ()


def mark_accepted(acceptances: list[Acceptance]) -> set[int]:
    """Fenced move of each intent to ``accepted`` with its provider ids and a journal row, in two
    statements for the whole batch; returns the ids moved. Runs inside the caller's transaction,
    after the rows were locked."""
    if not acceptances:
        return set()
    with connection.cursor() as cursor:
        # What finish_leased writes for any transition out of the lease, plus the provider's ids.
        cursor.execute(
            f"UPDATE {SendIntent._meta.db_table} AS i SET state = %s, lease_token = NULL, "  # noqa: S608
            "lease_owner = '', lease_expires_at = NULL, updated_at = STATEMENT_TIMESTAMP(), "
            "last_error_code = '', last_error_detail = '', provider_message_id = v.message_id, "
            "provider_thread_id = v.thread_id "
            "FROM unnest(%s::bigint[], %s::uuid[], %s::text[], %s::text[], %s::text[]) "
            "AS v(id, token, from_state, message_id, thread_id) "
            "WHERE i.id = v.id AND i.lease_token = v.token AND i.state = v.from_state "
            "RETURNING i.id",
            [
                State.ACCEPTED,
                [a.intent.pk for a in acceptances],
                [a.claim.lease_token for a in acceptances],
                [a.intent.state for a in acceptances],
                [a.message_id for a in acceptances],
                [a.thread_id[:255] for a in acceptances],
            ],
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
                data={
                    "provider_message_id": a.message_id,
                    **({"also_found": list(a.also_found)} if a.also_found else {}),
                },
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
        locked = lock_leased_for_record([claim for claim, _, _ in answers])
        taken = message_ids_taken([(c.intent_id, r.message_id) for c, _, r in answers])
        acceptances = []
        for claim, prepared, result in answers:
            intent = locked.get(claim.intent_id)
            if intent is None:
                _close_attempt(prepared, AttemptOutcome.FENCED, result)
                log.warning("intents.intent.fenced", extra={"intent_id": claim.intent_id})
                states[claim.intent_id] = "fenced"
                continue
            if claim.intent_id in taken:
                states[claim.intent_id] = _record_taken(
                    intent, claim, prepared, result, taken[claim.intent_id]
                )
                continue
            acceptances.append(
                Acceptance(
                    intent=intent,
                    claim=claim,
                    message_id=result.message_id,
                    thread_id=result.thread_id,
                    how="replayed with the same key" if intent.state == State.UNCERTAIN else "sent",
                )
            )
            states[claim.intent_id] = State.ACCEPTED
        live = [(c, p, r) for c, p, r in answers if c.intent_id in locked]
        _close_attempts_accepted([(p, r) for c, p, r in live if c.intent_id not in taken])
        # Every answer here is clean: once per key is the same as once per send.
        if live:
            throttles_clean([p.key_ref for _, p, _ in live])
        mark_accepted(acceptances)
    late = [(c, r) for c, _, r in answers if states[c.intent_id] == "fenced"]
    if late:
        for intent_id in intents_adopt_late_acceptances(late):
            states[intent_id] = State.ACCEPTED
    return states


def message_ids_taken(answers: list[tuple[int, str]]) -> dict[int, int]:
    """Of (intent id, message id) answers, those whose message id is not this intent's alone:
    another intent, of any tenant, recorded it already (or another answer of the same batch
    names it); {intent id: the other intent's id}. Message ids are unique at AgentMail, so such
    an answer proves nothing about this send. The message ids' advisory locks, held to the end
    of the caller's transaction, keep two transactions from recording one id at once."""
    if not answers:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) "
            "FROM (SELECT unnest(%s::text[]) AS k ORDER BY 1) AS keys",
            [sorted({f"intents.provider_message:{m}" for _, m in answers})],
        )
        cursor.execute(
            f"SELECT v.id, (SELECT i.id FROM {SendIntent._meta.db_table} AS i "  # noqa: S608
            "WHERE i.provider_message_id = v.message_id AND i.provider_message_id <> '' "
            "AND i.id <> v.id ORDER BY i.id LIMIT 1) "
            "FROM unnest(%s::bigint[], %s::text[]) AS v(id, message_id)",
            [[pk for pk, _ in answers], [message_id for _, message_id in answers]],
        )
        taken = {pk: other for pk, other in cursor.fetchall() if other is not None}
    first: dict[str, int] = {}
    for pk, message_id in answers:
        if first.setdefault(message_id, pk) != pk:
            taken.setdefault(pk, first[message_id])
            taken.setdefault(first[message_id], pk)
    return taken


def _record_taken(
    intent: Leased, claim: Claim, prepared: Prepared, result: provider.SendResult, other: int
) -> str:
    """AgentMail answered 200 with a message id another send recorded (``message_ids_taken``).
    Taken as proof, a reply was marked sent that never went out, and that message's delivery
    events went to the other send. Unknown instead: the replay with the same key, or past the
    attempts the label lookup, decides."""
    log.warning(
        "intents.intent.message_id_taken",
        extra={"intent_id": intent.pk, "other_intent_id": other},
    )
    doubtful = replace(
        result,
        outcome=provider.Outcome.UNCERTAIN,
        thread_id="",
        error_code="message_id_taken",
        error_message="AgentMail answered with the message id of another send",
    )
    _close_attempt(prepared, AttemptOutcome.UNCERTAIN, doubtful)
    detail = f"{doubtful.http_status or '-'} {doubtful.error_code}: {doubtful.error_message}"
    return _record_not_processed(intent, claim, doubtful, detail)


# The states in which nobody is working on an intent and its outcome is unknown: a late answer
# from AgentMail settles them.
_WAITING_ON_PROOF = [State.UNCERTAIN, State.NEEDS_ATTENTION]


def intents_adopt_late_acceptances(late: list[tuple[Claim, provider.SendResult]]) -> set[int]:
    """Sends AgentMail accepted after our lease on their intent ended (a slow call, a batch's later
    round of calls): the acceptance is a fact. An intent still waiting on that proof (uncertain or
    needs attention, not leased, no message id yet) moves to ``accepted`` with it, journaled;
    one another worker holds, or that ended otherwise, keeps the proof on the attempt row only.
    Without this, a lookup made while the call was still in flight found nothing, the intent
    went to a person, and a person reopening it sent the reply twice. Returns the ids moved."""
    by_id = {claim.intent_id: (claim, result) for claim, result in late}
    with transaction.atomic():
        # In id order, as every locker of sends (intents.sending.stops): without an ORDER BY the
        # rows were locked in the order the plan found them in the table, and a change that
        # stops sends, holding one and waiting for the other, deadlocked with this.
        waiting = list(
            SendIntent.objects.select_for_update()
            .filter(
                pk__in=list(by_id),
                state__in=_WAITING_ON_PROOF,
                provider_message_id="",
                lease_token__isnull=True,
            )
            .order_by("pk")
            .values_list("pk", "tenant_id", "draft_id", "state")
        )
        # After the row locks, as in intent_record_accepted: the same order in both, no deadlock.
        taken = message_ids_taken([(row[0], by_id[row[0]][1].message_id) for row in waiting])
        waiting = [row for row in waiting if row[0] not in taken]
        for pk, tenant_id, draft_id, state in waiting:
            claim, result = by_id[pk]
            SendIntent.objects.filter(pk=pk, state=state).update(
                state=State.ACCEPTED,
                provider_message_id=result.message_id,
                provider_thread_id=result.thread_id[:255],
                last_error_code="",
                last_error_detail="",
                updated_at=Now(),
            )
            journal(
                tenant=tenant_id,
                draft=draft_id,
                intent=pk,
                actor_kind=IntentEvent.Actor.WORKER,
                actor_label=claim.worker,
                action="intent.accepted",
                from_state=state,
                to_state=State.ACCEPTED,
                reason="AgentMail's answer to an earlier call arrived after its lease ended",
                data={"provider_message_id": result.message_id},
            )
        recorded = [(tenant_id, by_id[pk][1].message_id) for pk, tenant_id, _, _ in waiting]
        if recorded:
            transaction.on_commit(lambda: apply_deferred_events(recorded))
    for pk, *_ in waiting:
        log.info("intents.intent.accepted_late", extra={"intent_id": pk})
    return {pk for pk, *_ in waiting}


def _close_attempts_accepted(answers: list[tuple[Prepared, provider.SendResult]]) -> None:
    """``_close_attempt`` for a batch of accepted sends, in one statement."""
    if not answers:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SendAttempt._meta.db_table} AS a SET finished_at = STATEMENT_TIMESTAMP(), "  # noqa: S608
            "outcome = %s, http_status = v.http_status, error_code = v.error_code, "
            "error_detail = v.error_detail, latency_ms = v.latency_ms, "
            "provider_message_id = v.message_id "
            "FROM unnest(%s::bigint[], %s::int[], %s::text[], %s::text[], %s::int[], %s::text[]) "
            "AS v(id, http_status, error_code, error_detail, latency_ms, message_id) "
            "WHERE a.id = v.id",
            [
                AttemptOutcome.ACCEPTED,
                [prepared.attempt_id for prepared, _ in answers],
                [result.http_status for _, result in answers],
                [result.error_code[:64] for _, result in answers],
                [result.error_message[:2000] for _, result in answers],
                [result.latency_ms for _, result in answers],
                [result.message_id for _, result in answers],
            ],
        )
    # Under the batch's lock with the lease ours, no sweep has marked these attempts.
    counters_add(
        c
        for prepared, _ in answers
        for c in attempt_counts(prepared.tenant_id, prepared.kind, AttemptOutcome.ACCEPTED, None)
    )


def intent_record_result(claim: Claim, prepared: Prepared, result: provider.SendResult) -> str:
    """Apply a send or replay result; returns the intent's new state, or "fenced"."""
    if result.outcome == provider.Outcome.ACCEPTED:
        return intent_record_accepted([(claim, prepared, result)])[claim.intent_id]
    with transaction.atomic():
        intent = lock_leased_for_record([claim]).get(claim.intent_id)
        if intent is None:
            _close_attempt(prepared, AttemptOutcome.FENCED, result)
            log.warning("intents.intent.fenced", extra={"intent_id": claim.intent_id})
            return "fenced"
        _close_attempt(prepared, _ATTEMPT_OUTCOME[result.outcome], result)
        detail = f"{result.http_status or '-'} {result.error_code}: {result.error_message}"[:2000]
        if provider.refuses_key(result.http_status, result.error_code, result.error_message):
            return hold_for_refused_key(intent, claim, prepared, detail)
        throttle_feedback(prepared.key_ref, result)
        if result.outcome == provider.Outcome.PERMANENT:
            return _record_permanent(intent, claim, result, detail)
        return _record_not_processed(intent, claim, result, detail)


# The journal's reason for a call not made (review.journal_words shows it in words).
NOT_CALLED_REASON = "not called: its lease would have run out during the call"


def intent_record_not_called(claim: Claim, prepared: Prepared) -> str:
    """Record an attempt whose call ``worker._call`` did not make (past its lease's call
    deadline): its row closed as ``retry`` with ``CALL_TOO_LATE``, the intent moved by
    ``record_not_called``; returns the intent's new state, or "fenced"."""
    fields = {"error_code": CALL_TOO_LATE, "error_detail": NOT_CALLED_REASON}
    with transaction.atomic():
        intent = lock_leased_for_record([claim]).get(claim.intent_id)
        if intent is None:
            close_attempt(prepared, AttemptOutcome.FENCED, **fields)
            return "fenced"
        # Nothing was asked, so nothing is uncertain about it, whatever its kind: a retry.
        close_attempt(prepared, AttemptOutcome.RETRY, **fields)
        return record_not_called(intent, claim)


def record_not_called(intent: Leased, claim: Claim) -> str:
    """The call was not made: it could not have started inside its lease (``worker._call``).
    Nothing reached AgentMail, so, as for a hand-back, the claim's attempt is not counted (the
    attempt row stays, closed) and the key's circuit hears nothing of it: a worker's backlog must
    neither fail a send for ``max_attempts``, nor hand a reconciliation to a person, nor open a
    working key's circuit. A send goes back to the queue, a reconciliation stays uncertain, both
    due again after the first backoff step."""
    uncertain = intent.state == State.UNCERTAIN
    to_state = State.UNCERTAIN if uncertain else State.QUEUED
    finish_leased(
        intent,
        claim,
        to_state=to_state,
        action="intent.reconcile_pending" if uncertain else "intent.retry_scheduled",
        reason=NOT_CALLED_REASON,
        code=CALL_TOO_LATE,
        attempts=max(0, intent.attempts - 1),
        next_attempt_at=Now() + timedelta(seconds=backoff_seconds(1)),
    )
    return to_state


def hold_for_refused_key(intent: Leased, claim: Claim, prepared: Prepared, detail: str) -> str:
    """AgentMail refused the mailbox's key (``provider.refuses_key``): the refusal is the key's,
    not this send's, and every other call with the key would get it too. The mailbox is marked
    (``mailboxes.key_health``, audited) and this send waits with the others of its mailbox,
    which the claim leaves alone until an admin shows the key works; then the same idempotency
    key goes out. A fresh send goes back to ``queued``: AgentMail checks the key before it
    processes anything. An uncertain one stays ``uncertain``: its first call may have sent, and
    only a replay or a lookup with a working key can tell (it used to go to a person as if the
    replay's refusal said something about that first call)."""
    mailbox_key_refused(
        mailbox_id=prepared.mailbox_id, api_key_id=prepared.api_key_id, detail=detail
    )
    to_state = State.UNCERTAIN if intent.state == State.UNCERTAIN else State.QUEUED
    finish_leased(
        intent,
        claim,
        to_state=to_state,
        action="intent.key_refused",
        reason=detail,
        code="key_refused",
        next_attempt_at=Now(),
        data={"mailbox": prepared.mailbox_id},
    )
    log.warning(
        "intents.intent.key_refused",
        extra={"intent_id": intent.pk, "mailbox_id": prepared.mailbox_id, "state": str(to_state)},
    )
    return to_state


def _record_permanent(
    intent: Leased, claim: Claim, result: provider.SendResult, detail: str
) -> str:
    """A refusal: ``failed``, or ``needs_attention`` for a refused replay."""
    if result.suppress_recipients:
        _suppress(intent, source=f"intent:{intent.pk}")
    if intent.state == State.UNCERTAIN:
        # A refusal of the replay does not prove the first call never landed.
        finish_leased(
            intent,
            claim,
            to_state=State.NEEDS_ATTENTION,
            action="intent.needs_attention",
            reason=REPLAY_REFUSED % {"answer": detail},
            code=result.error_code or f"http_{result.http_status}",
        )
        return State.NEEDS_ATTENTION
    finish_leased(
        intent,
        claim,
        to_state=State.FAILED,
        action="intent.failed",
        reason=detail,
        code=result.error_code or f"http_{result.http_status}",
    )
    return State.FAILED


def _record_not_processed(
    intent: Leased, claim: Claim, result: provider.SendResult, detail: str
) -> str:
    """An answer that may or certainly did not send: ``uncertain``, a retry, or ``failed`` once
    the attempts or the safe window run out."""
    delay = timedelta(seconds=backoff_seconds(intent.attempts, result.retry_after))
    if intent.state == State.UNCERTAIN or result.outcome == provider.Outcome.UNCERTAIN:
        # Unknown stays unknown: only a replay with the same key or a lookup may resolve it.
        finish_leased(
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
    # Claiming sets first_attempt_at (claim.py), so a leased intent always has one.
    assert intent.first_attempt_at is not None
    age_limit = intent.first_attempt_at + safe_window()
    if intent.attempts >= settings.SEND_MAX_ATTEMPTS or db_now() + delay > age_limit:
        code = "max_attempts" if intent.attempts >= settings.SEND_MAX_ATTEMPTS else "max_age"
        finish_leased(
            intent,
            claim,
            to_state=State.FAILED,
            action="intent.failed",
            reason=GAVE_UP % {"attempts": intent.attempts, "last": detail},
            code=code,
        )
        return State.FAILED
    finish_leased(
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


def _suppress(intent: SendIntent | Leased, *, source: str) -> None:
    # "rejected" ranks lowest, so an address already on the list keeps its row as it is.
    addresses = {a.lower() for values in intent.recipients.values() for a in values}
    suppressions_record(
        tenant_id=intent.tenant_id,
        addresses=sorted(addresses),
        reason=Suppression.Reason.REJECTED,
        source=source,
    )
