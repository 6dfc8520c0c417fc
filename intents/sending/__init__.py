"""The send worker, one module per job (DESIGN.md "Send intent lifecycle"):

- ``lease.py``: the claim (lease) and the prepared attempt every step passes on; the clocks.
- ``claim.py``: leasing due intents (``FOR UPDATE SKIP LOCKED``, token fenced, database clock),
  and handing unused leases back when a worker stops.
- ``throttle.py``: the token bucket per AgentMail key and the circuit breaker.
- ``precheck.py``: the pre-call check (approval hash, rights, suppression, policy) and the
  attempt row, committed before any call.
- ``worker.py``: the batch: provider calls outside transactions, from one pool per process.
- ``record.py``: fenced recording and classification of the provider's answer.
- ``reconcile.py``: ``uncertain`` resolved by the label lookup (``accepted`` or
  ``needs_attention``).
- ``sweep.py``: expired leases, ``not_after``, due retries and reconciliations.
"""

from intents.sending.claim import intent_claim, intent_claim_uncertain, intents_hand_back
from intents.sending.lease import Claim, Prepared, backoff_seconds, worker_id
from intents.sending.precheck import (
    CheckFacts,
    intent_begin_attempt,
    intent_begin_attempts,
    policy_problem,
)
from intents.sending.reconcile import intent_record_lookup
from intents.sending.record import intent_record_accepted, intent_record_result
from intents.sending.sweep import (
    due_intent_ids,
    intents_expire_not_after,
    intents_release_expired_leases,
    seconds_until_next_due,
)
from intents.sending.throttle import throttle_key
from intents.sending.worker import execute_claim, execute_claims, run_once, run_rounds

__all__ = [
    "CheckFacts",
    "Claim",
    "Prepared",
    "backoff_seconds",
    "due_intent_ids",
    "execute_claim",
    "execute_claims",
    "intent_begin_attempt",
    "intent_begin_attempts",
    "intent_claim",
    "intent_claim_uncertain",
    "intent_record_accepted",
    "intent_record_lookup",
    "intent_record_result",
    "intents_expire_not_after",
    "intents_hand_back",
    "intents_release_expired_leases",
    "policy_problem",
    "run_once",
    "run_rounds",
    "seconds_until_next_due",
    "throttle_key",
    "worker_id",
]
