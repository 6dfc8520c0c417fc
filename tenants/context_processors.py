from tenants.access import session_memberships
from tenants.signin_gate import owes_second_factor


def tenancy(request):
    """The current tenant and membership (set by tenant_view) and the tenant switcher's list."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    if owes_second_factor(request):
        # Only the password is proven: the header offers signing out, nothing of the account.
        return {"signin_pending": True}
    return {
        "current_tenant": getattr(request, "tenant", None),
        "current_membership": getattr(request, "membership", None),
        "switcher_memberships": lambda: session_memberships(request),
    }
