"""The send worker: claim, re-check, call AgentMail once per attempt, record fenced by the lease.

Life of one batch (DESIGN.md "Send intent lifecycle"):

1. ``intent_claim`` (``claim.py``) leases due ``queued`` intents; ``intent_claim_uncertain``
   leases ``uncertain`` intents for reconciliation (their state stays ``uncertain``).
2. ``intent_begin_attempts`` (``precheck.py``) re-checks each intent and commits the attempt rows
   of the batch; only then is the provider called (the batch's calls concurrently, from one
   small per-process thread pool, reply-only rounds from one of their own; no transaction open).
3. ``intent_record_accepted`` (the batch's accepted sends, one transaction) and
   ``intent_record_result`` / ``intent_record_lookup`` (any other answer, one by one;
   ``record.py``, ``reconcile.py``) write the classified outcome only while the lease is ours.

Batching changes the number of transactions, not what is checked or written per intent; if a
batch transaction fails, its intents are retried one by one, so one intent's bad data cannot hold
back the others. ``run_rounds`` (what ``intents_worker`` and the ``drain`` task run) claims and
begins the next batch while the calls of the one before it are out, so the pool's calls and this
thread's database work overlap; no call starts after its lease's call deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from django.conf import settings

from config.perprocess import PerProcess
from intents.models import SendAttempt, SendIntent
from intents.sending.claim import intent_claim, intent_claim_uncertain, intents_hand_back
from intents.sending.lease import Claim, Prepared, worker_id
from intents.sending.precheck import intent_begin_attempt, intent_begin_attempts
from intents.sending.reconcile import intent_record_lookup
from intents.sending.record import (
    intent_record_accepted,
    intent_record_not_called,
    intent_record_result,
)
from mailboxes import provider

log = logging.getLogger("intents.sending")


class _NotCalled:
    """What ``_call`` answers instead of the provider when it made no call."""


NOT_CALLED = _NotCalled()


def _call(
    claim: Claim, prepared: Prepared
) -> provider.SendResult | provider.LookupResult | _NotCalled:
    """The provider call of one prepared attempt: network only, no database. Not made once the
    lease's call deadline has passed (``lease.call_deadline``): nothing reaches the provider,
    and ``intent_record_not_called`` records it while the lease is still ours."""
    if time.monotonic() > claim.call_by:
        log.warning("intents.call.too_late", extra={"intent_id": claim.intent_id})
        return NOT_CALLED
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
    if answer is NOT_CALLED:
        return intent_record_not_called(claim, prepared)
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
# And one for reply-only rounds (``intents_worker --reply-threads``): on the shared pool their
# calls queued behind the general loops' calls, up to two batches of each (broadcast sends among
# them), so the reply lane waited for the very sends it is there to get ahead of.
_reply_call_pool = PerProcess(_new_call_pool).get


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
        if answer is not NOT_CALLED
        and prepared.kind != SendAttempt.Kind.LOOKUP
        and answer.outcome == provider.Outcome.ACCEPTED
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


@dataclass
class _Started:
    """A batch whose attempt rows are committed and whose calls are on their way."""

    claims: list[Claim]
    states: dict[int, str]
    errors: list[BaseException]
    calls: list[tuple[Claim, Prepared, Future]]


def _start(claims: list[Claim], *, inline_one: bool, replies_only: bool = False) -> _Started:
    """Re-check the batch and commit its attempt rows, then hand its calls to the pool (a lone
    call, with ``inline_one``, is made here: no hand-off when nothing else would run beside it;
    a reply-only round's calls go to the replies' own pool)."""
    errors: list[BaseException] = []
    begun = _begin(claims, errors)
    states = {
        intent_id: _state_of(intent_id) for intent_id, prepared in begun.items() if prepared is None
    }
    ready = [(claim, prepared) for claim in claims if (prepared := begun.get(claim.intent_id))]
    calls: list[tuple[Claim, Prepared, Future]] = []
    if inline_one and len(ready) == 1:
        claim, prepared = ready[0]
        done: Future = Future()
        try:
            done.set_result(_call(claim, prepared))
        except Exception as exc:
            done.set_exception(exc)
        calls.append((claim, prepared, done))
    elif ready:
        pool = _reply_call_pool() if replies_only else _call_pool()
        calls = [
            (claim, prepared, pool.submit(_call, claim, prepared)) for claim, prepared in ready
        ]
    return _Started(claims, states, errors, calls)


def _finish(batch: _Started) -> list[str]:
    """Wait for the batch's calls, record their answers (fenced by the leases), and raise the
    batch's first error, if any, once everything that could be recorded is."""
    wait([call for _, _, call in batch.calls])  # one wake-up for the batch, not one per call
    answers = []
    for claim, prepared, call in batch.calls:
        try:
            answers.append((claim, prepared, call.result()))
        except Exception as exc:
            batch.errors.append(exc)
    batch.states.update(_record_all(answers, batch.errors))
    if batch.errors:
        raise batch.errors[0]
    return [batch.states.get(claim.intent_id, "") for claim in batch.claims]


