"""Recipient delivery rows: each approved recipient's furthest delivery state, by rank.

A row only ever moves to a higher rank (``RecipientDelivery.RANK``: sent < delivered < rejected <
bounced < complained), so events applied late or twice change nothing. ``DeliveryPlan`` reads an
intent's rows (locked), advances them in memory event by event, in order, and writes them once:
the batch applier keeps one plan for its whole batch, a single event gets its own. Every writer
holds the message's lock first (``apply``), so nobody else writes these rows meanwhile.
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


class DeliveryPlan:
    """The recipient rows of some intents, advanced in memory, written once.

    ``advance`` returns whom one event moved (a row moves only to a higher rank; a new row always
    moves), so each event's journal row says what it moved. ``load`` reads (and locks) the rows of
    intents up front, in one statement for a batch; ``advance`` loads an intent it has not seen.
    ``write`` upserts the final states in one statement, with the same rank guard in SQL.
    """

    def __init__(self) -> None:
        self.current: dict[tuple[int, str], str] = {}
        self.loaded: set[int] = set()
        self.final: dict[tuple[int, str], tuple[int, str, int]] = {}
        # (endpoint id, message id) of the backfill's rejections applied with this plan, whose
        # ledger rows are not written yet (``apply._rejection_backfilled``).
        self.backfilled_rejections: set[tuple[int, str]] = set()

    def load(self, intent_ids: Iterable[int]) -> DeliveryPlan:
        ids = sorted(set(intent_ids) - self.loaded)
        if not ids:
            return self
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT intent_id, address, state "  # noqa: S608
                f"FROM {RecipientDelivery._meta.db_table} WHERE intent_id = ANY(%s) "
                "ORDER BY intent_id, address FOR UPDATE",
                [ids],
            )
            self.current.update({(i, a): state for i, a, state in cursor.fetchall()})
        self.loaded.update(ids)
        return self

    def advance(
        self, event: WebhookEvent, intent_id: int, state: str, addresses: Iterable[str]
    ) -> list[str]:
        addresses = list(addresses)
        if addresses:
            self.load([intent_id])
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
        rows = sorted(self.final.items())
        self.final = {}
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
