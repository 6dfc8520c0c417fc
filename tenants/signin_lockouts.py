"""An operator's early release of a sign-in lock-out (``manage.py signin_unlock``).

django-axes locks an (address, client) pair once its failures within ``AXES_COOLOFF_TIME`` reach
``AXES_FAILURE_LIMIT`` (config.settings); a lock-out ends on its own after the cool-off or at the
next successful sign-in, which a locked person cannot make. axes' own ``axes_reset*`` commands end
one sooner but leave no audit row, and the operators' admin shows axes' rows read-only
(common.admin). Here only the lock rows (``AccessAttempt``) go: axes' failure and access logs,
the trace of who tried what from where, stay.
"""

from __future__ import annotations

import ipaddress
import logging
from datetime import datetime

from axes.helpers import get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from common.addresses import account_lookup_form
from common.cli import shown
from tenants.models import User
from tenants.services import AdminError
from tenants.signin_audit import signin_audit
from tenants.signin_throttle import IPV6_CLIENT_PREFIX, ipv6_client_address

logger = logging.getLogger(__name__)


def _address_forms(ip: str) -> list[str]:
    """The forms ``ip`` can be stored in by axes (its client, ``lockout_client``): an IPv4 client
    arrives as ``a.b.c.d`` or, on a dual-stack socket, as ``::ffff:a.b.c.d``; an IPv6 client is
    kept as the first address of its /64, whichever of its addresses is given."""
    try:
        parsed = ipaddress.ip_address(ip.strip())
    except ValueError:
        parsed = None
    if parsed is None or (isinstance(parsed, ipaddress.IPv6Address) and parsed.scope_id):
        raise AdminError("bad_ip", f"{shown(ip)} is not an IP address; nothing was changed.")
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    if isinstance(parsed, ipaddress.IPv4Address):
        return [str(parsed), f"::ffff:{parsed}"]
    return [ipv6_client_address(str(parsed)) or str(parsed)]


def _client_shown(address: str | None) -> str:
    """A client of axes as the operator reads it: an IPv6 one is its whole /64."""
    if address is None:
        return "unknown"
    return f"{address}/{IPV6_CLIENT_PREFIX}" if ipv6_client_address(address) else address


def _locked_clients(rows: list[tuple[str | None, int, datetime]]) -> list[str | None]:
    """The client addresses among (address, failures, time) rows that axes holds locked now:
    their failures within the cool-off (one row per browser, summed) reach the limit. The time is
    the web processes' clock, not the database's: axes stamps its rows and judges them with it."""
    cool_off = get_cool_off()  # None: axes counts failures for ever
    since = timezone.now() - cool_off if cool_off is not None else None
    failures: dict[str | None, int] = {}
    for address, count, when in rows:
        if since is None or when >= since:
            failures[address] = failures.get(address, 0) + count
    return [address for address, count in failures.items() if count >= settings.AXES_FAILURE_LIMIT]


def signin_lockout_release(*, email: str, ip: str | None = None) -> tuple[str, list[str]]:
    """Release the sign-in lock-outs of ``email`` from every client address (or only ``ip``):
    axes' lock rows of those pairs are deleted and an audit row is written in each tenant of the
    person (one without a tenant for an address that is nobody's). Returns the address and the
    client addresses released. No lock-out to release (or ``ip`` not an address) is refused,
    changing nothing."""
    address = account_lookup_form(email)
    forms = _address_forms(ip) if ip is not None else None
    with transaction.atomic():
        rows = AccessAttempt.objects.select_for_update().filter(username=address)
        if forms is not None:
            rows = rows.filter(ip_address__in=forms)
        locked = _locked_clients(
            list(rows.values_list("ip_address", "failures_since_start", "attempt_time"))
        )
        if not locked:
            where = f" from {ip.strip()}" if ip is not None else ""
            raise AdminError(
                "not_locked",
                f"{shown(address)} has no sign-in lock-out{where}; nothing was changed.",
            )
        # A lock-out's several rows (one per browser) all go, the stale ones with them.
        at = Q(ip_address__in=[a for a in locked if a is not None])
        if None in locked:
            at |= Q(ip_address__isnull=True)
        AccessAttempt.objects.filter(at, username=address).delete()
        released = sorted(_client_shown(a) for a in locked)
        signin_audit(
            action="signin.lockout_released",
            user=User.objects.filter(email=address).first(),
            data={"email": address, "ip_addresses": released},
        )
    logger.info("tenants.signin.lockout_released", extra={"clients": len(released)})
    return address, released
