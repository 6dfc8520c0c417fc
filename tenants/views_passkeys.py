"""Passkey endpoints (JSON, called by static/js/passkeys.js) and removing a passkey.

Registering needs a signed-in person (the sign-in gate lets one who must enrol reach it). Signing
in works signed out (a passkey on its own) or as the second-factor step after a password.
"""

from __future__ import annotations

from typing import cast

from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from tenants import passkeys, signin_alerts, sudo
from tenants.access import AuthenticatedRequest
from tenants.models import User
from tenants.next_url import safe_next_url
from tenants.signin_audit import signin_audit
from tenants.user_sessions import FACTOR_KEY, METHOD_KEY, SESSION_ENDED, session_factor_proven
from tenants.views_signin import session_ended_signed_out


def _json_options(body: str) -> HttpResponse:
    return HttpResponse(body, content_type="application/json")


def _refused(error: passkeys.PasskeyError, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": error.code, "message": error.message}, status=status)


@login_required
@require_POST
def register_options(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if held := sudo.confirm_first(request, back="account_security", json=True):
        return held
    return _json_options(passkeys.registration_options(request, request.user))


@login_required
@require_POST
def register(http_request: HttpRequest) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if request.session.get(METHOD_KEY) == "sso":
        return JsonResponse(
            {"error": "sso", "message": _("Sign in with your password to add a passkey.")},
            status=403,
        )
    if held := sudo.confirm_first(request, back="account_security", json=True):
        return held
    try:
        credential, name = passkeys.parse_credential(request.body)
        passkeys.passkey_register(
            request=request, user=request.user, credential=credential, name=name
        )
    except passkeys.PasskeyError as error:
        if error.code == SESSION_ENDED:
            # This session was ended while the request was on its way: this browser is signed
            # out too, and the page's script follows the redirect to the sign-in.
            logout(request)
            messages.error(request, error.message)
            return JsonResponse(
                {"error": error.code, "message": error.message, "redirect": reverse("login")},
                status=401,
            )
        return _refused(error)
    # Registering with user verification proves the passkey: this session counts as verified.
    session_factor_proven(request, "passkey")
    messages.success(request, _("Passkey added."))
    return JsonResponse({"redirect": "/account/security/"})


def _pending_user(request: HttpRequest) -> User | None:
    return request.user if request.user.is_authenticated else None


@require_POST
def signin_options(request: HttpRequest) -> HttpResponse:
    return _json_options(passkeys.authentication_options(request, _pending_user(request)))


@require_POST
def signin(request: HttpRequest) -> HttpResponse:
    pending = _pending_user(request)
    try:
        credential, _name = passkeys.parse_credential(request.body)
        user = passkeys.passkey_authenticate(request=request, credential=credential, user=pending)
    except passkeys.PasskeyError as error:
        signin_audit(
            action="signin.passkey_failed",
            user=pending,
            request=request,
            data={"reason": error.code},
        )
        if pending is not None and not request.session.get(FACTOR_KEY):
            # The second step after a right password (not a signed-in person confirming it is
            # them, tenants.sudo).
            signin_alerts.second_step_failure_recorded(user=pending, request=request)
        return _refused(error)
    if pending is None:
        request.signin_method = "passkey"  # type: ignore[attr-defined]
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        request.session[METHOD_KEY] = "passkey"
        # login() gave this session a new key already.
        request.session[FACTOR_KEY] = "passkey"
        action, data = "signin.succeeded", {"method": "passkey"}
    elif request.session.get(FACTOR_KEY):
        # Signed in already, with its factor: the person confirms it is them (tenants.sudo).
        sudo.sudo_confirmed(request=request, user=user, method="passkey")
        return JsonResponse({"redirect": safe_next_url(request, request.GET.get("next"))})
    else:
        action, data = "signin.second_factor_verified", {"factor": "passkey"}
        session_factor_proven(request, "passkey")
    signin_audit(action=action, user=user, request=request, data=data)
    if notice := signin_alerts.second_step_failures_told(user=user, request=request):
        messages.warning(request, notice)
    return JsonResponse({"redirect": safe_next_url(request, request.GET.get("next"))})


@login_required
@require_POST
def remove(http_request: HttpRequest, passkey_id: int) -> HttpResponse:
    request = cast(AuthenticatedRequest, http_request)
    if request.session.get(METHOD_KEY) == "sso":
        messages.error(request, _("Sign in with your password to change your second factors."))
        return redirect("account_security")
    if held := sudo.confirm_first(request, back="account_security"):
        return held
    try:
        passkeys.passkey_remove(request=request, user=request.user, passkey_id=passkey_id)
    except passkeys.PasskeyError as error:
        if error.code == SESSION_ENDED:
            return session_ended_signed_out(request, error.message)
        return HttpResponse(status=404)
    messages.success(request, _("Passkey removed."))
    return redirect("account_security")
