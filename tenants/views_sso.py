"""Single sign-on pages: choose the tenant, go to its identity provider, come back.

The session keeps one flow at a time (state, nonce, PKCE verifier, tenant); the callback accepts
only that state, once. Network calls happen here, outside any transaction; the database work is
tenants.oidc_signin's.
"""

from __future__ import annotations

import time

from django.contrib.auth import login, logout
from django.core.validators import slug_re
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from common.crypto import SecretUnreadable
from common.text import unseen_shown
from tenants import oidc, oidc_signin
from tenants.models import SingleSignOn, User
from tenants.next_url import safe_next_url
from tenants.signin_audit import signin_audit
from tenants.signin_gate import gate_for
from tenants.user_sessions import (
    FACTOR_KEY,
    METHOD_KEY,
    SSO_ISSUERS_KEY,
    SSO_TENANTS_KEY,
    came_through_provider,
    session_key_renew,
    session_proof_recorded,
)

FLOW_KEY = "cs_sso_flow"


def _redirect_uri(request: HttpRequest) -> str:
    return request.build_absolute_uri(reverse("sso_callback"))


def _refused(request: HttpRequest, message: str, status: int = 403) -> HttpResponse:
    return render(request, "tenants/sso_error.html", {"message": message}, status=status)


@require_safe
def sso_choose(request: HttpRequest) -> HttpResponse:
    """The sign-in page's "single sign-on" link: which tenant (its address in Countersign)."""
    slug = request.GET.get("tenant", "").strip().lower()
    if not slug:
        return render(request, "tenants/sso_choose.html", {})
    # A slug is letters, digits, - and _: anything else (a NUL, which PostgreSQL refuses in a
    # query) names no tenant.
    sso = (
        SingleSignOn.objects.select_related("tenant")
        .filter(tenant__slug=slug, enabled=True)
        .first()
        if slug_re.fullmatch(slug)
        else None
    )
    if sso is None:
        return render(
            request,
            "tenants/sso_choose.html",
            {"error": _("No tenant with that address uses single sign-on."), "slug": slug},
            status=404,
        )
    # A link, not a redirect: the page's CSP (form-action 'self') rightly stops a form from
    # being redirected to another origin, and the provider is another origin.
    return render(request, "tenants/sso_choose.html", {"chosen": sso.tenant, "slug": slug})


@require_safe
def sso_start(request: HttpRequest, slug: str) -> HttpResponse:
    sso = get_object_or_404(
        SingleSignOn.objects.select_related("tenant"), tenant__slug=slug, enabled=True
    )
    try:
        provider = oidc.discover(sso.issuer)
    except oidc.OidcError as error:
        return _refused(request, error.message, status=502)
    flow = oidc.new_flow()
    target = safe_next_url(request, request.GET.get("next"), fallback="")
    # A session the provider opened, signing in again: the "Confirm it is you" page's link
    # (tenants.sudo). The provider is asked for a new sign-in, and the token must say it was one.
    again = request.user.is_authenticated and request.session.get(METHOD_KEY) == "sso"
    request.session[FLOW_KEY] = {
        "state": flow.state,
        "nonce": flow.nonce,
        "verifier": flow.code_verifier,
        "tenant": sso.tenant_id,
        "next": target,
        "again_since": time.time() if again else None,
    }
    return redirect(
        oidc.authorization_url(
            provider,
            client_id=sso.client_id,
            redirect_uri=_redirect_uri(request),
            flow=flow,
            again=again,
        )
    )


def _claims(request: HttpRequest, sso: SingleSignOn, pending: dict) -> dict:
    flow = oidc.Flow(
        state=pending["state"], nonce=pending["nonce"], code_verifier=pending["verifier"]
    )
    provider = oidc.discover(sso.issuer)
    try:
        secret = oidc_signin.client_secret(sso)
    except SecretUnreadable:
        raise oidc.OidcError(
            "secret_unreadable", _("The client secret cannot be read; enter it again.")
        ) from None
    id_token = oidc.exchange_code(
        provider,
        client_id=sso.client_id,
        client_secret=secret,
        code=request.GET.get("code", ""),
        redirect_uri=_redirect_uri(request),
        flow=flow,
    )
    return oidc.verify_id_token(
        id_token,
        jwks=oidc.fetch_jwks(provider),
        issuer=sso.issuer,
        client_id=sso.client_id,
        nonce=flow.nonce,
    )


