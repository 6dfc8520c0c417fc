"""tests/dbflush.py: a transactional test's flush leaves what Django's flush leaves."""

from __future__ import annotations

import pytest
from django.db import connection

from intents.models import IntentEvent
from tenants.models import AuditEvent, Tenant
from tests import dbflush
from tests.factories import MembershipFactory, TenantFactory, approve_new_draft, make_local_mailbox


@pytest.mark.django_db(transaction=True)
def test_every_written_table_is_emptied_journals_and_foreign_keys_included():
    tenant = TenantFactory()
    approver = MembershipFactory(tenant=tenant, role="approver")
    approve_new_draft(tenant, make_local_mailbox(tenant), approver.user)
    written = dbflush.written_tables()
    assert {"tenants_tenant", "intents_sendintent", "intents_intentevent"} <= written.keys()
    assert IntentEvent.objects.exists()  # append-only: refuses DELETE, so TRUNCATE

    assert dbflush.empty_written_tables() is True

    assert dbflush.written_tables() == {}


@pytest.mark.django_db(transaction=True)
def test_a_table_of_history_size_is_left_to_djangos_flush():
    tenant = Tenant.objects.create(name="T", slug="t")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tenants_auditevent (tenant_id, action, object_type, object_id, data)"
            " SELECT %s, 'x', 'x', '1', '{}' FROM generate_series(1, %s)",
            [tenant.pk, dbflush.LARGE],
        )

    assert dbflush.empty_written_tables() is False

    assert AuditEvent.objects.count() == dbflush.LARGE
