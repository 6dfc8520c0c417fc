"""The audit CSV is opened in spreadsheets: no cell of it may start a formula (CSV injection)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.test import Client
from django.urls import reverse

from intents import sending, services
from intents.models import IntentEvent
from intents.services.intents import intent_cancel
from intents.services.reopen import draft_reopen
from tenants.models import AuditEvent, User
from tenants.tokens import token_create
from tests.factories import approve_new_draft

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
    # The tab guarded as a lead and as a break: a reader that splits on tabs finds "'=1+1".
    assert admin_row[2] == "'\t'=1+1"
    assert admin_row[4] == "'\r'=2+2 1"
    assert all(not cell.startswith(FORMULA_LEADS) for row in rows for cell in row)


def test_no_column_of_the_audit_csv_starts_a_formula_where_excel_splits_on_semicolons(
    tenant_a, member_of, signed_in
):
    """German and Spanish Excel open a .csv split on ";" and take a quote only at a column's
    start: a semicolon or a line break inside a cell begins a new column or row there, and an
    outsider's "x;=cmd|..." became a formula in the column after it."""
    admin = member_of(tenant_a, "admin")
    IntentEvent.objects.create(
        tenant=tenant_a,
        actor_kind=IntentEvent.Actor.WEBHOOK,
        actor_label="Support;=cmd|' /C calc'!A0",
        action="delivery.bounced",
        to_state="queued",
        reason='Mailbox full\n=HYPERLINK("http://evil.test")\r+1;@SUM(1)',
        data={"note": "x;-2+3"},
    )
    client = signed_in(admin.user)

    response = client.get(reverse("admin_audit_csv", args=[tenant_a.slug]))
    body = b"".join(response.streaming_content).decode()

    pieces = re.split(r"[;\r\n]", body)
    assert [p for p in pieces if p.startswith(FORMULA_LEADS)] == []
    journal = next(r for r in csv.reader(io.StringIO(body)) if r[1] == "journal")
    assert journal[3] == "Support;'=cmd|' /C calc'!A0"


@pytest.mark.parametrize(("name", "status"), [("admin_audit", 200), ("admin_audit_csv", 400)])
@pytest.mark.parametrize("day", ["9999-12-31", "0001-01-01"])
def test_a_day_at_the_calendars_end_is_a_form_error_not_a_500(
    tenant_a, member_of, signed_in, name, status, day
):
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.get(reverse(name, args=[tenant_a.slug]), {"until": day, "since": day})

    assert response.status_code == status


@pytest.mark.parametrize(
    "query", [{"send": "-1"}, {"send": str(2**63)}, {"source": "journal", "actor": "a\x00b"}]
)
def test_an_export_with_a_filter_it_cannot_read_is_refused_not_the_whole_log(
    tenant_a, member_of, signed_in, mailbox_a, make_intent, query
):
    """The page shows its rows beside a warning that it ignored a filter; a file has no room for
    one, so the export of "send #-1" was the tenant's whole log under a name that said nothing.
    The page's own export link leaves the ignored filter out: it exports what the page shows."""
    make_intent(mailbox_a)
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.get(reverse("admin_audit_csv", args=[tenant_a.slug]), query)
    page = client.get(reverse("admin_audit", args=[tenant_a.slug]), query)

    assert response.status_code == 400
    assert "nothing was exported" in response.content.decode()
    assert page.status_code == 200
    assert page.context["export_query"] == ("source=journal" if "source" in query else "")


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


def test_a_sends_record_leaves_out_the_later_sends_of_its_draft(
    tenant_a, signed_in, admin_a, mailbox_a, make_intent
):
    """Cancelled, reopened and approved again: the first send's record ends with its
    cancellation (the second approval and send are not its own); the second's has the draft's
    history before it, the first send's included, and its own."""
    first = make_intent(mailbox_a)
    intent_cancel(tenant=tenant_a, intent_id=first.pk, actor=admin_a.user, reason="wrong order")
    draft = draft_reopen(
        tenant=tenant_a, draft_id=first.draft_id, actor=admin_a.user, reason="again"
    )
    version = draft.versions.order_by("-number").first()
    second = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=admin_a.user,
    )
    client = signed_in(admin_a.user)

    first_record = _export(client, tenant_a, send=first.pk)
    second_record = _export(client, tenant_a, send=second.pk)

    assert sorted((r[2], r[4]) for r in first_record[1:]) == [
        ("draft.approved", f"intent {first.pk}"),
        ("draft.created", f"draft {draft.pk}"),
        ("draft.reopened", f"intent {first.pk}"),
        ("intent.cancelled", f"intent {first.pk}"),
        ("intent.created", f"intent {first.pk}"),
    ]
    assert sorted(r[4] for r in second_record[1:]).count(f"intent {second.pk}") == 2
    assert len(second_record) == len(first_record) + 2