def _session_signed_in(
    request: HttpRequest, user: User, sso: SingleSignOn, claims: dict, pending: dict
) -> None:
    """The session after the provider vouched for ``user``: signed in anew, or kept (and opening
    ``sso``'s tenant too); a fresh sign-in at the provider asked for by "Confirm it is you" is a
    proof. The provider's issuer is recorded with the tenant: the tenant stays open to this
    session only while its single sign-on names that issuer (tenants.access)."""
    tenant = sso.tenant
    stayed = request.user.is_authenticated and gate_for(request) is None
    came_through_before = came_through_provider(request, tenant.pk, sso.issuer)
    if not stayed:
        # A new sign-in, also for a session of this person that still owes its second factor:
        # the provider's word counts for its own tenant only, so it must not complete a password
        # sign-in that would open the person's other tenants (an admin who runs this provider
        # and knows the password would be past the person's second factor everywhere).
        if request.user.is_authenticated:
            logout(request)
        request.signin_method = "sso"  # type: ignore[attr-defined]
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        request.session[METHOD_KEY] = "sso"
        request.session[FACTOR_KEY] = "sso"
        # The sign-in's proof (login()) is this provider's word: not for another tenant's pages.
        session_proof_recorded(request, through_tenant_id=tenant.pk)
    elif not came_through_before:
        # The session stays, and now opens this tenant too: a new key, so that a copy of the
        # cookie planted in this browser (a session another tenant's provider opened as this
        # person) or read from it does not open it as well.
        session_key_renew(request)
    request.session[SSO_TENANTS_KEY] = sorted(
        {*request.session.get(SSO_TENANTS_KEY, []), tenant.pk}
    )
    issuers = request.session.get(SSO_ISSUERS_KEY)
    request.session[SSO_ISSUERS_KEY] = {
        **(issuers if isinstance(issuers, dict) else {}),
        str(tenant.pk): sso.issuer,
    }
    again_since = pending.get("again_since")
    if (
        stayed
        and again_since is not None
        and request.session.get(METHOD_KEY) == "sso"
        and came_through_before
        and oidc.signed_in_since(claims, again_since)
    ):
        # The provider signed the person in again, just now: a proof for a session it opened
        # (tenants.sudo). A password session does not take its word; a new sign-in is a proof
        # of its own (login()). Nor does a provider this session did not come through: that
        # other tenant's admin runs it and can sign the person in there at will, and with a
        # stolen cookie of this session would otherwise get a proof for the tenants it opened.
        # Nor, for the same reason, is it a proof in the session's other tenants, whose
        # providers it also came through (tenants.sudo).
        session_proof_recorded(request, through_tenant_id=tenant.pk)


@require_safe
def sso_callback(request: HttpRequest) -> HttpResponse:
    pending = request.session.pop(FLOW_KEY, None)
    state = request.GET.get("state", "")
    if not pending or not state or state != pending.get("state"):
        return _refused(
            request, _("This sign-in link is not the one we started; start again."), 400
        )
    sso = (
        SingleSignOn.objects.select_related("tenant")
        .filter(tenant_id=pending["tenant"], enabled=True)
        .first()
    )
    if sso is None:
        return _refused(request, _("Single sign-on is off for this tenant."), 404)
    tenant = sso.tenant
    if "error" in request.GET or not request.GET.get("code"):
        return _refused(request, _("The identity provider did not sign you in."))
    claims: dict = {}
    try:
        claims = _claims(request, sso, pending)
        user = oidc_signin.sso_member_for(tenant=tenant, claims=claims, request=request)
    except (oidc.OidcError, oidc_signin.SsoRefused) as error:
        # The address is the provider's claim (from a verified token only), for the admin's eyes.
        signin_audit(
            action="signin.sso_refused",
            user=None,
            tenant=tenant,
            request=request,
            # Its unseen characters as code points: what the provider sent, readable and
            # storable (a NUL in it is neither).
            data={"reason": error.code, "email": unseen_shown(str(claims.get("email", "")))[:254]},
        )
        return _refused(request, error.message)
    if request.user.is_authenticated and request.user.pk != user.pk:
        # Not a silent switch of person: a link to another tenant's sign-in (whose admin runs
        # its provider) would otherwise sign this browser into an account of theirs.
        return _refused(
            request,
            _(
                "You are signed in as %(email)s and the identity provider signed in someone "
                "else: sign out first, then sign in again."
            )
            % {"email": request.user.email},
            409,
        )
    _session_signed_in(request, user, sso, claims, pending)
    signin_audit(
        action="signin.succeeded",
        user=user,
        tenant=tenant,
        request=request,
        data={"method": "sso", "issuer": sso.issuer},
    )
    # Checked again: a flow kept in a session from before the rule was tightened.
    return HttpResponseRedirect(
        safe_next_url(
            request,
            pending.get("next"),
            fallback=reverse("tenant_home", args=[tenant.slug]),
        )
    )