def execute_claims(claims: list[Claim]) -> list[str]:
    """Run a claimed batch: the re-checks and attempt rows are committed together, then the
    provider calls go out concurrently, then the results are recorded, fenced by their leases.

    Each call happens only after its attempt row is committed, with no transaction open, and
    only the lease owner records; the pool threads make HTTP calls and never touch the database.
    If one step fails, the others still run to the end and the first error is raised.
    """
    if not claims:
        return []
    return _finish(_start(claims, inline_one=True))


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


def _claim_round(
    worker: str, limit: int, replies_only: bool, stopping: Callable[[], bool]
) -> list[Claim]:
    """Due sends first, then due reconciliations for what room is left (as ``run_once``)."""
    claims = intent_claim(worker=worker, limit=limit, replies_only=replies_only)
    if len(claims) < limit and not stopping():
        try:
            claims += intent_claim_uncertain(
                worker=worker, limit=limit - len(claims), replies_only=replies_only
            )
        except Exception:
            # The sends claimed above were not begun: give them back rather than leave them
            # leased, uncalled, until the sweep finds their leases expired.
            intents_hand_back(claims)
            raise
    return claims


def run_rounds(
    *,
    worker: str | None = None,
    limit: int = 10,
    most: int | None = None,
    for_seconds: float | None = None,
    stopping: Callable[[], bool] | None = None,
    replies_only: bool = False,
) -> int:
    """``run_once`` again and again until nothing is due, ``stopping`` is set, ``most``
    intents are done or ``for_seconds`` have passed (then nothing new is claimed, so that the
    caller may sweep or stop; the first round is always claimed, however short the time), with
    each batch claimed and re-checked while the calls of the one before it are at the provider;
    returns the number of intents handled.

    Per batch nothing changes: its attempt rows commit before any of its calls, its calls run on
    the pool with no transaction open, and it is recorded fenced by its leases. What overlaps is
    this thread's database work for one batch with the pool's calls for the other, so the calls
    do not wait for the claim, the re-check and the record, nor those for the calls. The calls
    of the newer batch queue behind the older's on the pool; a call that could not start inside
    its lease is not made (``lease.call_deadline``). Stopping works as in ``run_once``: a batch
    claimed while the stop came is handed back unsent, a begun one runs to its end.
    """
    worker = worker or worker_id()
    stopped = stopping or (lambda: False)
    ends = None if for_seconds is None else time.monotonic() + for_seconds
    done = 0
    flying: _Started | None = None
    try:
        while (
            not stopped()
            and (most is None or done < most)
            and (ends is None or not done or time.monotonic() < ends)
        ):
            claims = _claim_round(
                worker, limit if most is None else min(limit, most - done), replies_only, stopped
            )
            if stopped():
                handed = intents_hand_back(claims)
                if claims:
                    log.info(
                        "intents.worker.handed_back",
                        extra={"worker": worker, "claimed": len(claims), "handed_back": handed},
                    )
                break
            if not claims:
                break
            done += len(claims)
            started = _start(claims, inline_one=False, replies_only=replies_only)
            previous, flying = flying, started
            if previous is not None:
                _finish(previous)
    except BaseException:
        if flying is not None:
            # The error propagates; the batch still in flight is recorded first (its calls may
            # have been made), and its own failure, if any, is logged rather than hiding this one.
            try:
                _finish(flying)
            except Exception:
                log.exception("intents.worker.batch_failed", extra={"worker": worker})
        raise
    if flying is not None:
        _finish(flying)
    return done
