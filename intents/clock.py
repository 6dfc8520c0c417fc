"""The database clock. Leases, deadlines and windows are measured against PostgreSQL's now(),
so workers on hosts with skewed clocks still agree."""

from __future__ import annotations

from datetime import datetime

from django.db import connection


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]
