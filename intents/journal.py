"""The intent journal (``IntentEvent``): append-only, and this module is its only writer.

Every transition writes its row in the transaction of the change (``journal``); a worker batch or
the webhook receiver appends many rows in one statement (``journal_many``).

Every transition passes through here, so this is also where the transitions ``/metrics`` counts
are counted (``common.counters``, same transaction): intents reaching a terminal state (a count
of them in the table would grow forever) and reconciliations (an ``uncertain`` intent resolved).

``journal`` and ``journal_many`` also hand their rows to the agent events outbox (``intents.events.outbox``) in the same
transaction: the journal is the one place every state change passes, so mapping a journal action
to an event type there means no transition can forget its event or emit it twice.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from django.db import connection

from common.counters import Count, count, counters_add, counters_sql
from intents.events.outbox import Cause, outbox_record
from intents.models import IntentEvent, SendIntent

TERMINAL = SendIntent.TERMINAL
UNCERTAIN = SendIntent.State.UNCERTAIN
LABEL_LENGTH = IntentEvent._meta.get_field("actor_label").max_length


def transition_counts(tenant_id: int, action: str, from_state: str, to_state: str) -> list[Count]:
    """What ``/metrics`` counts for one journal row: a terminal state reached, an uncertain
    intent resolved. Draft rows (``draft.*``: their states share names) count nothing."""
    if not action.startswith("intent.") or from_state == to_state or not to_state:
        return []
    counts = []
    if to_state in TERMINAL:
        counts.append(count(tenant_id, "intents_finished", state=to_state))
    if from_state == UNCERTAIN:
        counts.append(count(tenant_id, "reconciliations", result=to_state))
    return counts


def journal(
    *,
    tenant,
    action: str,
    actor_kind: str,
    draft=None,
    intent=None,
    broadcast=None,
    actor_user=None,
    actor_token=None,
    actor_label: str = "",
    from_state: str = "",
    to_state: str = "",
    reason: str = "",
    data: dict | None = None,
) -> IntentEvent:
    tenant_id = tenant if isinstance(tenant, int) else tenant.pk
    if actor_user is not None:
        # A person is named by the address they act under now, from the user in hand (no
        # query): the pages name them so after the address changes (console.selectors).
        actor_label = actor_user.email
    counters_add(transition_counts(tenant_id, action, from_state, to_state))
    row = IntentEvent.objects.create(
        tenant_id=tenant_id,
        draft_id=getattr(draft, "pk", draft),
        intent_id=getattr(intent, "pk", intent),
        broadcast_id=getattr(broadcast, "pk", broadcast),
        actor_kind=actor_kind,
        actor_user=actor_user,
        actor_token=actor_token,
        actor_label=actor_label[:LABEL_LENGTH],
        action=action,
        from_state=from_state,
        to_state=to_state,
        reason=reason,
        data=data or {},
    )
    outbox_record(
        [
            Cause(
                tenant_id=tenant_id,
                action=action,
                actor_kind=actor_kind,
                draft_id=row.draft_id,
                intent_id=row.intent_id,
                reason=reason,
                data=row.data,
                journal_id=row.pk,
            )
        ]
    )
    return row


@dataclass(frozen=True)
class Entry:
    """One journal row of a batch (``journal_many``); the fields of ``journal`` a worker uses."""

    tenant_id: int
    action: str
    actor_kind: str
    draft_id: int | None = None
    intent_id: int | None = None
    actor_label: str = ""
    from_state: str = ""
    to_state: str = ""
    reason: str = ""
    data: dict = dataclasses.field(default_factory=dict)


def journal_many(entries: list[Entry], *, along_with: tuple[str, list] | None = None) -> None:
    """Append a batch's journal rows in one statement, with what ``journal`` writes per row
    (no person or token; ``created_at`` from the database clock, the column's default).

    The statement's text does not depend on the batch size (arrays, not a VALUES list), so it is
    prepared once per connection.

    ``along_with`` is one more statement of the caller, ``(sql, params)``, run in the same round
    trip: the insert becomes a data-modifying CTE in front of it. The webhook receiver records an
    event's outcome this way; a statement more per event would be most of its database time.
    """
    if not entries:
        if along_with is not None:
            with connection.cursor() as cursor:
                cursor.execute(*along_with)
        return
    columns = list(
        zip(
            *(
                (
                    e.tenant_id,
                    e.draft_id,
                    e.intent_id,
                    e.actor_kind,
                    e.actor_label[:LABEL_LENGTH],
                    e.action,
                    e.from_state,
                    e.to_state,
                    e.reason,
                    json.dumps(e.data),
                )
                for e in entries
            ),
            strict=True,
        )
    )
    sql = (
        f"INSERT INTO {IntentEvent._meta.db_table} (tenant_id, draft_id, intent_id, "  # noqa: S608
        "actor_kind, actor_label, action, from_state, to_state, reason, data) "
        "SELECT t, d, i, k, l, a, f, s, r, j::jsonb FROM unnest(%s::bigint[], "
        "%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], "
        "%s::text[], %s::text[], %s::text[]) AS u(t, d, i, k, l, a, f, s, r, j)"
    )
    params: list = [list(column) for column in columns]
    sql, params = _one_round_trip(entries, sql, params, along_with)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    outbox_record(
        Cause(
            tenant_id=e.tenant_id,
            action=e.action,
            actor_kind=e.actor_kind,
            draft_id=e.draft_id,
            intent_id=e.intent_id,
            reason=e.reason,
            data=e.data,
        )
        for e in entries
    )


def _one_round_trip(
    entries: list[Entry], insert_sql: str, insert_params: list, along_with: tuple[str, list] | None
) -> tuple[str, list]:
    """The journal insert with the batch's counts and the caller's ``along_with`` statement, as
    data-modifying CTEs (PostgreSQL allows them at the top level only)."""
    ctes: list[str] = []
    params: list = []
    counted = counters_sql(
        c
        for e in entries
        for c in transition_counts(e.tenant_id, e.action, e.from_state, e.to_state)
    )
    if counted is not None:
        ctes.append(f"counted AS ({counted[0]})")
        params += counted[1]
    sql = insert_sql
    tail = insert_params
    if along_with is not None:
        ctes.append(f"journal AS ({insert_sql})")
        params += insert_params
        sql, tail = along_with[0], list(along_with[1])
    if not ctes:
        return sql, tail
    return f"WITH {', '.join(ctes)} {sql}", params + tail
