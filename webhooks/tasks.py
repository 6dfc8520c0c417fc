"""django-q2 entry points. Each takes ids, calls one service and is safe to run twice."""

from __future__ import annotations

from webhooks.services import applier, apply, reapply, retention
from webhooks.services import backfill as backfill_service


def apply_pending() -> int:
    """Woken on the receiver's commit: apply stored events in batches until none is pending."""
    return applier.events_apply_pending()


def replay_pending() -> int:
    """Part of the sweep: apply events stored but not applied (in batches), deferred events
    whose message id has been recorded since, and rejected events whose inbox a mailbox has
    recorded since."""
    return (
        applier.events_apply_pending(settle=0)
        + apply.events_replay_pending()
        + reapply.events_apply_rejected_due()
    )


def purge_payloads() -> int:
    """Retention: drop webhook payloads older than each tenant's retention period."""
    return retention.events_purge_payloads()


def backfill() -> int:
    """Every ten minutes: ask AgentMail for what webhooks should have told us (bounded)."""
    report = backfill_service.webhooks_backfill()
    return report.deliveries + report.inbound
