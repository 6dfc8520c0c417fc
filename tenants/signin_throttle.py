"""A budget of failed password sign-ins per client address, whatever addresses it types.

django-axes locks an (email, client) pair after ``AXES_FAILURE_LIMIT`` failures, so one client
cannot lock a person out for everyone (the client as ``lockout_client`` names it: an IPv6
client by its /64). But a client that types a new address each time is never
locked, and every try costs a password hash (argon2: ~170 ms of CPU and 100 MiB; Django hashes for
an unknown address too, so that its timing tells nothing): an outside probe found that one client
could keep the web processes hashing without end. This backend, between axes' and Django's,
refuses before any hash once the client failed on ``SIGNIN_FAILED_ACCOUNTS_PER_MINUTE`` accounts
(axes' rows: one per address and browser) in the last minute; the person sees axes' lock-out page
(429). It counts the rows axes writes, in the database every web process shares.

The budget is per client: an IPv4 address, or an IPv6 /64 (``client_networks``), of the address
``TRUSTED_PROXY_COUNT`` finds. Behind a proxy with that
setting left at 0, every client is the proxy, and a burst of failures pauses sign-in for all for a
minute (DEPLOYMENT.md). Clients the server gives no address (a unix socket and no trusted proxy)
are one client, for the same reason and with the same cost (``failed_accounts_recently``).
``manage.py signin_unlock`` does not touch the budget: it ends on its own within ``WINDOW``.
"""

from __future__ import annotations

import ipaddress
from datetime import timedelta

from axes.exceptions import AxesBackendPermissionDenied
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.http import HttpRequest
from django.utils import timezone

from tenants.signin_audit import request_client_ip

WINDOW = timedelta(minutes=1)
IPV6_CLIENT_PREFIX = 64


def client_networks(address: str) -> list[str]:
    """The blocks of addresses one client controls, as PostgreSQL ``inet`` text: an IPv4 address
    alone, in both the forms a server reports it (``a.b.c.d`` and, from a dual-stack socket,
    ``::ffff:a.b.c.d``); an IPv6 client's whole ``/64``, the smallest block a network hands one
    subscriber: it picks any of its 2^64 addresses at will, so counting exact addresses gave it
    a fresh budget per address, without end. Empty when ``address`` is not an address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return []
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv4Address):
        return [f"{ip}/32", f"::ffff:{ip}/128"]
    return [str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False))]


def lockout_client(request: HttpRequest) -> str | None:
    """The client django-axes locks an address for (``AXES_CLIENT_IP_CALLABLE``): the address
    ``request_client_ip`` finds, an IPv6 one as the first address of its /64.

    axes locks an (address, client) pair after ``AXES_FAILURE_LIMIT`` wrong passwords, and it
    took the client's exact address: an IPv6 client moved on to another address of its /64 and
    had a fresh ``AXES_FAILURE_LIMIT`` guesses at the same person, address after address (with
    the budget's 30 accounts a minute, 150 guesses a minute at one account, where an IPv4
    client has 5 per cool-off). IPv4 stays exact, in the form the server reported it
    (``client_networks`` and ``signin_unlock`` know both); None (no address) stays None."""
    address = request_client_ip(request)
    if address is None:
        return None
    return ipv6_client_address(address) or address


def ipv6_client_address(address: str) -> str | None:
    """The first address of the /64 of an IPv6 ``address`` (not one mapping an IPv4 address),
    as PostgreSQL ``inet`` text; None for anything else."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    if not isinstance(ip, ipaddress.IPv6Address) or ip.ipv4_mapped is not None:
        return None
    return str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False).network_address)


def failed_accounts_recently(request: HttpRequest) -> int:
    """Accounts (axes rows) this client failed to sign in to within the last ``WINDOW``, from
    any address of its blocks (``client_networks``); for a client with no address, those of
    every client with none."""
    since = timezone.now() - WINDOW
    address = request_client_ip(request)
    if address is None:
        # No address (gunicorn on a unix socket, no trusted proxy): axes keeps such failures
        # without one, and every such client is counted as one. This lets one stranger pause
        # sign-in for everyone behind that front door for a minute, and it is still right: a
        # deployment that gives no client address already has axes lock a person out for all
        # of them (its pair is the email and no address), and it must set TRUSTED_PROXY_COUNT
        # or bind TCP (DEPLOYMENT.md); until then a shared budget fails safe, where none let
        # one client make the server hash password after password without end.
        return AccessAttempt.objects.filter(
            ip_address__isnull=True, attempt_time__gte=since
        ).count()
    networks = client_networks(address)
    if not networks:
        return 0
    in_networks = RawSQL("ip_address <<= ANY(%s::inet[])", (networks,), output_field=BooleanField())
    return AccessAttempt.objects.filter(in_networks, attempt_time__gte=since).count()


class ClientBudgetBackend:
    """Authenticates nobody; stops the authentication, before Django's backend hashes anything,
    when the client's budget of failures is spent. No ``get_user``, as axes' backend has none:
    a session is never this backend's, and ``login()`` without a backend passes it by."""

    def authenticate(self, request: HttpRequest | None, **credentials: object) -> None:
        if request is None:
            return None
        if failed_accounts_recently(request) >= settings.SIGNIN_FAILED_ACCOUNTS_PER_MINUTE:
            # axes' middleware answers with its lock-out page (429) when this flag is set; the
            # page says which pause this is (a minute for the client, not the account's cool-off).
            request.axes_locked_out = True  # type: ignore[attr-defined]
            request.signin_budget_spent = True  # type: ignore[attr-defined]
            raise AxesBackendPermissionDenied("the client's budget of failed sign-ins is spent")
        return None
