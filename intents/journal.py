"""The intent journal (``IntentEvent``): append-only, and this module is its only writer.

Every transition writes its row in the transaction of the change (``journal``); a worker batch or
the webhook receiver appends many rows in one statement (``journal_many``).

Both hand their rows to the agent events outbox (``intents.events.outbox``) in the same
transaction: the journal is the one place every state change passes, so mapping a journal action
to an event type there means no transition can forget its event or emit it twice.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from django.db import connection

from intents.events.outbox import Cause, outbox_record
from intents.models import IntentEvent


def journal(
    *,
    tenant,
    action: str,
    actor_kind: str,
    draft=None,
    intent=None,
    actor_user=None,
    actor_token=None,
    actor_label: str = "",
    from_state: str = "",
    to_state: str = "",
    reason: str = "",
    data: dict | None = None,
) -> IntentEvent:
    tenant_id = tenant if isinstance(tenant, int) else tenant.pk
    row = IntentEvent.objects.create(
        tenant_id=tenant_id,
        draft_id=getattr(draft, "pk", draft),
        intent_id=getattr(intent, "pk", intent),
        actor_kind=actor_kind,
        actor_user=actor_user,
        actor_token=actor_token,
        actor_label=actor_label[:100],
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
                    e.actor_label[:100],
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
    if along_with is not None:
        sql = f"WITH journal AS ({sql}) {along_with[0]}"
        params += along_with[1]
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
