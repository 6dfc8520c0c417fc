"""Audit rows of sign-in events (sign-ins, failures, enrolments, resets, single sign-on links).

A person belongs to several tenants; each tenant's audit log shows its members' sign-in events, so
one event writes one row per tenant the person is an active member of (or one row without a
tenant for an address that is nobody's). Never a secret, a code or a password in ``data``.
"""

from __future__ import annotations

from axes.helpers import get_client_ip_address
from django.http import HttpRequest

from tenants.models import AuditEvent, Membership, Tenant, User


def client_ip(request: HttpRequest | None) -> str | None:
    return get_client_ip_address(request) if request is not None else None


def signin_audit(
    *,
    action: str,
    user: User | None,
    request: HttpRequest | None = None,
    tenant: Tenant | None = None,
    actor: User | None = None,
    data: dict | None = None,
) -> list[AuditEvent]:
    if tenant is not None:
        tenant_ids: list[int | None] = [tenant.pk]
    elif user is not None:
        tenant_ids = list(
            Membership.objects.filter(user=user, is_active=True).values_list("tenant_id", flat=True)
        ) or [None]
    else:
        tenant_ids = [None]
    ip = client_ip(request)
    payload = {"email": user.email if user else "", **(data or {})}
    return AuditEvent.objects.bulk_create(
        AuditEvent(
            tenant_id=tenant_id,
            actor=actor if actor is not None else user,
            action=action,
            object_type="user" if user else "",
            object_id=str(user.pk) if user else "",
            data=payload,
            ip_address=ip,
        )
        for tenant_id in tenant_ids
    )
