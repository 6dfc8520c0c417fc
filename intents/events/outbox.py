"""The outbox: which journal rows are agent events, and writing them with their deliveries.

``intents.journal`` calls ``outbox_record`` for every row it writes, inside the transaction of the
change, so an event exists exactly when its state change committed: one journal row, at most one
event, never an event for a change that rolled back. A replayed provider webhook writes no
journal row (the webhook ledger is unique per ``svix-id``), and a delivery event that moved no
recipient forward emits nothing, so a second ``message.bounced`` for the same address is silent.

Events go only to endpoints that exist when the change commits: the endpoint rows are read
``FOR KEY SHARE``, which waits for (and then skips) an endpoint being deleted, and does not
conflict with the worker's or an admin's updates of the row.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import connection, transaction

from intents.events.payloads import Facts, payload_for
from intents.models import AgentEvent, AgentEventDelivery, AgentEventEndpoint, EventType

log = logging.getLogger("intents.events")

# Journal action → event type. Actions with a condition are in ``event_type``.
_BY_ACTION = {
    "draft.approved": EventType.DRAFT_APPROVED,
    "draft.rejected": EventType.DRAFT_REJECTED,
    "draft.expired": EventType.DRAFT_EXPIRED,
    "draft.withdrawn": EventType.DRAFT_WITHDRAWN,
    "intent.accepted": EventType.SEND_ACCEPTED,
    # A person marked it sent with evidence: for the agent, the send was accepted.
    "intent.resolved_accepted": EventType.SEND_ACCEPTED,
    "intent.needs_attention": EventType.SEND_NEEDS_ATTENTION,
    "intent.failed": EventType.SEND_FAILED,
    "intent.blocked": EventType.SEND_BLOCKED,
    # Without these an agent told `draft.approved` heard nothing more when a person cancelled
    # the send, undid the approval or reopened the draft, or the send-by time passed: it waited
    # for a send that would never come, and could not revise the draft that was pending again.
    "intent.cancelled": EventType.SEND_CANCELLED,
    "intent.expired": EventType.SEND_EXPIRED,
    "draft.reopened": EventType.DRAFT_REOPENED,
    # An undo writes `intent.undone` too; the draft's event names that send (`intent`).
    "draft.approval_undone": EventType.DRAFT_REOPENED,
    "delivery.delivered": EventType.SEND_DELIVERED,
    "delivery.bounced": EventType.SEND_BOUNCED,
    "delivery.complained": EventType.SEND_COMPLAINED,
}


@dataclass(frozen=True)
class Cause:
    """What the journal row says, as far as an event needs it."""

    tenant_id: int
    action: str
    actor_kind: str
    draft_id: int | None
    intent_id: int | None
    reason: str = ""
    data: dict = field(default_factory=dict)
    journal_id: int | None = None


def event_type(cause: Cause) -> str | None:
    if cause.intent_id is not None and cause.draft_id is None:
        # A broadcast's send (the only intent without a draft): thousands per broadcast, and
        # no agent's draft to report on. Not agent events (yet).
        return None
    if cause.action == "draft.version_added":
        # An agent's revision is the agent's own news; a person's edit is what it learns from.
        return EventType.DRAFT_EDITED if cause.actor_kind == "person" else None
    if cause.action.startswith("delivery.") and not cause.data.get("moved"):
        return None
    return _BY_ACTION.get(cause.action)


@dataclass(frozen=True)
class _Endpoint:
    id: int
    tenant_id: int
    event_types: list[str]
    mailbox_id: int | None

    def wants(self, tenant_id: int, type_: str, mailbox_id: int | None) -> bool:
        return (
            self.tenant_id == tenant_id
            and type_ in self.event_types
            and (self.mailbox_id is None or self.mailbox_id == mailbox_id)
        )


def _endpoints(tenant_ids: set[int], types: set[str]) -> list[_Endpoint]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, tenant_id, event_types, mailbox_id FROM {AgentEventEndpoint._meta.db_table} "  # noqa: S608
            "WHERE tenant_id = ANY(%s) AND enabled AND event_types && %s::varchar[] "
            "ORDER BY id FOR KEY SHARE",
            [sorted(tenant_ids), sorted(types)],
        )
        return [_Endpoint(*row) for row in cursor.fetchall()]


def outbox_record(causes: Iterable[Cause]) -> int:
    """Write the events these journal rows cause, and one delivery per interested endpoint; wake
    the delivery worker on commit. Call inside the transaction that wrote the rows. Returns the
    number of deliveries written."""
    typed = [(c, t) for c in causes if (t := event_type(c))]
    if not typed:
        return 0
    endpoints = _endpoints({c.tenant_id for c, _ in typed}, {t for _, t in typed})
    if not endpoints:
        return 0
    facts = Facts.load(typed)
    events: list[AgentEvent] = []
    targets: list[list[_Endpoint]] = []
    for cause, type_ in typed:
        mailbox_id = facts.mailbox_of(cause)
        interested = [e for e in endpoints if e.wants(cause.tenant_id, type_, mailbox_id)]
        if not interested:
            continue
        events.append(
            AgentEvent(
                tenant_id=cause.tenant_id,
                public_id=f"evt_{uuid.uuid4().hex}",
                type=type_,
                draft_id=cause.draft_id,
                intent_id=cause.intent_id,
                journal_id=cause.journal_id,
                payload=payload_for(cause, type_, facts),
            )
        )
        targets.append(interested)
    if not events:
        return 0
    AgentEvent.objects.bulk_create(events)
    deliveries = AgentEventDelivery.objects.bulk_create(
        AgentEventDelivery(tenant_id=event.tenant_id, endpoint_id=endpoint.id, event=event)
        for event, interested in zip(events, targets, strict=True)
        for endpoint in interested
    )
    endpoint_ids = sorted({d.endpoint_id for d in deliveries})
    transaction.on_commit(lambda: wake_delivery(endpoint_ids))
    return len(deliveries)


def wake_delivery(endpoint_ids: list[int]) -> None:
    """Ask a django-q2 worker to deliver now. Losing this is harmless: the sweep wakes it too."""
    try:
        from django_q.tasks import async_task

        async_task("intents.tasks.deliver_agent_events", task_name="agent-events")
    except Exception:
        log.exception("intents.events.enqueue_failed", extra={"endpoints": endpoint_ids})
