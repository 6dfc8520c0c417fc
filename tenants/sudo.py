"""Sudo mode: what outlives a stolen session cookie needs a recent proof that it is the person.

A session cookie alone (copied from a shared computer, a browser extension, a log) was enough to
turn off two-factor sign-in, or to add the holder's own authenticator app or passkey, which then
outlives the cookie. So turning factors off or on, passkeys, recovery codes and ending the
person's other sessions each need a proof within the last ``SUDO_SECONDS``: the password, a
second factor (an authenticator code, a recovery code, a passkey), or for a session that came
through single sign-on, that provider's sign-in (a proof on its own tenant's pages and on the
person's own, never on another tenant's). Every
sign-in records the time of its proof (tenants.user_sessions); the "Confirm it's you" page
(tenants.views_sudo) renews it.

A tenant admin's session could mint the same kind of lasting access for its holder, so these
need the proof too (console.views, views_tokens, views_events, views_mailboxes, views_signin):
creating an agent token; adding an agent-event endpoint (where events go, and its signing secret),
enabling one again or rotating its secret; replacing a mailbox's AgentMail key; saving the single sign-on settings;
inviting someone (the link is a way in, whatever the role); giving a member a higher role or
approve rights for more mailboxes; reactivating a member (with the role they had); resetting a
member's second factors; and turning the tenant's
two-factor requirement off. Reading, revoking, disabling and lowering do not.

A request without a recent proof is not carried out: it is sent to that page, and from there back
to the page it came from, where the person does it again. Wrong passwords and codes there count
as at sign-in: django-axes and the client's budget (through ``authenticate()``), django-otp's
throttle and the last code step of the device (through ``second_factor_verify``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import authenticate
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django_htmx.http import HttpResponseClientRedirect

from config.clock import db_now
from tenants import two_factor
from tenants.models import User
from tenants.signin_audit import signin_audit
from tenants.user_sessions import (
    PROVEN_AT_KEY,
    PROVEN_THROUGH_KEY,
    session_key_renew,
    session_proof_recorded,
)

CONFIRMED_ACTION = "signin.reauthenticated"


class ConfirmError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def proof_is_recent(request: HttpRequest) -> bool:
    """Whether this session proved who it is within ``SUDO_SECONDS``. A proof that a tenant's
    identity provider gave holds on that tenant's pages (and on the person's own, which a
    session from single sign-on reaches only when each of their tenants' providers opened it,
    ``sso_session_beyond_its_tenants``), not on another tenant's: that provider's admin can sign
    the person in there at will, and with a stolen cookie of a session that came through both
    would otherwise make a proof for the other tenant's guarded actions."""
    through = request.session.get(PROVEN_THROUGH_KEY)
    tenant = getattr(request, "tenant", None)
    if through is not None and tenant is not None and tenant.pk != through:
        return False
    stamp = request.session.get(PROVEN_AT_KEY)
    if not isinstance(stamp, str):
        return False
    try:
        proven = datetime.fromisoformat(stamp)
    except ValueError:
        return False
    if timezone.is_naive(proven):
        return False
    # The database clock, which stamped the proof (tenants.user_sessions), so web hosts whose
    # clocks disagree agree on its age. A proof from the future (that clock stepped back, or a
    # stamp an older release took from a host running fast) is no proof: with the age counted
    # negative it held for SUDO_SECONDS plus the whole step.
    age = db_now() - proven
    return timedelta(0) <= age < timedelta(seconds=settings.SUDO_SECONDS)


def confirm_url(target: str) -> str:
    return f"{reverse('account_confirm')}?{urlencode({'next': target})}"


def confirm_first(
    request: HttpRequest, *, back: str | None, args: Sequence[object] = (), json: bool = False
) -> HttpResponse | None:
    """None when this session's proof is recent; otherwise the answer that sends the person to
    confirm it is them. A GET comes back to its own address; anything else to the page ``back``
    (a URL name, with ``args``; None: the address it was sent to, whose GET shows the form, as
    in the operators' admin) whose form sent it: it was not carried out, and is repeated from
    there. ``json``: for a script's fetch, which shows the page itself."""
    if proof_is_recent(request):
        return None
    if request.method in ("GET", "HEAD"):
        target = request.get_full_path()
    else:
        target = reverse(back, args=args) if back is not None else request.get_full_path()
        messages.warning(request, _("Nothing was changed: confirm it is you, then do it again."))
    if json:
        return JsonResponse(
            {
                "error": "confirm",
                "message": _("Confirm it is you first."),
                "redirect": confirm_url(target),
            },
            status=403,
        )
    if getattr(request, "htmx", False):
        # htmx follows a 302 inside its request and would swap the confirm page into the
        # fragment's place; HX-Redirect has it open the page instead.
        return HttpResponseClientRedirect(confirm_url(target))
    return HttpResponseRedirect(confirm_url(target))


def sudo_confirmed(*, request: HttpRequest, user: User, method: str, audit: bool = True) -> None:
    """Record a proof made on the confirm page (or a passkey's on it). The session gets a new key,
    as at sign-in: what it may do grows."""
    with transaction.atomic():
        session_proof_recorded(request)
        session_key_renew(request)
        if audit:
            signin_audit(
                action=CONFIRMED_ACTION, user=user, request=request, data={"method": method}
            )


def sudo_confirm_password(*, request: HttpRequest, user: User, password: str) -> None:
    """Through ``authenticate()``: a wrong password counts towards django-axes' lock-out of this
    address and client and the client's budget (tenants.signin_throttle), and is audited
    (``signin.failed``), as at sign-in."""
    if not user.has_usable_password():
        raise ConfirmError("no_password", _("Your account has no password."))
    person = authenticate(request, username=user.email, password=password)
    if person is None or person.pk != user.pk:
        raise ConfirmError("wrong_password", _("That password is not right."))
    sudo_confirmed(request=request, user=user, method="password")


def sudo_confirm_code(*, request: HttpRequest, user: User, code: str) -> str:
    """An authenticator code (once: the device keeps the last step it took) or an unused recovery
    code, with the throttle of the sign-in step. Returns the factor used."""
    try:
        factor = two_factor.second_factor_verify(
            user=user, code=code, request=request, verified_action=CONFIRMED_ACTION
        )
    except two_factor.TwoFactorError as error:
        raise ConfirmError(error.code, error.message) from None
    sudo_confirmed(request=request, user=user, method=factor, audit=False)
    return factor
