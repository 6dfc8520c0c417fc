"""Query plans in tests: the nodes of a statement's plan, as PostgreSQL chose it."""

from __future__ import annotations

import json

from django.db import connection, transaction


def plan_nodes(sql: str, params=None, *, analyze: bool = False, seqscan: bool = True) -> list[dict]:
    """Every node of ``EXPLAIN (FORMAT JSON) sql``, the root first.

    ``analyze``: run the statement (``EXPLAIN ANALYZE``, actual rows and loops) in a savepoint
    that is always rolled back, so nothing it writes stays. ``seqscan=False``: with sequential
    scans switched off, so that the planner uses any index that can serve the statement.
    """
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
    with transaction.atomic(), connection.cursor() as cursor:
        if not seqscan:
            cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN ({options}) {sql}", params)
        plan = cursor.fetchone()[0]
        transaction.set_rollback(True)
    if isinstance(plan, str):
        plan = json.loads(plan)
    nodes, todo = [], [plan[0]["Plan"]]
    while todo:
        node = todo.pop()
        nodes.append(node)
        todo.extend(node.get("Plans", []))
    return nodes
