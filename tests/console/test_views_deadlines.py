"""Admin settings of deadlines, escalation, automatic assignment and the away flag."""

from __future__ import annotations

import pytest
from django.urls import reverse

from mailboxes.models import Mailbox
from tenants.models import AuditEvent, Tenant
from tests.pages import based_on

pytestmark = pytest.mark.django_db


def _post(client, tenant, **data):
    """A post from the policies page as it is now (its deadlines form's ``based_on``)."""
    fields = {
        "sla_minutes": "",
        "sla_warning_minutes": "",
        "escalate_to": "",
        "escalate_to_role": "",
        "based_on": based_on(
            client, reverse("admin_policies", args=[tenant.slug]), "deadlines_form"
        ),
    }
    fields.update(data)
    return client.post(reverse("admin_deadlines", args=[tenant.slug]), fields)


def test_admin_sets_target_window_and_a_member_to_escalate_to(tenant_a, admin_a, member_of, client):
    lead = member_of(tenant_a, "approver").user
    client.force_login(admin_a.user)
    response = _post(
        client, tenant_a, sla_minutes="60", sla_warning_minutes="10", escalate_to=str(lead.pk)
    )
    assert response.status_code == 302
    tenant = Tenant.objects.get(pk=tenant_a.pk)
    assert (tenant.sla_minutes, tenant.sla_warning_minutes, tenant.escalate_to_id) == (
        60,
        10,
        lead.pk,
    )
    assert AuditEvent.objects.filter(tenant=tenant_a, action="tenant.deadlines_changed").exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"sla_minutes": "0"}, "Give a positive number of minutes"),
        ({"sla_minutes": "-5"}, "Give a positive number of minutes"),
        ({"sla_minutes": "ten"}, "Give a whole number of minutes"),
        ({"sla_minutes": "30", "sla_warning_minutes": "30"}, "must be shorter than the target"),
        ({"escalate_to_role": "viewer"}, "not one of the available choices"),
    ],
    ids=str,
)
def test_bad_deadline_settings_are_refused_precisely(tenant_a, admin_a, client, data, message):
    client.force_login(admin_a.user)
    response = _post(client, tenant_a, **data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Tenant.objects.get(pk=tenant_a.pk).sla_minutes is None


def test_escalation_member_must_be_an_active_decider_of_this_tenant(
    tenant_a, tenant_b, admin_a, member_of, client
):
    client.force_login(admin_a.user)
    for person in (
        member_of(tenant_b, "admin").user,
        member_of(tenant_a, "approver", is_active=False).user,
        member_of(tenant_a, "viewer").user,
    ):
        response = _post(client, tenant_a, escalate_to=str(person.pk))
        assert response.status_code == 400
        assert "Choose an active admin or approver of this tenant." in response.content.decode()
    assert Tenant.objects.get(pk=tenant_a.pk).escalate_to_id is None


def test_member_and_role_together_are_refused(tenant_a, admin_a, member_of, client):
    lead = member_of(tenant_a, "approver").user
    client.force_login(admin_a.user)
    response = _post(client, tenant_a, escalate_to=str(lead.pk), escalate_to_role="admin")
    assert response.status_code == 400
    assert "not both" in response.content.decode()


def test_mailbox_target_and_auto_assign(tenant_a, admin_a, mailbox_a, client):
    client.force_login(admin_a.user)
    url = reverse("mailbox_assignment", args=[tenant_a.slug, mailbox_a.pk])
    page = reverse("mailbox_detail", args=[tenant_a.slug, mailbox_a.pk])
    shown = based_on(client, page, "assignment_form")
    assert client.post(url, {"sla_minutes": "0", "based_on": shown}).status_code == 400
    response = client.post(url, {"sla_minutes": "45", "auto_assign": "on", "based_on": shown})
    assert response.status_code == 302
    mailbox = Mailbox.objects.get(pk=mailbox_a.pk)
    assert (mailbox.sla_minutes, mailbox.auto_assign) == (45, True)
    client.post(url, {"sla_minutes": "", "based_on": based_on(client, page, "assignment_form")})
    mailbox.refresh_from_db()
    assert (mailbox.sla_minutes, mailbox.auto_assign) == (None, False)
    assert AuditEvent.objects.filter(action="mailbox.assignment_changed").count() == 2


def test_admin_marks_a_member_away_and_back(tenant_a, admin_a, member_of, client):
    member = member_of(tenant_a, "approver")
    client.force_login(admin_a.user)
    url = reverse("admin_member_away", args=[tenant_a.slug, member.pk])
    client.post(url, {"away": "1"})
    member.refresh_from_db()
    assert member.is_away
    client.post(url, {"away": "0"})
    member.refresh_from_db()
    assert not member.is_away


@pytest.mark.parametrize("value", ["", "yes", "\x00", "true", "0 ", None], ids=repr)
def test_an_away_value_other_than_1_or_0_is_refused_and_changes_nothing(
    tenant_a, admin_a, member_of, client, value
):
    """Found by an outside probe: any non-empty value, ``yes`` or ``\\x00`` as much as ``1``,
    marked the member away, and the page's own "present" button sent an empty one."""
    member = member_of(tenant_a, "approver")
    client.force_login(admin_a.user)
    url = reverse("admin_member_away", args=[tenant_a.slug, member.pk])

    answer = client.post(url, {} if value is None else {"away": value}, follow=True)

    member.refresh_from_db()
    assert not member.is_away
    assert not AuditEvent.objects.filter(action__in=["member.away", "member.back"]).exists()
    assert answer.status_code == 400
    assert "Choose away or present." in answer.content.decode()


@pytest.mark.parametrize("lapse", [{"is_active": False}, {"role": "viewer"}], ids=str)
def test_the_policies_page_says_when_the_named_target_can_no_longer_take_escalations(
    tenant_a, admin_a, member_of, client, lapse
):
    """Found by an outside probe: the member deactivated or made a viewer, the form offered only
    those who can decide and so showed "Nobody", while escalations went to no one."""
    lead = member_of(tenant_a, "approver", user__full_name="Lee \u202eLead").user
    Tenant.objects.filter(pk=tenant_a.pk).update(sla_minutes=60, escalate_to=lead)
    lead.memberships.filter(tenant=tenant_a).update(**lapse)
    client.force_login(admin_a.user)

    page = client.get(reverse("admin_policies", args=[tenant_a.slug])).content.decode()

    assert (
        '<p class="error" role="alert" data-escalation-lapsed><bdi>Lee \u202eLead</bdi>, named to '
        "take escalations, can no longer decide drafts: escalations go to the admins, "
        "round-robin, until you choose someone else.</p>"
    ) in page


def test_the_policies_page_says_nothing_while_the_named_target_can_decide(
    tenant_a, admin_a, member_of, client
):
    lead = member_of(tenant_a, "approver").user
    Tenant.objects.filter(pk=tenant_a.pk).update(sla_minutes=60, escalate_to=lead)
    client.force_login(admin_a.user)

    page = client.get(reverse("admin_policies", args=[tenant_a.slug])).content.decode()

    assert "data-escalation-lapsed" not in page
