"""The send worker: claim, re-check, call AgentMail once per attempt, record fenced by the lease.

Life of one batch (DESIGN.md "Send intent lifecycle"):

1. ``intent_claim`` (``claim.py``) leases due ``queued`` intents; ``intent_claim_uncertain``
   leases ``uncertain`` intents for reconciliation (their state stays ``uncertain``).
2. ``intent_begin_attempts`` (``precheck.py``) re-checks each intent and commits the attempt rows
   of the batch; only then is the provider called (the batch's calls concurrently, from one
   small per-process thread pool, no transaction open).
3. ``intent_record_accepted`` (the batch's accepted sends, one transaction) and
   ``intent_record_result`` / ``intent_record_lookup`` (any other answer, one by one;
   ``record.py``, ``reconcile.py``) write the classified outcome only while the lease is ours.

Batching changes the number of transactions, not what is checked or written per intent; if a
batch transaction fails, its intents are retried one by one, so one intent's bad data cannot hold
back the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

from django.conf import settings

from config.perprocess import PerProcess
from intents.models import SendAttempt, SendIntent
from intents.sending.claim import intent_claim, intent_claim_uncertain, intents_hand_back
from intents.sending.lease import Claim, Prepared, worker_id
from intents.sending.precheck import intent_begin_attempt, intent_begin_attempts
from intents.sending.reconcile import intent_record_lookup
from intents.sending.record import intent_record_accepted, intent_record_result
from mailboxes import provider

log = logging.getLogger("intents.sending")


def _call(prepared: Prepared) -> provider.SendResult | provider.LookupResult:
    """The provider call of one prepared attempt: network only, no database."""
    if prepared.kind == SendAttempt.Kind.LOOKUP:
        return provider.find_messages_by_label(
            api_key=prepared.api_key,
            inbox_id=prepared.inbox_id,
            label=prepared.label,
            sent_after=prepared.first_attempt_at,
        )
    # precheck builds the request for every attempt but a lookup.
    assert prepared.request is not None
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
    ready = [(claim, prepared) for claim in claims if (prepared := begun.get(claim.intent_id))]
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


def run_once(
    *,
    worker: str | None = None,
    limit: int = 10,
    intent_id: int | None = None,
    stopping: Callable[[], bool] | None = None,
    replies_only: bool = False,
) -> int:
    """Claim and execute up to ``limit`` due intents (sends first, then reconciliations).

    ``stopping`` (the process was asked to stop, say by SIGTERM) is asked before and after each
    claim: nothing new is claimed once it is set, a batch claimed while the stop arrived is
    handed back unsent (``intents_hand_back``) rather than held until its leases expire, and a
    batch whose attempts are committed runs to its end. ``replies_only``: never a broadcast's
    send (nor a broadcast send's reconciliation), so this round cannot be held up by one.
    """
    worker = worker or worker_id()
    done = 0
    claimers: tuple[Callable[[int], list], ...] = (
        lambda n: intent_claim(
            worker=worker, limit=n, intent_id=intent_id, replies_only=replies_only
        ),
        lambda n: intent_claim_uncertain(
            worker=worker, limit=n, intent_id=intent_id, replies_only=replies_only
        ),
    )
    for claim_due in claimers:
        if done >= limit or (stopping is not None and stopping()):
            break
        claims = claim_due(limit - done)
        if stopping is not None and stopping():
            handed = intents_hand_back(claims)
            if claims:
                log.info(
                    "intents.worker.handed_back",
                    extra={"worker": worker, "claimed": len(claims), "handed_back": handed},
                )
            return done
        execute_claims(claims)
        done += len(claims)
    return done
