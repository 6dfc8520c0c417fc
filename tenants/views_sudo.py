"""The "Confirm it is you" page (tenants.sudo): the password, a code from the authenticator app or
a recovery code, a passkey (static/js/passkeys.js, through the passkey sign-in endpoints), or for
a session from single sign-on, that provider's sign-in again. Then back to ``next``."""

from __future__ import annotations

from typing import cast
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.http import require_http_methods

from tenants import sudo
from tenants.access import AuthenticatedRequest
from tenants.models import Passkey, SingleSignOn, TotpDevice
from tenants.next_url import safe_next_url
from tenants.user_sessions import METHOD_KEY, sso_tenants_trusted


def _context(request: AuthenticatedRequest, next_url: str) -> dict:
    providers = []
    if request.session.get(METHOD_KEY) == "sso":
        # Only the providers this session came through: another tenant's would speak for a
        # session it never opened. For a tenant's page, only that tenant's: another's word is
        # no proof there (tenants.sudo.proof_is_recent).
        found = SingleSignOn.objects.select_related("tenant").filter(
            tenant_id__in=sso_tenants_trusted(request)
        )
        if slug := _tenant_slug(next_url):
            found = found.filter(tenant__slug=slug)
        providers = [
            {
                "tenant": sso.tenant,
                "url": f"{reverse('sso_start', args=[sso.tenant.slug])}?"
                + urlencode({"next": next_url}),
            }
            for sso in found.order_by("tenant__name")
        ]
    return {
        "next": next_url,
        "minutes": settings.SUDO_SECONDS // 60,
        "has_password": request.user.has_usable_password(),
        "has_totp": TotpDevice.objects.filter(user=request.user, confirmed=True).exists(),
        "has_passkey": Passkey.objects.filter(user=request.user).exists(),
        "providers": providers,
    }


def _tenant_slug(next_url: str) -> str | None:
    """The tenant whose page ``next_url`` (a URL of this site) is, or None."""
    try:
        match = resolve(urlsplit(next_url).path)
    except Resolver404:
        return None
    slug = match.kwargs.get("slug")
    return slug if isinstance(slug, str) else None


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def account_confirm(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    next_url = safe_next_url(
        request,
        request.POST.get("next") or request.GET.get("next"),
        fallback=reverse("account_security"),
    )
    if request.method != "POST":
        return render(request, "tenants/account_confirm.html", _context(request, next_url))
    try:
        if "code" in request.POST:
            sudo.sudo_confirm_code(request=request, user=request.user, code=request.POST["code"])
        else:
            sudo.sudo_confirm_password(
                request=request, user=request.user, password=request.POST.get("password", "")
            )
    except sudo.ConfirmError as error:
        context = _context(request, next_url)
        context["password_error" if "code" not in request.POST else "code_error"] = error.message
        return render(request, "tenants/account_confirm.html", context, status=400)
    return HttpResponseRedirect(next_url)
