"""The deadline (SLA) and escalation settings of a tenant (on the policies page)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.policies_page import deadlines_form, policies_page
from tenants import policies, services
from tenants.access import ADMIN_ONLY, TenantRequest, tenant_view
from tenants.stale import StaleSave


def _refuse(form, error: services.AdminError) -> None:
    form.add_error(error.field if error.field in form.fields else None, error.message)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def deadlines(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    form = deadlines_form(tenant, request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            policies.tenant_update_deadlines(
                tenant=tenant,
                sla_minutes=data["sla_minutes"],
                sla_warning_minutes=data["sla_warning_minutes"],
                escalate_to_id=data["escalate_to"],
                escalate_to_role=data["escalate_to_role"],
                actor=request.user,
                based_on=data["based_on"],
            )
        except StaleSave as conflict:
            tenant.refresh_from_db()
            return policies_page(request, deadlines_conflict=conflict.message, status=409)
        except services.AdminError as error:
            _refuse(form, error)
        else:
            messages.success(request, _("Deadlines and escalation saved."))
            return redirect("admin_policies", tenant.slug)
    return policies_page(request, deadlines=form, status=400)
