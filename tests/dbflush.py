"""The end of a transactional test: empty what the test wrote, not every table.

Django ends a ``TransactionTestCase`` (pytest-django's ``transactional_db``, ``live_server``) with
``manage.py flush``: one ``TRUNCATE`` of all 61 tables, which gives each table and each of its
indexes a new file. That took 60-110 ms of the server's time for every one of the suite's 800-odd
transactional tests, most of which write a dozen tables or fewer.

Here one statement finds the tables that hold rows, and one transaction empties them: ``DELETE``
for most (a few rows each; the foreign keys are deferred, so the order does not matter), and
``TRUNCATE`` for the tables whose row triggers refuse a ``DELETE`` (the append-only journals,
intents/migrations/0003). What the database holds afterwards is what Django's flush leaves:
every table empty, the sequences where they were (Django's flush does not reset them either),
and then ``post_migrate`` sent as the flush command sends it. A table with ``LARGE`` rows or more
(a history-size test), or anything the fast way cannot do, gets Django's own flush instead.
"""

from __future__ import annotations

from django.core.management import call_command
from django.core.management.sql import emit_post_migrate_signal
from django.db import DatabaseError, connections, transaction
from django.test import TransactionTestCase

# Past this many rows in one table, TRUNCATE's new files cost less than DELETE's dead rows.
LARGE = 2_000

_django_teardown = TransactionTestCase._fixture_teardown


def install() -> None:
    """Make every transactional test end with :func:`_fixture_teardown` (once per process)."""
    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[method-assign]


def _fixture_teardown(self: TransactionTestCase) -> None:
    # Django's own flush for what it treats differently: a subset of the apps, or a database
    # serialized to be restored.
    if self.available_apps is not None or self.serialized_rollback:
        _django_teardown(self)
        return
    for db_name in self._databases_names(include_mirrors=False):
        if empty_written_tables(db_name):
            emit_post_migrate_signal(verbosity=0, interactive=False, db=db_name)
        else:
            call_command(
                "flush", verbosity=0, interactive=False, database=db_name, reset_sequences=False
            )


def written_tables(db_name: str = "default") -> dict[str, int]:
    """{table: rows, counted up to LARGE} of every Django table that holds a row."""
    connection = connections[db_name]
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    quote = connection.ops.quote_name
    counts = ", ".join(
        f"(SELECT count(*) FROM (SELECT FROM {quote(table)} LIMIT {LARGE}) AS rows)"
        for table in tables
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {counts}")
        return {table: rows for table, rows in zip(tables, cursor.fetchone(), strict=True) if rows}


def empty_written_tables(db_name: str = "default") -> bool:
    """Empty every table that holds a row; False (and nothing changed) when Django's flush must
    do it instead."""
    connection = connections[db_name]
    quote = connection.ops.quote_name
    try:
        with transaction.atomic(using=db_name):
            written = written_tables(db_name)
            if not written:
                return True
            if max(written.values()) >= LARGE:
                return False
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT DISTINCT tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal"
                )
                triggered = {name for (name,) in cursor.fetchall()}
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")
                if truncated := [table for table in written if table in triggered]:
                    cursor.execute("TRUNCATE " + ", ".join(quote(table) for table in truncated))
                for table in written.keys() - set(truncated):
                    cursor.execute(f"DELETE FROM {quote(table)}")
    except DatabaseError:
        return False
    return True
