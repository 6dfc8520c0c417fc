"""A delivery event's suppressions (bounce, complaint, rejection): written at once for a single
event, or, for a batch, after the rest of its work (``SuppressionPlan``)."""

from __future__ import annotations

import logging

from intents.services.suppressions import suppressions_record
from webhooks.models import WebhookEvent
from webhooks.normalize import NormalizedEvent

log = logging.getLogger("webhooks.services")


def suppress(
    event: WebhookEvent, normalized: NormalizedEvent, reason: str, addresses: list[str]
) -> list[str]:
    """Add or strengthen tenant suppressions (``suppressions_record``: complained > bounced >
    rejected, a person's entry never overwritten); returns the addresses whose row changed."""
    if not addresses:
        return []
    note = f"{normalized.event_type} webhook" + (
        f" ({normalized.reason})" if normalized.reason else ""
    )
    changed = suppressions_record(
        tenant_id=event.tenant_id,
        addresses=addresses,
        reason=reason,
        source=(normalized.event_id or event.svix_id)[:100],
        note=note,
    )
    if changed:
        log.info(
            "webhooks.suppression.added",
            extra={"tenant_id": event.tenant_id, "svix_id": event.svix_id, "count": len(changed)},
        )
    return changed


class SuppressionPlan:
    """A batch's suppressions, written after the rest of its work, in event order.

    Why last: a batch also holds queued replies (a received message, ``intents_hold_stale``),
    which locks intents, while the admin console (``console.services.suppression_add``) and the
    worker (``intents.sending.record``) lock intents first and write the suppression after.
    Written when its bounce was applied, a suppression came before a later event's intent locks,
    the other order: an admin suppressing the same address by hand at that moment deadlocked
    with the batch, and PostgreSQL cancelled one of them (the admin's save, or the whole batch).

    ``add`` notes what an event would suppress; ``write`` records each event's in event order,
    one ``suppressions_record`` call each as when they were written at once, so every event still
    gets the addresses whose row it changed (a complaint after a bounce of the same address
    strengthens the row and says so, a second bounce does not); ``changed_of`` gives them to the
    event's journal row and text (``apply.with_suppressed``). Nothing in a batch reads the suppressions it writes.
    """

    def __init__(self) -> None:
        self.pending: list[tuple[WebhookEvent, NormalizedEvent, str, list[str]]] = []
        self.changed: dict[int, list[str]] = {}

    def add(
        self, event: WebhookEvent, normalized: NormalizedEvent, reason: str, addresses: list[str]
    ) -> None:
        if addresses:
            self.pending.append((event, normalized, reason, addresses))

    def write(self) -> None:
        pending, self.pending = self.pending, []
        for event, normalized, reason, addresses in pending:
            self.changed[event.pk] = suppress(event, normalized, reason, addresses)

    def changed_of(self, event: WebhookEvent) -> list[str]:
        """The addresses whose row this event's suppressions changed (after ``write``)."""
        return self.changed.get(event.pk, [])
