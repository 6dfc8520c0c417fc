"""Tenant resolution for staff views: the tenant comes from the signed-in user's membership only.

Every tenant-scoped view is wrapped in :func:`tenant_view`. A tenant the user is not an active
member of, and a tenant that does not exist, give the same 404.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps
from typing import TYPE_CHECKING, cast

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.http import Http404, HttpRequest
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _

from tenants.models import Membership, Tenant, User
from tenants.user_sessions import (
    METHOD_KEY,
    SSO_TENANTS_KEY,
    came_through_provider,
    sso_tenants_trusted,
)

if TYPE_CHECKING:
    from django_htmx.middleware import HtmxDetails


class AuthenticatedRequest(HttpRequest):
    """The request a ``login_required`` view receives (for type checking only; never built):
    anonymous users were turned away, so ``user`` is a :class:`User`. django-htmx's middleware
    sets ``htmx``."""

    user: User
    htmx: HtmxDetails


class TenantRequest(AuthenticatedRequest):
    """The request a :func:`tenant_view` view receives: ``tenant_view`` sets ``tenant`` and
    ``membership`` (it is ``login_required`` too)."""

    tenant: Tenant
    membership: Membership


View = Callable[..., HttpResponseBase]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def membership_for(user: User, slug: str) -> Membership:
    try:
        return Membership.objects.select_related("tenant", "user", "tenant__single_sign_on").get(
            user=user, tenant__slug=slug, is_active=True, user__is_active=True
        )
    except Membership.DoesNotExist:
        raise Http404("No such tenant") from None


def signin_rule_refusal(
    request: AuthenticatedRequest, tenant: Tenant | None
) -> HttpResponseBase | None:
    """None when this session signed in the way ``tenant`` accepts. A tenant whose members must
    come through its identity provider sends a password session there; a session that came
    through single sign-on opens only the tenants whose provider it came through (another
    tenant's admin controls that provider, so its word is good for that tenant alone).
    ``tenant`` None: no tenant has the address (see ``sso_session_refusal``).

    Only while the tenant still trusts that provider: once its admin turns single sign-on off or
    names another issuer (the provider was compromised, or replaced), what the old one vouched
    for opens nothing there (the sessions it opened would otherwise keep the tenant open for
    their whole life, with no way for the admin to end them)."""
    try:
        sso = tenant.single_sign_on if tenant is not None else None
    except ObjectDoesNotExist:
        sso = None
    if (
        sso is not None
        and sso.enabled
        and came_through_provider(request, sso.tenant_id, sso.issuer)
    ):
        return None
    if tenant is not None and sso is not None and sso.enabled and not sso.password_signin_allowed:
        if request.method in SAFE_METHODS and not getattr(request, "htmx", False):
            query = urlencode({"next": request.get_full_path()})
            return redirect(f"{reverse('sso_start', args=[tenant.slug])}?{query}")
        raise PermissionDenied(_("Sign in through this tenant's single sign-on first."))
    came_through = tenant is not None and tenant.pk in request.session.get(SSO_TENANTS_KEY, [])
    if request.session.get(METHOD_KEY) == "sso" and came_through:
        raise PermissionDenied(
            _(
                "This tenant's single sign-on was turned off or changed since you signed in: "
                "sign out, then sign in again."
            )
        )
    if request.session.get(METHOD_KEY) == "sso":
        raise PermissionDenied(
            _(
                "You signed in through another tenant's single sign-on: sign out and sign in "
                "with your password to open this one."
            )
        )
    return None


def sso_session_refusal(request: AuthenticatedRequest, slug: str) -> HttpResponseBase | None:
    """For a session from single sign-on, the sign-in rule of the tenant at ``slug``, before
    anything of the person's memberships is read: a tenant it did not come through gets the same
    answer whether the person belongs to it, a stranger's tenant or no tenant has the address.
    Otherwise whoever runs that provider (another tenant's admin, who can sign in as the person
    there) could try addresses one by one and tell the person's other tenants by a 403 among
    404s, which the home page and the tenant switcher keep from them."""
    if request.session.get(METHOD_KEY) != "sso":
        return None
    tenant = Tenant.objects.select_related("single_sign_on").filter(slug=slug).first()
    return signin_rule_refusal(request, tenant)


def tenant_view(
    roles: Iterable[str] | None = None,
) -> Callable[[View], View]:
    """Resolve ``/t/<slug>/`` to the user's active membership, then check the role.

    A suspended tenant is read-only: its members can still look (audit, outbox) but every
    state-changing request is refused with 403, and nothing sends (the worker re-checks).
    """
    allowed = frozenset(roles) if roles is not None else None

    def decorator(view: View) -> View:
        @login_required
        @wraps(view)
        def wrapper(
            http_request: HttpRequest, slug: str, *args: object, **kwargs: object
        ) -> HttpResponseBase:
            # login_required ran first, so the user is signed in; this is where the request
            # becomes a TenantRequest (the attributes are set on the same object).
            request = cast(TenantRequest, http_request)
            refused = sso_session_refusal(request, slug)
            if refused is not None:
                return refused
            membership = membership_for(request.user, slug)
            request.membership = membership
            request.tenant = membership.tenant
            refused = signin_rule_refusal(request, membership.tenant)
            if refused is not None:
                return refused
            if allowed is not None and membership.role not in allowed:
                raise PermissionDenied(_("Your role does not allow this."))
            if request.method not in SAFE_METHODS and not membership.tenant.is_active:
                raise PermissionDenied(_("This tenant is suspended; it is read-only."))
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


ADMIN_ONLY = (Membership.Role.ADMIN,)
DECIDERS = (Membership.Role.ADMIN, Membership.Role.APPROVER)


def active_memberships(user: User) -> list[Membership]:
    return list(
        Membership.objects.filter(user=user, is_active=True)
        .select_related("tenant")
        .order_by("tenant__name")
    )


def session_memberships(request: HttpRequest) -> list[Membership]:
    """The memberships this session may open, for lists (home, the tenant switcher): a session
    from single sign-on only those of the tenants whose provider it came through. Whoever runs
    that provider learns nothing of the person's other tenants, names nor roles."""
    memberships = active_memberships(cast(User, request.user))
    if request.session.get(METHOD_KEY) != "sso":
        return memberships
    came_through = sso_tenants_trusted(request)
    return [m for m in memberships if m.tenant_id in came_through]
