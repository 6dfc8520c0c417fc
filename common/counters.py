"""Counters for ``/metrics``: the only writer and reader of ``Counter``.

A writer adds to a counter in the transaction of the change it counts (an attempt closed, an
intent finished, a replayed request), so a total read at any time is exactly what committed. A
batch adds all its counts in one statement, summed per counter (``counters_add``), never one
statement per row. The reader (``counter_totals``) sums a few rows per tenant and counter: its
cost does not depend on how much history the counted tables hold.

Hot rows: every write goes to the shard of its database backend (``mod(pg_backend_pid(),
SHARDS)``), so two worker processes (two connections) committing batches for the same tenant at
once usually add to different rows, and a backend only ever waits for a backend of its shard.
The rows of one statement are added in a fixed order (sorted), so two statements that touch the
same rows cannot deadlock each other.
"""

from __future__ import annotations

import json
from collections import Counter as Tally
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import connection

from common.models import Counter

SHARDS = 16


@dataclass(frozen=True)
class Count:
    """``n`` more of counter ``name`` with these labels, for one tenant."""

    tenant_id: int
    name: str
    labels: tuple[tuple[str, str], ...] = ()
    n: int = 1


def count(tenant_id: int, name: str, n: int = 1, **labels: str) -> Count:
    return Count(tenant_id, name, tuple(sorted(labels.items())), n)


@dataclass(frozen=True)
class Total:
    tenant_id: int
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    n: int = 0


def counters_sql(counts: Iterable[Count]) -> tuple[str, list] | None:
    """The statement that adds ``counts`` (summed per counter), or None when there is nothing to
    add; for a caller that runs it in a round trip of its own (a CTE)."""
    tally: Tally[tuple[int, str, tuple[tuple[str, str], ...]]] = Tally()
    for c in counts:
        if c.n:
            tally[(c.tenant_id, c.name, c.labels)] += c.n
    if not tally:
        return None
    keys = sorted(tally)
    table = Counter._meta.db_table
    sql = (
        f"INSERT INTO {table} (tenant_id, name, labels, shard, n) "  # noqa: S608
        f"SELECT t, m, l::jsonb, mod(pg_backend_pid(), {SHARDS}), n FROM unnest(%s::bigint[], "
        "%s::text[], %s::text[], %s::bigint[]) WITH ORDINALITY AS u(t, m, l, n, o) ORDER BY o "
        "ON CONFLICT ON CONSTRAINT counter_unique_slice "
        f"DO UPDATE SET n = {table}.n + excluded.n"
    )
    params = [
        [k[0] for k in keys],
        [k[1] for k in keys],
        [json.dumps(dict(k[2]), sort_keys=True) for k in keys],
        [tally[k] for k in keys],
    ]
    return sql, params


def counters_add(counts: Iterable[Count]) -> None:
    """Add ``counts`` in one statement (none when all are zero). Call it inside the transaction
    of what it counts."""
    statement = counters_sql(counts)
    if statement is None:
        return
    with connection.cursor() as cursor:
        cursor.execute(*statement)


def counter_totals() -> list[Total]:
    """Every counter's total per tenant: one query over the counter rows (a few per tenant and
    counter, whatever the history)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT tenant_id, name, labels, sum(n) FROM {Counter._meta.db_table} "  # noqa: S608
            "GROUP BY tenant_id, name, labels ORDER BY tenant_id, name"
        )
        rows = cursor.fetchall()
    return [
        Total(tenant_id, name, json.loads(labels) if isinstance(labels, str) else labels, int(n))
        for tenant_id, name, labels, n in rows
    ]
