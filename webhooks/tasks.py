"""django-q2 entry points. Each takes ids, calls one service and is safe to run twice."""

from __future__ import annotations

from webhooks.services import apply, retention


def replay_pending() -> int:
    """Part of the sweep: apply events stored but not applied."""
    return apply.events_replay_pending()


def purge_payloads() -> int:
    """Retention: drop webhook payloads older than each tenant's retention period."""
    return retention.events_purge_payloads()
