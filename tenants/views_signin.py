"""A person's own sign-in pages: the second-factor step of signing in, the security page
(authenticator app, recovery codes, passkeys), their password and the list of their sessions.

Nothing here is tenant-scoped: these belong to the person. The sign-in gate
(tenants.signin_gate) lets a session that owes a factor reach only the verify step, and a person
who must enrol only the security page.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from functools import wraps
from io import BytesIO
from typing import cast

import segno
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout, update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from tenants import passwords, signin_alerts, sudo, two_factor, user_sessions
from tenants.access import AuthenticatedRequest
from tenants.forms import PasswordChangeForm
from tenants.models import Passkey, TotpDevice
from tenants.next_url import safe_next_url
from tenants.signin_gate import gate_for, operator_owes_enrolment


def _next_url(request: HttpRequest) -> str:
    return safe_next_url(request, request.POST.get("next") or request.GET.get("next"))


def session_ended_signed_out(request: HttpRequest, message: str) -> HttpResponse:
    """The answer to a change refused because this session was ended while the request was on
    its way (a reset of the person's factors, a password change, an end from another browser;
    ``user_sessions.session_still_open``): this browser is signed out too, and told why."""
    logout(request)
    messages.error(request, message)
    return redirect("login")


def signed_in_after_renewal(
    message: Callable[[], str], back: Callable[[HttpRequest], str]
) -> Callable:
    """``login_required`` for a sign-in step whose success renews the session key
    (``user_sessions.session_factor_proven``), with a word for a form posted on the old key.

    A second click sent before the first click's answer arrived (a double click, a slow
    network) carries the old cookie, whose session the renewal deleted: that browser is signed
    out, and must be (a planted copy of the old cookie is worth nothing; that is what the
    renewal is for). ``login_required`` sent it to the sign-in page without a word, and the
    person, who had just signed in or turned two-factor on, was asked for their password again
    as if nothing had happened. A post with a session cookie that names no session is told why,
    and comes back to ``back(request)`` afterwards (not to this address, which answers a form).
    """

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        required = login_required(view)

        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if (
                request.user.is_authenticated
                or request.method != "POST"
                or not request.COOKIES.get(settings.SESSION_COOKIE_NAME)
            ):
                return required(request, *args, **kwargs)
            messages.warning(request, message())
            return redirect_to_login(back(request))

        return wrapper

    return decorator


def _verify_arrived_late() -> str:
    return _(
        "This code arrived after your session had moved on (a second click on “Verify”, or a "
        "session that ended), so this browser is signed out. Sign in again."
    )


def _turn_on_arrived_late() -> str:
    return _(
        "This form arrived after your session had moved on (a second click on “Turn on "
        "two-factor sign-in”, or a session that ended), so this browser is signed out. Sign in "
        "again. If two-factor sign-in is on and you did not see your recovery codes, make new "
        "ones on the Security page."
    )


def _security_page(request: HttpRequest) -> str:
    return reverse("account_security")


@signed_in_after_renewal(_verify_arrived_late, _next_url)
@require_http_methods(["GET", "HEAD", "POST"])
def two_factor_verify(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if gate_for(request) != "verify":
        return HttpResponseRedirect(_next_url(request))
    next_url = _next_url(request)
    context = {
        "next": next_url,
        "has_totp": TotpDevice.objects.filter(user=request.user, confirmed=True).exists(),
        "has_passkey": Passkey.objects.filter(user=request.user).exists(),
    }
    if request.method in ("GET", "HEAD"):
        return render(request, "tenants/two_factor_verify.html", context)
    try:
        factor = two_factor.second_factor_verify(
            user=request.user, code=request.POST.get("code", ""), request=request
        )
    except two_factor.TwoFactorError as error:
        # This session owes its factor (the gate above): it proved the password.
        signin_alerts.second_step_failure_recorded(user=request.user, request=request)
        context["error"] = error.message
        return render(request, "tenants/two_factor_verify.html", context, status=400)
    user_sessions.session_factor_proven(request, factor)
    if notice := signin_alerts.second_step_failures_told(user=request.user, request=request):
        messages.warning(request, notice)
    if factor == "recovery_code":
        left = two_factor.recovery_codes_left(request.user)
        messages.warning(
            request,
            ngettext(
                "You signed in with a recovery code; %(left)d is left. Make new ones soon.",
                "You signed in with a recovery code; %(left)d are left. Make new ones if you are low.",
                left,
            )
            % {"left": left},
        )
    return HttpResponseRedirect(next_url)


def _security_context(request: AuthenticatedRequest) -> dict:
    device = TotpDevice.objects.filter(user=request.user).first()
    has_factor, required = two_factor.factor_state(request.user)
    return {
        "device": device,
        "recovery_left": two_factor.recovery_codes_left(request.user),
        "passkeys": list(Passkey.objects.filter(user=request.user).order_by("created_at")),
        "required": required,
        "has_factor": has_factor,
        "operator_required": operator_owes_enrolment(request),
    }


@login_required
@require_safe
def account_security(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    return render(request, "tenants/account_security.html", _security_context(request))


def _qr_data_uri(uri: str) -> str:
    buffer = BytesIO()
    segno.make(uri, error="m").save(buffer, kind="svg", scale=5, border=2)
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode()


def _enrol_page(request: AuthenticatedRequest, device: TotpDevice, error: str = "", status=200):
    uri = two_factor.totp_uri(device, request.user)
    return render(
        request,
        "tenants/totp_enrol.html",
        {
            "secret": two_factor.totp_secret(device),
            "setup": device.pk,
            "qr": _qr_data_uri(uri),
            "error": error,
        },
        status=status,
    )


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def totp_enrol(http_request: HttpRequest) -> HttpResponse:
    """POST starts a set-up (a new seed); GET shows the one in progress."""
    request = cast(AuthenticatedRequest, http_request)
    if _came_through_sso(request):
        return redirect("account_security")
    if held := sudo.confirm_first(request, back="account_security"):
        return held
    if request.method == "POST":
        try:
            device = two_factor.totp_begin(user=request.user, request=request)
        except two_factor.TwoFactorError as error:
            if error.code == user_sessions.SESSION_ENDED:
                return session_ended_signed_out(request, error.message)
            messages.error(request, error.message)
            return redirect("account_security")
        return _enrol_page(request, device)
    pending = TotpDevice.objects.filter(user=request.user, confirmed=False).first()
    if pending is None:
        return redirect("account_security")
    return _enrol_page(request, pending)


@signed_in_after_renewal(_turn_on_arrived_late, _security_page)
@require_POST
def totp_confirm(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if _came_through_sso(request):
        return redirect("account_security")
    if held := sudo.confirm_first(request, back="totp_enrol"):
        return held
    setup = request.POST.get("setup", "")
    try:
        codes = two_factor.totp_confirm(
            user=request.user,
            code=request.POST.get("code", ""),
            request=request,
            device_id=int(setup) if setup.isascii() and setup.isdigit() else None,
        )
    except two_factor.TwoFactorError as error:
        if error.code == user_sessions.SESSION_ENDED:
            return session_ended_signed_out(request, error.message)
        if error.code == "already_on":
            # The browser shows this answer, not the first one, which had the recovery codes.
            return render(request, "tenants/totp_already_on.html", status=409)
        pending = TotpDevice.objects.filter(user=request.user, confirmed=False).first()
        if pending is None:
            messages.error(request, error.message)
            return redirect("account_security")
        return _enrol_page(request, pending, error.message, status=400)
    # The person just proved the factor: this session counts as signed in with it.
    user_sessions.session_factor_proven(request, "totp")
    return render(request, "tenants/recovery_codes.html", {"codes": codes, "new_device": True})


def _came_through_sso(request: HttpRequest) -> bool:
    """A session from a tenant's identity provider does not change the person's own factors:
    that provider is run by one tenant's admin, who could assert any address in the domains they
    listed, and these factors guard every tenant."""
    if request.session.get(user_sessions.METHOD_KEY) != "sso":
        return False
    messages.error(request, _("Sign in with your password to change your second factors."))
    return True


def _sessions_need_password() -> str:
    return _("Sign in with your password to see and end your other sessions.")


@login_required
@require_POST
def recovery_codes_renew(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if _came_through_sso(request):
        return redirect("account_security")
    if held := sudo.confirm_first(request, back="account_security"):
        return held
    try:
        codes = two_factor.recovery_codes_regenerate(user=request.user, request=request)
    except two_factor.TwoFactorError as error:
        if error.code == user_sessions.SESSION_ENDED:
            return session_ended_signed_out(request, error.message)
        messages.error(request, error.message)
        return redirect("account_security")
    return render(request, "tenants/recovery_codes.html", {"codes": codes, "new_device": False})


@login_required
@require_POST
def two_factor_remove(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if _came_through_sso(request):
        return redirect("account_security")
    if held := sudo.confirm_first(request, back="account_security"):
        return held
    try:
        two_factor.two_factor_remove(user=request.user, actor=request.user, request=request)
    except two_factor.TwoFactorError as error:
        return session_ended_signed_out(request, error.message)
    request.session.pop(user_sessions.FACTOR_KEY, None)
    messages.success(
        request, _("Two-factor sign-in is off; your authenticator and passkeys are removed.")
    )
    return redirect("account_security")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def password_change(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if request.session.get(user_sessions.METHOD_KEY) == "sso":
        # The password opens every tenant of the person; a tenant's provider speaks for its own.
        messages.error(request, _("Sign in with your password to change it."))
        return redirect("account_security")
    form = PasswordChangeForm(
        request.user, request.POST if request.method == "POST" else None, request=request
    )
    if request.method == "POST" and form.is_valid():
        kept = request.session.session_key
        ended = passwords.password_change(
            user=request.user,
            password=form.cleaned_data["new_password1"],
            keep_session_key=kept,
            request=request,
        )
        # This session stays signed in (under a new key); the others ended above.
        update_session_auth_hash(request, request.user)
        user_sessions.session_key_renew(request, old_key=kept)
        # The current password was just proven (tenants.sudo).
        user_sessions.session_proof_recorded(request)
        messages.success(
            request,
            ngettext(
                "Your password is changed. %(ended)d other session was signed out.",
                "Your password is changed. %(ended)d other sessions were signed out.",
                ended,
            )
            % {"ended": ended},
        )
        return redirect("sessions")
    status = 400 if request.method == "POST" else 200
    return render(request, "tenants/password_change.html", {"form": form}, status=status)


@login_required
@require_safe
def sessions(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if user_sessions.sso_session_beyond_its_tenants(request):
        messages.error(request, _sessions_need_password())
        return redirect("account_security")
    return render(
        request,
        "tenants/sessions.html",
        {
            "sessions": user_sessions.sessions_of(request.user),
            "current_key": request.session.session_key,
        },
    )


@login_required
@require_POST
def session_end(http_request: HttpRequest, session_id: int) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if user_sessions.sso_session_beyond_its_tenants(request):
        messages.error(request, _sessions_need_password())
        return redirect("account_security")
    if held := sudo.confirm_first(request, back="sessions"):
        return held
    try:
        user_sessions.session_end(
            user=request.user,
            session_id=session_id,
            current_key=request.session.session_key,
            request=request,
        )
    except user_sessions.SessionError as error:
        if error.code == "not_found":
            return render(request, "404.html", {"exception": _("No such session.")}, status=404)
        messages.error(request, _("This is the session you are using: sign out instead."))
        return redirect("sessions")
    messages.success(request, _("That session is signed out."))
    return redirect("sessions")
