"""Reads that must not wait on the database for long: /metrics and the health panel, which an
operator reads during an incident. Inside ``bounded_reads`` every statement ends within
``OPS_QUERY_TIMEOUT_SECONDS`` (PostgreSQL's statement_timeout, set for that transaction only,
which PgBouncer's transaction pooling keeps to it), a wait for a lock included; a statement cut
by it raises ``ReadTimedOut``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import OperationalError, connection, transaction
from psycopg import errors


class ReadTimedOut(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"the database did not answer within {seconds:g} s")
        self.seconds = seconds

    @property
    def explained(self) -> str:
        """For an operator: the likely causes and where to look."""
        return (
            f"{self}: a lock held on a table (a migration, a long transaction) or an overloaded "
            "server. Find the session that blocks in pg_stat_activity "
            "(wait_event_type = 'Lock', pg_blocking_pids)"
        )


@contextmanager
def bounded_reads() -> Iterator[None]:
    seconds = float(settings.OPS_QUERY_TIMEOUT_SECONDS)
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT current_setting('statement_timeout'), "
                    "set_config('statement_timeout', %s, true)",
                    [f"{max(1, round(seconds * 1000))}ms"],
                )
                before = cursor.fetchone()[0]
            yield
            # Inside an outer transaction (a test's, ATOMIC_REQUESTS) the setting would outlive
            # this block, to the end of that one; a block cut short rolls it back with itself.
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('statement_timeout', %s, true)", [before])
    except OperationalError as exc:
        if isinstance(exc.__cause__, errors.QueryCanceled):
            raise ReadTimedOut(seconds) from exc
        raise
