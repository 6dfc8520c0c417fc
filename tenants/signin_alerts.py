"""Telling a person that their password was used by a sign-in that then failed its second step.

Someone who got the password right (phished, reused elsewhere) and not the second factor leaves
only audit rows, in the logs of the person's tenants, which their admins read and they do not.
Each such failure is counted on the person; their next completed sign-in (a code, a recovery code
or a passkey) tells them once, with the count, when and from where, so that they change the
password, as the big providers' "your password was used" notices do. The product sends people no
e-mail (tenants.passwords), so the notice is on the page. Failures of the session that signs in
(its own typo before the right code) are not news to it and are left out.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now
from django.http import HttpRequest
from django.utils import formats, timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from tenants.models import User
from tenants.signin_audit import client_ip, signin_audit

# How many of the failures counted on the person this session made itself.
_OWN_FAILURES_KEY = "cs_second_step_failures_here"


def second_step_failure_recorded(*, user: User, request: HttpRequest) -> None:
    """A session that proved the password failed its second step (a wrong or refused code, a
    passkey that did not verify). Call only for a session that still owes its factor: a signed-in
    person confirming it is them (tenants.sudo) is not a stranger with the password."""
    User.objects.filter(pk=user.pk).update(
        second_step_failures=F("second_step_failures") + 1,
        second_step_failed_at=Now(),
        second_step_failed_ip=client_ip(request),
    )
    request.session[_OWN_FAILURES_KEY] = request.session.get(_OWN_FAILURES_KEY, 0) + 1


def second_step_failures_told(*, user: User, request: HttpRequest) -> str | None:
    """The notice for a sign-in of ``user`` that just completed, or None: the failures of other
    sessions since the person was last told. They are told once: the count starts again."""
    own = request.session.pop(_OWN_FAILURES_KEY, 0)
    with transaction.atomic():
        row = (
            User.objects.select_for_update(no_key=True)
            .filter(pk=user.pk, second_step_failures__gt=0)
            .values_list("second_step_failures", "second_step_failed_at", "second_step_failed_ip")
            .first()
        )
        if row is None:
            return None
        failures, at, ip = row
        User.objects.filter(pk=user.pk).update(
            second_step_failures=0, second_step_failed_at=None, second_step_failed_ip=None
        )
        others = failures - own
        if others <= 0:
            return None
        signin_audit(
            action="signin.second_step_failures_shown",
            user=user,
            request=request,
            data={"failures": others},
        )
    when = formats.date_format(timezone.localtime(at), "DATETIME_FORMAT") if at else "—"
    return ngettext(
        "Your password was entered correctly %(count)d time by a sign-in that then failed the "
        "second step, the last on %(when)s from %(address)s. If that was not you, change your "
        "password now.",
        "Your password was entered correctly %(count)d times by sign-ins that then failed the "
        "second step, the last on %(when)s from %(address)s. If that was not you, change your "
        "password now.",
        others,
    ) % {"count": others, "when": when, "address": ip or _("an unknown address")}
