"""The sign-in gate: a signed-in session that still owes a second factor, or whose person must
enrol one because a tenant of theirs requires it, reaches nothing but the pages that settle that
(and sign-out). Browsers are redirected there; htmx and other non-page requests get 403.

Deny by default: every view is behind the gate except the few named here and the machine
endpoints (agent API with bearer tokens, webhooks, health and metrics), which have no session.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _

from tenants.two_factor import factor_state
from tenants.user_sessions import FACTOR_KEY, session_seen

SESSIONLESS_PREFIXES = ("/api/", "/webhooks/", "/static/")
SESSIONLESS_NAMES = frozenset({"healthz", "readyz", "metrics"})
ALWAYS_OPEN = frozenset({"logout", "sso_choose", "sso_start", "sso_callback"})
# What a session that owes its second factor may open.
VERIFY_OPEN = ALWAYS_OPEN | {"two_factor_verify", "passkey_signin_options", "passkey_signin"}
# What a person who must enrol may open.
ENROL_OPEN = ALWAYS_OPEN | {
    "account_security",
    "totp_enrol",
    "totp_confirm",
    "passkey_register_options",
    "passkey_register",
}


def gate_for(request: HttpRequest) -> str | None:
    """None when the session may go anywhere; "verify" or "enrol" otherwise."""
    if request.session.get(FACTOR_KEY):
        return None
    has_factor, required = factor_state(request.user)  # type: ignore[arg-type]
    if has_factor:
        return "verify"
    return "enrol" if required else None


class SignInGateMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        if not request.user.is_authenticated or request.path.startswith(SESSIONLESS_PREFIXES):
            return None
        match = request.resolver_match
        name = match.url_name if match else None
        if name in SESSIONLESS_NAMES:
            return None
        if not session_seen(request):
            logout(request)
            return redirect("login")
        gate = gate_for(request)
        if gate is None:
            return None
        allowed, target = (
            (VERIFY_OPEN, "two_factor_verify")
            if gate == "verify"
            else (ENROL_OPEN, "account_security")
        )
        if name in allowed:
            return None
        if getattr(request, "htmx", False) or request.method not in ("GET", "HEAD"):
            if gate == "verify":
                return HttpResponseForbidden(_("Finish signing in with your second factor first."))
            return HttpResponseForbidden(_("Set up two-factor sign-in first."))
        if gate == "verify":
            return redirect(f"{reverse(target)}?{urlencode({'next': request.get_full_path()})}")
        return redirect(target)
