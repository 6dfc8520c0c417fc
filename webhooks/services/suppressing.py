"""A delivery event's suppressions (bounce, complaint, rejection): written at once for a single
event, or, for a batch, after the rest of its work (``SuppressionPlan``), in the one lock order of
``intents.services.suppressions.suppressions_record_many``."""

from __future__ import annotations

import logging

from intents.services.suppressions import Suppressing, suppressions_record_many
from webhooks.models import WebhookEvent
from webhooks.normalize import NormalizedEvent

log = logging.getLogger("webhooks.services")


def _suppressing(
    event: WebhookEvent, normalized: NormalizedEvent, reason: str, addresses: list[str]
) -> Suppressing:
    note = f"{normalized.event_type} webhook" + (
        f" ({normalized.reason})" if normalized.reason else ""
    )
    source = (normalized.event_id or event.svix_id)[:100]
    return Suppressing(event.tenant_id, addresses, reason, source, note)


def _logged(event: WebhookEvent, changed: list[str]) -> list[str]:
    if changed:
        log.info(
            "webhooks.suppression.added",
            extra={"tenant_id": event.tenant_id, "svix_id": event.svix_id, "count": len(changed)},
        )
    return changed


def suppress(
    event: WebhookEvent, normalized: NormalizedEvent, reason: str, addresses: list[str]
) -> list[str]:
    """Add or strengthen tenant suppressions (``suppressions_record``: complained > bounced >
    rejected, a person's entry never overwritten); returns the addresses whose row changed."""
    if not addresses:
        return []
    (changed,) = suppressions_record_many([_suppressing(event, normalized, reason, addresses)])
    return _logged(event, changed)


class SuppressionPlan:
    """A batch's suppressions, written after the rest of its work, as if in event order.

    Why last: a batch also holds queued replies (a received message, ``intents_hold_stale``),
    which locks intents, while the admin console (``console.services.suppression_add``) and the
    worker (``intents.sending.record``) lock intents first and write the suppression after.
    Written when its bounce was applied, a suppression came before a later event's intent locks,
    the other order: an admin suppressing the same address by hand at that moment deadlocked
    with the batch, and PostgreSQL cancelled one of them (the admin's save, or the whole batch).

    ``add`` notes what an event would suppress; ``write`` records them all with
    ``suppressions_record_many``: each event's as if written in event order, so every event still
    gets the addresses whose row it changed (a complaint after a bounce of the same address
    strengthens the row and says so, a second bounce does not), and every row locked in the one
    order all writers use, (tenant, address), not in event order, which deadlocked with another
    applier or the worker naming two of the same addresses the other way round. ``changed_of``
    gives them to the event's journal row and text (``apply.with_suppressed``). Nothing in a
    batch reads the suppressions it writes.
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
        if not pending:
            return
        changed = suppressions_record_many([_suppressing(*noted) for noted in pending])
        for (event, *_), event_changed in zip(pending, changed, strict=True):
            self.changed[event.pk] = _logged(event, event_changed)

    def changed_of(self, event: WebhookEvent) -> list[str]:
        """The addresses whose row this event's suppressions changed (after ``write``)."""
        return self.changed.get(event.pk, [])
