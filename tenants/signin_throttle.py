"""A budget of failed password sign-ins per client address, whatever addresses it types.

django-axes locks an (email, client) pair after ``AXES_FAILURE_LIMIT`` failures, so one client
cannot lock a person out for everyone. But a client that types a new address each time is never
locked, and every try costs a password hash (argon2: ~170 ms of CPU and 100 MiB; Django hashes for
an unknown address too, so that its timing tells nothing): an outside probe found that one client
could keep the web processes hashing without end. This backend, between axes' and Django's,
refuses before any hash once the client failed on ``SIGNIN_FAILED_ACCOUNTS_PER_MINUTE`` accounts
(axes' rows: one per address and browser) in the last minute; the person sees axes' lock-out page
(429). It counts the rows axes writes, in the database every web process shares.

The budget is per client address as ``TRUSTED_PROXY_COUNT`` finds it: behind a proxy with that
setting left at 0, every client is the proxy, and a burst of failures pauses sign-in for all for a
minute (DEPLOYMENT.md).
"""

from __future__ import annotations

from datetime import timedelta

from axes.exceptions import AxesBackendPermissionDenied
from axes.models import AccessAttempt
from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from tenants.signin_audit import request_client_ip

WINDOW = timedelta(minutes=1)


def failed_accounts_recently(request: HttpRequest) -> int:
    """Accounts (axes rows) this client failed to sign in to within the last ``WINDOW``."""
    client = request_client_ip(request)
    if not client:
        return 0
    return AccessAttempt.objects.filter(
        ip_address=client, attempt_time__gte=timezone.now() - WINDOW
    ).count()


class ClientBudgetBackend:
    """Authenticates nobody; stops the authentication, before Django's backend hashes anything,
    when the client's budget of failures is spent. No ``get_user``, as axes' backend has none:
    a session is never this backend's, and ``login()`` without a backend passes it by."""

    def authenticate(self, request: HttpRequest | None, **credentials: object) -> None:
        if request is None:
            return None
        if failed_accounts_recently(request) >= settings.SIGNIN_FAILED_ACCOUNTS_PER_MINUTE:
            # axes' middleware answers with its lock-out page (429) when this flag is set.
            request.axes_locked_out = True  # type: ignore[attr-defined]
            raise AxesBackendPermissionDenied("the client's budget of failed sign-ins is spent")
        return None
