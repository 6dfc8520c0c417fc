from tenants.access import session_memberships


def tenancy(request):
    """The current tenant and membership (set by tenant_view) and the tenant switcher's list."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "current_tenant": getattr(request, "tenant", None),
        "current_membership": getattr(request, "membership", None),
        "switcher_memberships": lambda: session_memberships(request),
    }
