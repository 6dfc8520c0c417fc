"""The audit CSV is opened in spreadsheets: no cell of it may start a formula (CSV injection)."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from intents.models import IntentEvent
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db

FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


def _export(client, tenant, **query):
    response = client.get(reverse("admin_audit_csv", args=[tenant.slug]), query)
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_every_cell_of_the_audit_csv_goes_through_the_formula_guard(tenant_a, member_of, signed_in):
    admin = member_of(tenant_a, "admin")
    IntentEvent.objects.create(
        tenant=tenant_a,
        actor_kind=IntentEvent.Actor.WEBHOOK,
        actor_label='=HYPERLINK("http://evil.test")',
        action="+cmd|' /C calc'!A0",
        from_state="@SUM(1+1)",
        to_state="queued",
        reason="-2+3",
        data={"note": "x"},
    )
    AuditEvent.objects.create(
        tenant=tenant_a,
        actor=None,
        action="\t=1+1",
        object_type="\r=2+2",
        object_id="1",
        data={},
    )
    rows = _export(signed_in(admin.user), tenant_a)
    journal = next(r for r in rows if r[1] == "journal")
    admin_row = next(r for r in rows if r[1] == "admin")
    assert journal[2:7] == [
        "'+cmd|' /C calc'!A0",
        '\'=HYPERLINK("http://evil.test")',
        "",
        "'@SUM(1+1) → queued",
        "'-2+3",
    ]
    assert admin_row[2] == "'\t=1+1"
    assert admin_row[4] == "'\r=2+2 1"
    assert all(not cell.startswith(FORMULA_LEADS) for row in rows for cell in row)


@pytest.mark.parametrize("name", ["admin_audit", "admin_audit_csv"])
@pytest.mark.parametrize("day", ["9999-12-31", "0001-01-01"])
def test_a_day_at_the_calendars_end_is_a_form_error_not_a_500(
    tenant_a, member_of, signed_in, name, day
):
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.get(reverse(name, args=[tenant_a.slug]), {"until": day, "since": day})

    assert response.status_code == 200
