"""The policies page, which carries three forms (policies, the organisation's own domains,
deadlines and escalation): each view that answers a refused form renders it through here, with
the other two as they are saved."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render

from console.forms import DeadlinesForm, OwnDomainsForm, PoliciesForm
from tenants import policies
from tenants.access import TenantRequest
from tenants.models import Membership


def _escalation_members(tenant) -> list[Membership]:
    return list(
        Membership.objects.select_related("user")
        .filter(
            tenant=tenant,
            is_active=True,
            user__is_active=True,
            role__in=policies.ESCALATION_ROLES,
        )
        .order_by("user__full_name", "user__email")
    )


def _lapsed_escalation_target(tenant):
    """The member the escalation rule names, when they can no longer take escalations (not an
    active admin or approver): the sweep passes them over for the admins, and the form, which
    offers only those who can, would otherwise show "Nobody" as if no one were named."""
    if tenant.escalate_to_id is None:
        return None
    able = Membership.objects.filter(
        tenant=tenant,
        user_id=tenant.escalate_to_id,
        is_active=True,
        user__is_active=True,
        role__in=policies.ESCALATION_ROLES,
    )
    return None if able.exists() else tenant.escalate_to


def deadlines_form(tenant, data=None) -> DeadlinesForm:
    initial = {
        "sla_minutes": tenant.sla_minutes,
        "sla_warning_minutes": tenant.sla_warning_minutes,
        "escalate_to": tenant.escalate_to_id,
        "escalate_to_role": tenant.escalate_to_role,
        "based_on": policies.deadlines_fingerprint(tenant),
    }
    return DeadlinesForm(data, initial=initial, members=_escalation_members(tenant))


def policies_page(
    request: TenantRequest,
    *,
    form=None,
    domains_form=None,
    deadlines=None,
    conflict: str = "",
    domains_conflict: str = "",
    deadlines_conflict: str = "",
    status=200,
) -> HttpResponse:
    """``conflict``, ``domains_conflict``, ``deadlines_conflict``: why a stale save of the
    policies, own-domains or deadlines form was refused, shown above that form, which then holds
    the values saved now."""
    tenant = request.tenant
    form = form or PoliciesForm(
        initial={
            "review_deadline_hours": tenant.review_deadline_hours,
            "second_approver_on_edit": tenant.second_approver_on_edit,
            "retention_days": tenant.retention_days,
            "send_hold_seconds": tenant.send_hold_seconds,
            "based_on": policies.policies_fingerprint(tenant),
        }
    )
    domains_form = domains_form or OwnDomainsForm(
        initial={
            "own_domains": "\n".join(tenant.own_domains),
            "based_on": policies.own_domains_fingerprint(tenant),
        }
    )
    return render(
        request,
        "console/policies.html",
        {
            "form": form,
            "domains_form": domains_form,
            "deadlines_form": deadlines or deadlines_form(tenant),
            "conflict": conflict,
            "domains_conflict": domains_conflict,
            "deadlines_conflict": deadlines_conflict,
            "lapsed_escalation_target": _lapsed_escalation_target(tenant),
        },
        status=status,
    )
