"""The database clock. Leases, deadlines and windows are measured against PostgreSQL's now(),
so workers on hosts with skewed clocks still agree."""

from __future__ import annotations

from datetime import datetime

from django.db import connection


def db_now() -> datetime:
    with connection.cursor() as cursor:
        # statement_timestamp(), like Django's Now(): transaction-start time would lag
        # inside a long transaction.
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]
