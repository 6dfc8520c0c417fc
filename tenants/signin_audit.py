"""Audit rows of sign-in events (sign-ins, failures, enrolments, resets, single sign-on links).

A person belongs to several tenants; each tenant's audit log shows its members' sign-in events, so
one event writes one row per tenant the person is an active member of (or one row without a
tenant for an address that is nobody's). Never a secret, a code or a password in ``data``.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest

from tenants.models import AuditEvent, Membership, Tenant, User


def client_ip(request: HttpRequest | None) -> str | None:
    """The client's own address, for audit rows and the sessions page (not axes' client, which
    for IPv6 is the whole /64: tenants.signin_throttle.lockout_client)."""
    return request_client_ip(request) if request is not None else None


def request_client_ip(request: HttpRequest) -> str | None:
    """The client's address as the nearest of ``TRUSTED_PROXY_COUNT`` proxies saw it (the login
    throttle, through ``tenants.signin_throttle.lockout_client``; the sessions page and sign-in
    audit rows).

    Each proxy appends to ``X-Forwarded-For`` the address it got the request from, so with n
    trusted proxies in front the client is the n-th address from the right; whatever the client
    wrote further left is not believed. No proxies, a header with fewer than n addresses (a proxy
    did not append) or a malformed address: ``REMOTE_ADDR``.

    An empty ``REMOTE_ADDR`` (gunicorn on a unix socket) is None: axes stores either without an
    address but looks the empty string up as ``= ''``, which no row matches, so such a client was
    never locked out, however many passwords it tried.
    """
    remote = request.META.get("REMOTE_ADDR") or None
    count = settings.TRUSTED_PROXY_COUNT
    if count <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    if len(forwarded) < count:
        return remote
    try:
        return str(ipaddress.ip_address(forwarded[-count]))
    except ValueError:
        return remote


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