def _operator_changes_address(user, new_email):
    """The address changed in the operators' Django admin, as an operator does it."""
    operator = User.objects.create_superuser("ops@countersign.test", "operator-pass-1")
    client = Client()
    client.force_login(operator)
    response = client.post(
        f"/ops/admin/tenants/user/{user.pk}/change/",
        {
            "email": new_email,
            "full_name": user.full_name,
            "is_active": "on",
            "date_joined_0": user.date_joined.date().isoformat(),
            "date_joined_1": "00:00:00",
        },
    )
    assert response.status_code == 302


def test_the_log_names_who_acted_by_the_address_they_had_then(tenant_a, admin_a, signed_in):
    """An address changed after the action (here by an operator) no longer renames the earlier
    rows: the CSV keeps the address then, the page says it and the one now, and the actor
    filter finds the person by either."""
    old_email = admin_a.user.email
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=admin_a.user)
    signed_in(admin_a.user).post(reverse("token_revoke", args=[tenant_a.slug, token.pk]))
    _operator_changes_address(admin_a.user, "ana.new@example.test")
    client = signed_in(User.objects.get(pk=admin_a.user_id))

    rows = _export(client, tenant_a, source="admin")
    by_new_address = _export(client, tenant_a, actor="ana.new@")
    page = client.get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()

    assert sorted((r[2], r[3]) for r in rows[1:]) == [
        ("token.created", old_email),
        ("token.revoked", old_email),
        ("user.changed_by_operator", "ops@countersign.test"),
    ]
    assert sorted(r[2] for r in by_new_address[1:]) == ["token.created", "token.revoked"]
    assert f"{old_email} (now ana.new@example.test) revoked the agent token" in page.lower()


def test_the_address_an_actor_had_goes_through_the_formula_guard(tenant_a, member_of, signed_in):
    """An address may begin with "=": the one kept from then is an outsider's text in the CSV
    as much as today's."""
    actor = member_of(tenant_a, "admin", user__email="=cmd@example.test").user
    token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=actor)
    User.objects.filter(pk=actor.pk).update(email="plain@example.test")

    rows = _export(signed_in(member_of(tenant_a, "admin").user), tenant_a, source="admin")

    assert [r[3] for r in rows[1:]] == ["'=cmd@example.test"]


def test_the_journal_names_who_approved_by_the_address_they_had_then(
    tenant_a, member_of, mailbox_factory, signed_in
):
    """A person approves, the worker sends, then the person's address changes: the CSV's journal
    rows keep the address they approved under, the page says it and the one now, the actor
    filter finds them by either, and the worker's rows still name the worker."""
    approver = member_of(tenant_a, "approver").user
    old_email = approver.email
    intent = approve_new_draft(tenant_a, mailbox_factory(tenant_a), approver)
    sending.run_once(worker="host-7:4242:MainThread", limit=5)
    _operator_changes_address(approver, "ana.new@example.test")
    client = signed_in(member_of(tenant_a, "admin").user)

    rows = _export(client, tenant_a, source="journal")
    by_new_address = _export(client, tenant_a, source="journal", actor="ana.new@")
    page = client.get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()

    assert sorted((r[2], r[3]) for r in rows[1:] if r[3] != "host-7:4242:MainThread") == [
        ("draft.approved", old_email),
        ("draft.created", old_email),
        ("intent.created", old_email),
    ]
    assert {r[2] for r in rows[1:] if r[3] == "host-7:4242:MainThread"} >= {"intent.accepted"}
    assert sorted(r[2] for r in by_new_address[1:]) == [
        "draft.approved",
        "draft.created",
        "intent.created",
    ]
    assert page.lower().count(f"{old_email} (now ana.new@example.test)") == 3
    assert IntentEvent.objects.get(intent=intent, action="intent.accepted").actor_user is None
