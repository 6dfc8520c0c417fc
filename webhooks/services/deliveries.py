"""Recipient delivery rows: each approved recipient's furthest delivery state, by rank.

A row only ever moves to a higher rank (``RecipientDelivery.RANK``: sent < delivered < rejected <
bounced < complained), so events applied late or twice change nothing. ``advance`` writes one
event's recipients (one upsert); ``DeliveryPlan`` does the same for a whole batch of events, in
memory and in order, and writes once. Every writer holds the message's lock (``apply``).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection

from webhooks.models import RecipientDelivery, WebhookEvent


def _rank_sql(column: str) -> str:
    cases = " ".join(
        f"WHEN '{state}' THEN {rank}" for state, rank in RecipientDelivery.RANK.items()
    )
    return f"(CASE {column} {cases} ELSE 0 END)"


def advance(event: WebhookEvent, intent_id: int, state: str, addresses: Iterable[str]) -> list:
    """Upsert each recipient's state, changing a row only to a higher rank; returns who moved.

    One statement per event: concurrent events for the same recipient are ordered by the row
    lock of the upsert, and the rank comparison makes the result independent of that order.
    """
    addresses = list(addresses)
    if not addresses:
        return []
    table = RecipientDelivery._meta.db_table
    values = ", ".join(["(%s, %s, %s, %s, now(), %s)"] * len(addresses))
    params: list = []
    for address in addresses:
        params += [event.tenant_id, intent_id, address, state, event.pk]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} AS d (tenant_id, intent_id, address, state, updated_at, "  # noqa: S608
            f"last_event_id) VALUES {values} "
            "ON CONFLICT (intent_id, address) DO UPDATE SET state = EXCLUDED.state, "
            "updated_at = EXCLUDED.updated_at, last_event_id = EXCLUDED.last_event_id "
            f"WHERE {_rank_sql('d.state')} < {_rank_sql('EXCLUDED.state')} "
            "RETURNING address",
            params,
        )
        moved = {row[0] for row in cursor.fetchall()}
    return [a for a in addresses if a in moved]


class DeliveryPlan:
    """The recipient rows of a batch's intents, advanced in memory event by event, written once.

    ``advance`` gives each event exactly what ``advance`` would (a row moves only to a higher
    rank; a new row always "moves"), in the batch's order, so each event's journal row says what
    it moved. That is exact because nobody else writes these rows meanwhile: every writer holds the
    message's lock (the batch took all of its messages' locks before ``load``), and ``load`` also
    locks the rows that exist. ``write`` upserts the final states in one statement, with the same
    rank guard as ``advance``.
    """

    def __init__(self, current: dict[tuple[int, str], str]):
        self.current = current
        self.final: dict[tuple[int, str], tuple[int, str, int]] = {}

    @classmethod
    def load(cls, intent_ids: Iterable[int]) -> DeliveryPlan:
        ids = sorted(set(intent_ids))
        if not ids:
            return cls({})
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT intent_id, address, state "  # noqa: S608
                f"FROM {RecipientDelivery._meta.db_table} WHERE intent_id = ANY(%s) "
                "ORDER BY intent_id, address FOR UPDATE",
                [ids],
            )
            return cls({(i, a): state for i, a, state in cursor.fetchall()})

    def advance(
        self, event: WebhookEvent, intent_id: int, state: str, addresses: Iterable[str]
    ) -> list[str]:
        rank = RecipientDelivery.RANK.get(state, 0)
        moved = []
        for address in addresses:
            key = (intent_id, address)
            if key in self.current and RecipientDelivery.RANK.get(self.current[key], 0) >= rank:
                continue
            self.current[key] = state
            self.final[key] = (event.tenant_id, state, event.pk)
            moved.append(address)
        return moved

    def write(self) -> None:
        if not self.final:
            return
        rows = [(key, value) for key, value in sorted(self.final.items())]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {RecipientDelivery._meta.db_table} AS d (tenant_id, intent_id, "  # noqa: S608
                "address, state, updated_at, last_event_id) "
                "SELECT t, i, a, s, now(), e FROM unnest(%s::bigint[], %s::bigint[], %s::text[], "
                "%s::text[], %s::bigint[]) AS u(t, i, a, s, e) "
                "ON CONFLICT (intent_id, address) DO UPDATE SET state = EXCLUDED.state, "
                "updated_at = EXCLUDED.updated_at, last_event_id = EXCLUDED.last_event_id "
                f"WHERE {_rank_sql('d.state')} < {_rank_sql('EXCLUDED.state')}",
                [
                    [tenant for _, (tenant, _, _) in rows],
                    [intent for (intent, _), _ in rows],
                    [address for (_, address), _ in rows],
                    [state for _, (_, state, _) in rows],
                    [event for _, (_, _, event) in rows],
                ],
            )
