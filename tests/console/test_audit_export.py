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


def test_one_sends_record_is_its_drafts_and_its_own_journal_and_only_this_tenants(
    tenant_a, tenant_b, member_of, signed_in, mailbox_a, mailbox_b, make_intent
):
    """A customer complains about one reply months later: the admin gets its whole chain of
    custody (written, approved under which right, to whom, sent) without paging through the
    tenant's history, from the send's page; another tenant's send number gives nothing, as a
    missing one does."""
    sent = make_intent(mailbox_a, state="accepted")
    make_intent(mailbox_a)  # another send of the tenant: not in this record
    theirs = make_intent(mailbox_b, state="accepted")
    admin = signed_in(member_of(tenant_a, "admin").user)

    rows = _export(admin, tenant_a, send=sent.pk)
    other_tenants = _export(admin, tenant_a, send=theirs.pk)
    missing = _export(admin, tenant_a, send=theirs.pk + 1000)
    page = admin.get(reverse("admin_audit", args=[tenant_a.slug]), {"send": sent.pk})
    send_page = admin.get(reverse("outbox_intent", args=[tenant_a.slug, sent.pk]))

    assert sorted((r[2], r[4]) for r in rows[1:]) == [
        ("draft.approved", f"intent {sent.pk}"),
        ("draft.created", f"draft {sent.draft_id}"),
        ("intent.created", f"intent {sent.pk}"),
    ]
    approval = next(r for r in rows if r[2] == "draft.approved")
    assert (
        f'"recipients": {{"bcc": [], "cc": [], "to": ["{sent.recipients["to"][0]}"]}}'
        in (approval[7])
    )
    assert '"role": "admin"' in approval[7] and '"all_mailboxes": true' in approval[7]
    assert other_tenants == missing == [rows[0]]
    shown = page.content.decode()
    assert shown.count("<tr data-action=") == 3
    assert f"to: {sent.recipients['to'][0]}" in shown
    link = f'href="{reverse("admin_audit", args=[tenant_a.slug])}?send={sent.pk}"'
    assert link in send_page.content.decode()


def test_the_send_page_links_its_record_for_admins_only(
    tenant_a, member_of, signed_in, mailbox_a, make_intent
):
    sent = make_intent(mailbox_a, state="accepted")
    approver = signed_in(member_of(tenant_a, "approver").user)

    page = approver.get(reverse("outbox_intent", args=[tenant_a.slug, sent.pk]))

    assert page.status_code == 200
    assert b"data-send-record" not in page.content
