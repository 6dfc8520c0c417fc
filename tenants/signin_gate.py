"""The sign-in gate: a signed-in session that still owes a second factor, or whose person must
enrol one because a tenant of theirs requires it, reaches nothing but the pages that settle that
(and sign-out). Browsers are redirected there; htmx and other non-page requests get 403.

Deny by default: every view is behind the gate except the few named here and the machine
endpoints (agent API with bearer tokens, webhooks, health and metrics), which have no session.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import logout
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _

from tenants.access import SAFE_METHODS
from tenants.sudo import confirm_first
from tenants.two_factor import factor_state
from tenants.user_sessions import FACTOR_KEY, METHOD_KEY, session_seen

SESSIONLESS_PREFIXES = ("/api/", "/webhooks/", "/static/")
SESSIONLESS_NAMES = frozenset({"healthz", "readyz", "metrics"})
ALWAYS_OPEN = frozenset({"logout", "sso_choose", "sso_start", "sso_callback"})
# What a session that owes its second factor may open.
VERIFY_OPEN = ALWAYS_OPEN | {"two_factor_verify", "passkey_signin_options", "passkey_signin"}
# What a person who must enrol may open.
ENROL_OPEN = ALWAYS_OPEN | {
    "account_security",
    # Enrolling needs a recent proof (tenants.sudo); a person slow to enrol proves it again.
    "account_confirm",
    "totp_enrol",
    "totp_confirm",
    "passkey_register_options",
    "passkey_register",
}


# The admin's sign-in and password pages, which config.urls sends to this site's own.
OPERATORS_ADMIN_NAMES = frozenset({"operators_admin_signin", "operators_admin_password_change"})


def _operators_admin(match) -> bool:
    return match.namespace == "admin" or match.url_name in OPERATORS_ADMIN_NAMES


def _operators_admin_proof(request: HttpRequest, match) -> HttpResponse | None:
    """A change in the operators' admin needs a recent proof (tenants.sudo), as a tenant admin's
    lasting powers do: it acts on every tenant, and a stolen operator cookie could otherwise set
    any account's password, switch accounts on or raise one to superuser. Reading needs none;
    nor does signing out. The change is not made; the page that sent it opens again after the
    proof."""
    if match is None or match.namespace != "admin" or match.url_name == "logout":
        return None
    if request.method in SAFE_METHODS:
        return None
    return confirm_first(request, back=None)


def operator_owes_enrolment(request: HttpRequest) -> bool:
    """True for an operator (staff) without any second factor while the operators' admin needs
    one (``OPERATORS_REQUIRE_TWO_FACTOR``). Their tenants may not require one, and the gate then
    lets a password alone through; the admin acts on every tenant, so it does not. An operator
    who holds a factor already owes its proof in this session (``gate_for``: "verify")."""
    if not settings.OPERATORS_REQUIRE_TWO_FACTOR or not request.user.is_staff:
        return False
    has_factor, _required = factor_state(request.user)
    return not has_factor


def _operators_admin_factor(request: HttpRequest, match) -> HttpResponse | None:
    """The operators' admin without a second factor: a page is sent to the security page (which
    says why), anything else refused. Signing out stays open."""
    if match.namespace != "admin" or match.url_name == "logout":
        return None
    if not operator_owes_enrolment(request):
        return None
    if getattr(request, "htmx", False) or request.method not in ("GET", "HEAD"):
        raise PermissionDenied(
            _("The operators' admin needs two-factor sign-in: set it up on your Security page.")
        )
    return redirect("account_security")


def came_through_sso(request: HttpRequest) -> bool:
    return request.session.get(METHOD_KEY) == "sso"


def gate_for(request: HttpRequest) -> str | None:
    """None when the session may go anywhere; "verify" or "enrol" otherwise."""
    proven = request.session.get(FACTOR_KEY)
    if proven == "sso":
        # The tenant's identity provider vouched for this session under its own rules (and such a
        # session may not change the person's factors: it could not enrol one here).
        return None
    # Read on every request, not trusted from the session: a person who removed their last
    # factor (in this browser or another) has nothing left that their sessions could have proven.
    has_factor, required = factor_state(request.user)  # type: ignore[arg-type]
    if not has_factor:
        if proven:
            # Forgotten, so that a factor enrolled later (from any browser) must be proven here.
            request.session.pop(FACTOR_KEY, None)
        return "enrol" if required else None
    return None if proven else "verify"


# Where the gate of this request is kept once known (the middleware computes it for every page).
_GATE_ATTR = "cs_signin_gate"


def owes_second_factor(request: HttpRequest) -> bool:
    """True for a session signed in with its password that has not proven its second factor:
    its pages show nothing of the account (tenants, roles, the person's name), which is what
    that factor guards. The middleware notes the gate for every view; a page it never saw (an
    address that resolves to nothing: Django renders that 404 without a view) is asked here."""
    if not request.user.is_authenticated:
        return False
    if not hasattr(request, _GATE_ATTR):
        setattr(request, _GATE_ATTR, gate_for(request))
    return getattr(request, _GATE_ATTR) == "verify"


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
        if match is not None and _operators_admin(match) and came_through_sso(request):
            # The operators' admin acts on every tenant; a tenant's identity provider speaks for
            # that tenant only (its admin could assert any address in the domains they list).
            raise PermissionDenied(
                _(
                    "The operators' admin needs a sign-in with your password and your second "
                    "factor: sign out, then sign in with your password."
                )
            )
        gate = gate_for(request)
        setattr(request, _GATE_ATTR, gate)
        if gate is None:
            if match is not None and (held := _operators_admin_factor(request, match)):
                return held
            return _operators_admin_proof(request, match)
        allowed, target = (
            (VERIFY_OPEN, "two_factor_verify")
            if gate == "verify"
            else (ENROL_OPEN, "account_security")
        )
        if name in allowed:
            return None
        if getattr(request, "htmx", False) or request.method not in ("GET", "HEAD"):
            # Raised, not answered: the 403 page with this sentence, which the page's alert reads
            # out when the request came from htmx (static/js/app.js).
            if gate == "verify":
                raise PermissionDenied(_("Finish signing in with your second factor first."))
            raise PermissionDenied(_("Set up two-factor sign-in first."))
        if gate == "verify":
            return redirect(f"{reverse(target)}?{urlencode({'next': request.get_full_path()})}")
        return redirect(target)
