"""A tenant's sign-in rules, set by its admins: whether two-factor sign-in is required (single
sign-on's settings are in tenants.oidc_config). One transaction each, guarded by the locked tenant
row, with its audit row."""

from __future__ import annotations

from django.db import transaction

from tenants.models import Tenant, User
from tenants.services import audit_record


def tenant_require_two_factor(*, tenant: Tenant, required: bool, actor: User) -> bool:
    """Returns whether anything changed."""
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        if locked.require_two_factor == required:
            return False
        Tenant.objects.filter(pk=tenant.pk).update(require_two_factor=required)
        tenant.require_two_factor = required
        audit_record(
            tenant=tenant,
            actor=actor,
            action="tenant.two_factor_required" if required else "tenant.two_factor_optional",
            obj=locked,
            data={"required": required},
        )
    return True
