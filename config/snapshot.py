"""Several reads that must answer from one moment of the database: a REPEATABLE READ, READ ONLY
transaction. Under READ COMMITTED (Django's default) each statement takes its own snapshot, so a
draft read before an approval committed and its send read after it gave an answer no moment of
the database ever held (``pending`` with a queued send)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from psycopg import IsolationLevel


@contextmanager
def read_snapshot() -> Iterator[None]:
    """Run the block's reads in one snapshot. The level is set on the psycopg connection, so it
    rides on the BEGIN the transaction sends anyway: no SET TRANSACTION statement more. Inside a
    caller's transaction the caller's snapshot rules (the level of a started transaction cannot
    change)."""
    if connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    raw = connection.connection
    before = (raw.isolation_level, raw.read_only)
    raw.isolation_level = IsolationLevel.REPEATABLE_READ
    raw.read_only = True
    try:
        with transaction.atomic():
            yield
    finally:
        raw.isolation_level, raw.read_only = before
