"""The tenant's sign-in settings under /t/<slug>/admin/sign-in/: two-factor requirement and
single sign-on. Admins only; the rules live in tenants.signin_policy and tenants.oidc_config."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from console.forms_signin import SsoForm, TwoFactorPolicyForm
from tenants import oidc_signin, signin_policy, sudo
from tenants.access import ADMIN_ONLY, TenantRequest, tenant_view
from tenants.models import Membership, Passkey, SingleSignOn, TotpDevice
from tenants.services import AdminError
from tenants.stale import StaleSave
from tenants.user_sessions import came_through_provider


def _members_without_factor(request: TenantRequest) -> int:
    return (
        Membership.objects.filter(tenant=request.tenant, is_active=True)
        .exclude(user__in=TotpDevice.objects.filter(confirmed=True).values("user"))
        .exclude(user__in=Passkey.objects.values("user"))
        .count()
    )


def _sso_form(sso: SingleSignOn | None) -> SsoForm:
    if sso is None:
        return SsoForm(
            initial={
                "password_signin_allowed": True,
                "based_on": oidc_signin.sso_fingerprint(None),
            }
        )
    return SsoForm(
        initial={
            "enabled": sso.enabled,
            "issuer": sso.issuer,
            "client_id": sso.client_id,
            "password_signin_allowed": sso.password_signin_allowed,
            "domains": ", ".join(sso.jit_domains),
            "jit_role": sso.jit_role,
            "based_on": oidc_signin.sso_fingerprint(sso),
        }
    )


def _page(
    request: TenantRequest,
    *,
    two_factor_form=None,
    two_factor_conflict: str = "",
    sso_form=None,
    sso_conflict: str = "",
    status=200,
) -> HttpResponse:
    """``two_factor_conflict``, ``sso_conflict``: why a stale save of that form was refused,
    shown above it; the form then holds the settings saved now."""
    tenant = request.tenant
    sso = SingleSignOn.objects.filter(tenant=tenant).first()
    return render(
        request,
        "console/signin.html",
        {
            "two_factor_form": two_factor_form
            or TwoFactorPolicyForm(
                initial={
                    "require_two_factor": tenant.require_two_factor,
                    "based_on": signin_policy.two_factor_fingerprint(tenant),
                }
            ),
            "two_factor_conflict": two_factor_conflict,
            "without_factor": _members_without_factor(request),
            "sso": sso,
            "sso_form": sso_form or _sso_form(sso),
            "sso_conflict": sso_conflict,
            "redirect_uri": request.build_absolute_uri(reverse("sso_callback")),
            "start_url": request.build_absolute_uri(reverse("sso_start", args=[tenant.slug])),
        },
        status=status,
    )


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def sso_settings(request: TenantRequest) -> HttpResponse:
    # Who may sign in to this tenant, and through whose provider (tenants.sudo).
    if held := sudo.confirm_first(request, back="admin_signin", args=[request.tenant.slug]):
        return held
    form = SsoForm(request.POST)
    if not form.is_valid():
        return _page(request, sso_form=form, status=400)
    # Through the provider being saved: one save could otherwise name a new issuer, never tried,
    # and turn password sign-in off on the word of the provider it replaces.
    proven = came_through_provider(request, request.tenant.pk, form.cleaned_data["issuer"])
    if (
        form.cleaned_data["enabled"]
        and not form.cleaned_data["password_signin_allowed"]
        and not proven
    ):
        # Otherwise a wrong issuer or secret would lock every member out, this admin included.
        form.add_error(
            "password_signin_allowed",
            _(
                "Sign in through single sign-on once first (save with password sign-in allowed, "
                "then use the sign-in link above), so you know it works; then turn this off."
            ),
        )
        return _page(request, sso_form=form, status=400)
    try:
        oidc_signin.sso_settings_save(
            tenant=request.tenant, actor=request.user, **form.cleaned_data
        )
    except StaleSave as conflict:
        return _page(request, sso_conflict=conflict.message, status=409)
    except AdminError as error:
        form.add_error(error.field if error.field in form.fields else None, error.message)
        return _page(request, sso_form=form, status=400)
    messages.success(request, _("Single sign-on settings saved."))
    return redirect("admin_signin", request.tenant.slug)


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def signin_settings(request: TenantRequest) -> HttpResponse:
    return _page(request)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def two_factor_policy(request: TenantRequest) -> HttpResponse:
    form = TwoFactorPolicyForm(request.POST)
    if not form.is_valid():
        return _page(request, two_factor_form=form, status=400)
    required = form.cleaned_data["require_two_factor"]
    # Off, a password alone opens every member's account again (tenants.sudo).
    if (
        not required
        and request.tenant.require_two_factor
        and (held := sudo.confirm_first(request, back="admin_signin", args=[request.tenant.slug]))
    ):
        return held
    try:
        signin_policy.tenant_require_two_factor(
            tenant=request.tenant,
            required=required,
            actor=request.user,
            based_on=form.cleaned_data["based_on"],
        )
    except StaleSave as conflict:
        # request.tenant was read before the other admin's save: the page reads it again.
        request.tenant.refresh_from_db(fields=["require_two_factor"])
        return _page(request, two_factor_conflict=conflict.message, status=409)
    if required:
        messages.success(
            request, _("Two-factor sign-in is required: members without it must set it up now.")
        )
    else:
        messages.success(request, _("Two-factor sign-in is optional for this tenant."))
    return redirect("admin_signin", request.tenant.slug)


@tenant_view(roles=ADMIN_ONLY)
@require_POST
def member_two_factor_reset(request: TenantRequest, membership_id: int) -> HttpResponse:
    # Leaves the member's account behind a password alone (tenants.sudo).
    if held := sudo.confirm_first(
        request, back="admin_member", args=[request.tenant.slug, membership_id]
    ):
        return held
    try:
        membership = signin_policy.member_reset_two_factor(
            tenant=request.tenant, membership_id=membership_id, actor=request.user
        )
    except AdminError as error:
        if error.code == "not_found":
            raise Http404("No such member") from None
        messages.error(request, error.message)
        return redirect("admin_member", request.tenant.slug, membership_id)
    messages.success(
        request,
        _("%(email)s's second factors are removed and their sessions ended.")
        % {"email": membership.user.email},
    )
    return redirect("admin_member", request.tenant.slug, membership.pk)
