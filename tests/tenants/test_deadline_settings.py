"""tenants.policies.tenant_update_deadlines and tenants.services.member_set_away, called
directly: the checks behind the console's forms."""

from __future__ import annotations

import pytest

from tenants import policies, services
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db


def _update(tenant, actor, **fields):
    values = {
        "sla_minutes": None,
        "sla_warning_minutes": None,
        "escalate_to_id": None,
        "escalate_to_role": "",
    }
    values.update(fields)
    return policies.tenant_update_deadlines(tenant=tenant, actor=actor, **values)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"sla_minutes": 0}, "invalid_minutes"),
        ({"sla_minutes": 60 * 24 * 14 + 1}, "invalid_minutes"),
        ({"sla_minutes": 10, "sla_warning_minutes": 10}, "warning_too_long"),
        ({"escalate_to_role": "viewer"}, "invalid_role"),
    ],
    ids=str,
)
def test_bad_values_are_refused(tenant_a, admin_a, fields, code):
    with pytest.raises(services.AdminError) as refused:
        _update(tenant_a, admin_a.user, **fields)
    assert refused.value.code == code
    assert not AuditEvent.objects.filter(action="tenant.deadlines_changed").exists()


def test_the_escalation_member_must_be_an_active_decider_here(
    tenant_a, tenant_b, admin_a, member_of
):
    cases = [
        (member_of(tenant_b, "admin").user, "not_member"),
        (member_of(tenant_a, "approver", is_active=False).user, "member_inactive"),
        (member_of(tenant_a, "viewer").user, "member_cannot_decide"),
    ]
    for person, code in cases:
        with pytest.raises(services.AdminError) as refused:
            _update(tenant_a, admin_a.user, escalate_to_id=person.pk)
        assert refused.value.code == code
    tenant_a.refresh_from_db()
    assert tenant_a.escalate_to_id is None


def test_member_and_role_at_once_is_refused(tenant_a, admin_a):
    with pytest.raises(services.AdminError) as refused:
        _update(tenant_a, admin_a.user, escalate_to_id=admin_a.user.pk, escalate_to_role="admin")
    assert refused.value.code == "two_rules"


def test_a_valid_rule_is_saved_and_audited_once(tenant_a, admin_a):
    _update(tenant_a, admin_a.user, sla_minutes=30, escalate_to_role="approver")
    _update(tenant_a, admin_a.user, sla_minutes=30, escalate_to_role="approver")
    tenant_a.refresh_from_db()
    assert (tenant_a.sla_minutes, tenant_a.escalate_to_role) == (30, "approver")
    assert AuditEvent.objects.filter(action="tenant.deadlines_changed").count() == 1


def test_only_an_admin_sets_someone_else_away(tenant_a, member_of):
    ana, ben = member_of(tenant_a, "approver"), member_of(tenant_a, "approver")
    with pytest.raises(services.AdminError):
        services.member_set_away(tenant=tenant_a, membership_id=ben.pk, away=True, actor=ana.user)
    ben.refresh_from_db()
    assert not ben.is_away
    services.member_set_away(tenant=tenant_a, membership_id=ana.pk, away=True, actor=ana.user)
    ana.refresh_from_db()
    assert ana.is_away


def test_away_for_another_tenants_member_is_not_found(tenant_a, tenant_b, admin_a, member_of):
    other = member_of(tenant_b, "approver")
    with pytest.raises(services.AdminError) as refused:
        services.member_set_away(
            tenant=tenant_a, membership_id=other.pk, away=True, actor=admin_a.user
        )
    assert refused.value.code == "not_found"
