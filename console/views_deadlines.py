"""The deadline (SLA) and escalation settings of a tenant (on the policies page) and the
"away" flag an admin sets for a member."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.forms import DeadlinesForm, PoliciesForm
from tenants import services
from tenants.access import ADMIN_ONLY, TenantRequest, tenant_view
from tenants.models import Membership


def _refuse(form, error: services.AdminError) -> None:
    form.add_error(error.field if error.field in form.fields else None, error.message)


def _escalation_members(tenant) -> list[Membership]:
    return list(
        Membership.objects.select_related("user")
        .filter(
            tenant=tenant,
            is_active=True,
            user__is_active=True,
            role__in=services.ESCALATION_ROLES,
        )
        .order_by("user__full_name", "user__email")
    )


def deadlines_form(tenant, data=None) -> DeadlinesForm:
    initial = {
        "sla_minutes": tenant.sla_minutes,
        "sla_warning_minutes": tenant.sla_warning_minutes,
        "escalate_to": tenant.escalate_to_id,
        "escalate_to_role": tenant.escalate_to_role,
    }
    return DeadlinesForm(data, initial=initial, members=_escalation_members(tenant))


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def deadlines(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    form = deadlines_form(tenant, request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            services.tenant_update_deadlines(
                tenant=tenant,
                sla_minutes=data["sla_minutes"],
                sla_warning_minutes=data["sla_warning_minutes"],
                escalate_to_id=data["escalate_to"],
                escalate_to_role=data["escalate_to_role"],
                actor=request.user,
            )
        except services.AdminError as error:
            _refuse(form, error)
        else:
            messages.success(request, _("Deadlines and escalation saved."))
            return redirect("admin_policies", tenant.slug)
    policies_form = PoliciesForm(
        initial={
            "review_deadline_hours": tenant.review_deadline_hours,
            "second_approver_on_edit": tenant.second_approver_on_edit,
            "retention_days": tenant.retention_days,
        }
    )
    return render(
        request,
        "console/policies.html",
        {"form": policies_form, "deadlines_form": form},
        status=400,
    )


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def member_away(request: TenantRequest, membership_id: int) -> HttpResponse:
    away = bool(request.POST.get("away"))
    try:
        membership = services.member_set_away(
            tenant=request.tenant, membership_id=membership_id, away=away, actor=request.user
        )
    except services.AdminError as error:
        if error.code == "not_found":
            raise Http404(error.message) from None
        messages.error(request, error.message)
        return redirect("admin_members", request.tenant.slug)
    name = membership.user.display_name
    if away:
        messages.success(request, _("%(name)s is marked away.") % {"name": name})
    else:
        messages.success(request, _("%(name)s is back.") % {"name": name})
    return redirect("admin_member", request.tenant.slug, membership.pk)
