"""A database restored from a backup taken before its tenants were created, or one built anew
beside another on the same AgentMail organization: none of the tenants' rows, and the id
sequences hand their ids out again."""

from __future__ import annotations

from django.db import connection

from mailboxes.models import Mailbox
from tenants.models import Tenant


def restore_from_before_every_tenant(*, next_tenant_id: int, next_mailbox_id: int = 1) -> None:
    """Empty the tenants table and every table that hangs off it (TRUNCATE: the journals'
    append-only triggers are row triggers, which a restore never met either), then make the
    next tenant and mailbox take the ids given. Inside the test's transaction, so rolled back."""
    with connection.cursor() as cursor:
        # Django's foreign keys are deferred: their checks of this transaction's inserts run now,
        # as TRUNCATE wants none pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"TRUNCATE {Tenant._meta.db_table} CASCADE")
        for model, next_id in ((Tenant, next_tenant_id), (Mailbox, next_mailbox_id)):
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s, false)",
                [model._meta.db_table, next_id],
            )
