"""django-q2 entry points. Each takes ids, loads rows and calls execution; each is safe to run twice
or concurrently on several clusters: the intents table, not the queue, says what is due."""

from __future__ import annotations

import logging
import math

from django.conf import settings

from intents import execution
from intents.services import draft_expire_due

log = logging.getLogger("intents.tasks")

DRAIN_BATCH = 10
WAKE_LIMIT = 200


def execute_intent(intent_id: int) -> int:
    """Send (or reconcile) this one intent if it is due and unclaimed; otherwise do nothing."""
    return execution.run_once(limit=1, intent_id=int(intent_id))


def drain(max_intents: int = 100) -> int:
    """Work through due intents until none is left or the budget is spent."""
    worker = execution.worker_id()
    done = 0
    while done < max_intents:
        step = execution.run_once(worker=worker, limit=min(DRAIN_BATCH, max_intents - done))
        if not step:
            break
        done += step
    return done


def sweep() -> dict[str, int]:
    """Periodic safety net (every SWEEP_INTERVAL_SECONDS, on every cluster at once)."""
    report = {
        "leases_released": execution.intents_release_expired_leases(),
        "intents_expired": execution.intents_expire_not_after(),
        "drafts_expired": draft_expire_due(),
    }
    queued, uncertain = execution.due_intent_ids(limit=WAKE_LIMIT)
    report["due_queued"] = len(queued)
    report["due_uncertain"] = len(uncertain)
    _wake(queued, uncertain)
    if any(report.values()):
        log.info("intents.sweep.done", extra=report)
    return report


def _wake(queued: list[int], uncertain: list[int]) -> None:
    try:
        from django_q.tasks import async_task
    except ImportError:  # pragma: no cover - django-q2 is a hard dependency
        return
    workers = int(settings.Q_CLUSTER.get("workers", 2))
    drains = min(workers, math.ceil(len(queued) / DRAIN_BATCH))
    for _ in range(drains):
        async_task("intents.tasks.drain", task_name="intents-drain")
    for intent_id in uncertain:
        async_task("intents.tasks.execute_intent", intent_id, task_name=f"intent-{intent_id}")
