"""Second factors: an authenticator app (TOTP) and single-use recovery codes.

django-otp supplies the device framework (``Device``, its exponential throttling) and the RFC 6238
arithmetic (``django_otp.oath.TOTP``); the seed is sealed at rest and recovery codes are kept as
digests (django-otp's own TOTP and static devices store both in the clear). Every verification
locks the device row, so one code cannot be accepted twice by two requests at the same moment.
"""

from __future__ import annotations

import base64
import hashlib
import math
import secrets
import time
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.db.models.functions import Now
from django.http import HttpRequest
from django.utils import timezone
from django.utils.timesince import timeuntil
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django_otp.oath import TOTP

from common import crypto
from tenants.models import Membership, Passkey, RecoveryCode, TotpDevice, User
from tenants.signin_audit import signin_audit
from tenants.user_sessions import SESSION_ENDED, session_ended_message, session_still_open

RECOVERY_CODE_COUNT = 10
# A code of the step before or after the server's is accepted too (clock skew, typing time).
TOTP_TOLERANCE = 1
TOTP_ISSUER = "Countersign"
_RECOVERY_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
# Wrong recovery codes in a row wait as wrong app codes do (per account, doubling), but never
# longer than this. A recovery code cannot be guessed (31**10 values each), and they had shared the
# back-off of the 6 digits, which has no end: a stranger who knew the password and typed wrong
# codes for a day kept the real person out for the next day, recovery codes included.
RECOVERY_CODE_MAX_WAIT = timedelta(minutes=1)


class TwoFactorError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _asked_by_an_open_session(user: User, request: HttpRequest | None) -> None:
    """First in every write of a factor: under the person's row lock, refuse (changing nothing)
    a request whose session was ended while it was on its way (``session_still_open``)."""
    if not session_still_open(user=user, request=request):
        raise TwoFactorError(SESSION_ENDED, session_ended_message())


def _aad(user_id: int) -> str:
    return f"totp:{user_id}:seed"


def totp_secret(device: TotpDevice) -> str:
    """The seed as the base32 text authenticator apps take."""
    raw = crypto.unseal(device.sealed_key, aad=_aad(device.user_id))
    return base64.b32encode(bytes.fromhex(raw)).decode()


def totp_uri(device: TotpDevice, user: User) -> str:
    from urllib.parse import quote, urlencode

    label = quote(f"{TOTP_ISSUER}:{user.email}")
    query = urlencode({"secret": totp_secret(device), "issuer": TOTP_ISSUER, "digits": 6})
    return f"otpauth://totp/{label}?{query}"


def totp_begin(*, user: User, request: HttpRequest | None = None) -> TotpDevice:
    """A fresh unconfirmed authenticator for ``user`` (replacing an unconfirmed one).
    ``request``: the session asking (None: no session, a shell or a test)."""
    with transaction.atomic():
        # A seed made for a session a reset just ended would be one its holder was shown.
        _asked_by_an_open_session(user, request)
        if TotpDevice.objects.filter(user=user, confirmed=True).exists():
            raise TwoFactorError("already_enrolled", _("An authenticator app is already set up."))
        TotpDevice.objects.filter(user=user, confirmed=False).delete()
        seed = secrets.token_hex(20)
        return TotpDevice.objects.create(
            user=user,
            name="Authenticator app",
            confirmed=False,
            sealed_key=crypto.seal(seed, aad=_aad(user.pk)),
        )


def _ascii_digits(value: str) -> bool:
    # str.isdigit() is true of ¹ and ① too, which int() refuses.
    return value.isascii() and value.isdigit()


def _check_totp(device: TotpDevice, code: str) -> bool:
    """Verify ``code`` against a locked device and record the outcome on it."""
    allowed, _details = device.verify_is_allowed()
    if not allowed:
        return False
    normalized = code.replace(" ", "").strip()
    if not (_ascii_digits(normalized) and len(normalized) == 6):
        device.throttle_increment(commit=False)
        device.save(update_fields=["throttling_failure_timestamp", "throttling_failure_count"])
        return False
    seed = bytes.fromhex(crypto.unseal(device.sealed_key, aad=_aad(device.user_id)))
    totp = TOTP(seed, 30, 0, 6, device.drift)
    totp.time = time.time()
    if not totp.verify(int(normalized), TOTP_TOLERANCE, device.last_t + 1):
        device.throttle_increment(commit=False)
        device.save(update_fields=["throttling_failure_timestamp", "throttling_failure_count"])
        return False
    device.last_t = totp.t()
    device.drift = totp.drift
    device.throttle_reset(commit=False)
    device.last_used_at = timezone.now()
    device.save(
        update_fields=[
            "last_t",
            "drift",
            "throttling_failure_timestamp",
            "throttling_failure_count",
            "last_used_at",
        ]
    )
    return True


def _new_recovery_codes(user: User) -> list[str]:
    RecoveryCode.objects.filter(user=user).delete()
    codes = [
        "-".join("".join(secrets.choice(_RECOVERY_ALPHABET) for _ in range(5)) for _ in range(2))
        for _ in range(RECOVERY_CODE_COUNT)
    ]
    RecoveryCode.objects.bulk_create(
        RecoveryCode(user=user, digest=recovery_digest(code)) for code in codes
    )
    return codes


def recovery_digest(code: str) -> str:
    normalized = code.replace("-", "").replace(" ", "").strip().lower()
    return hashlib.sha256(normalized.encode()).hexdigest()


def totp_confirm(
    *, user: User, code: str, request: HttpRequest | None = None, device_id: int | None = None
) -> list[str]:
    """Confirm the pending authenticator with a code from it; returns the new recovery codes
    (shown once: only their digests are kept). ``device_id``: the set-up the page's form confirms
    (None: a post without it, an older page). A second post of that form after the first one
    confirmed it (a second click while the first answer was on its way) raises ``already_on``: the
    codes were on the first answer, and are never made or shown again here."""
    with transaction.atomic():
        _asked_by_an_open_session(user, request)
        device = TotpDevice.objects.select_for_update().filter(user=user, confirmed=False).first()
        if device is None:
            # One authenticator per person (totpdevice_one_per_user), so a set-up that is this
            # person's and confirmed is the one the form began: this post is its second.
            if (
                device_id is not None
                and TotpDevice.objects.filter(user=user, pk=device_id, confirmed=True).exists()
            ):
                raise TwoFactorError("already_on", _("Two-factor sign-in is on."))
            raise TwoFactorError("no_pending", _("Start again: there is no set-up in progress."))
        if not _check_totp(device, code):
            raise TwoFactorError(
                "wrong_code", _("That code is not right. Enter the 6 digits the app shows now.")
            )
        TotpDevice.objects.filter(pk=device.pk).update(confirmed=True)
        codes = _new_recovery_codes(user)
        signin_audit(
            action="signin.two_factor_enrolled", user=user, request=request, data={"factor": "totp"}
        )
    return codes


def recovery_codes_regenerate(*, user: User, request: HttpRequest | None = None) -> list[str]:
    with transaction.atomic():
        _asked_by_an_open_session(user, request)
        if not TotpDevice.objects.filter(user=user, confirmed=True).exists():
            raise TwoFactorError("not_enrolled", _("Set up an authenticator app first."))
        codes = _new_recovery_codes(user)
        signin_audit(action="signin.recovery_codes_renewed", user=user, request=request)
    return codes


def _recovery_locked_until(device: TotpDevice) -> datetime | None:
    """When the back-off on recovery codes of this (locked) device ends; None: not waiting."""
    count, last = device.recovery_failure_count, device.recovery_failed_at
    if not count or last is None:
        return None
    cap = RECOVERY_CODE_MAX_WAIT.total_seconds()
    # The exponent is bounded before it is raised: the count has no end of its own.
    wait = min(device.get_throttle_factor() * 2 ** min(count - 1, 32), cap)
    until = last + timedelta(seconds=wait)
    # The clock of django-otp's back-off on the same row (the web process's).
    return until if timezone.now() < until else None


def second_step_back_off_end(*, user: User) -> bool:
    """End the back-offs on ``user``'s authenticator codes and recovery codes, in the caller's
    transaction, when their password changes (``tenants.passwords``). Whoever failed the second
    step on purpose held the old password: they no longer reach that step, and the person's own
    app works again at once instead of after the hours the wrong codes added up to. Returns
    whether a back-off was running (for the password change's audit row)."""
    return bool(
        TotpDevice.objects.filter(user=user)
        .exclude(throttling_failure_count=0, recovery_failure_count=0)
        .update(
            throttling_failure_count=0,
            throttling_failure_timestamp=None,
            recovery_failure_count=0,
            recovery_failed_at=None,
        )
    )


def _recovery_attempt_recorded(device: TotpDevice, *, right: bool) -> None:
    """A recovery code tried on a locked device: a wrong one lengthens its back-off, a right one
    ends it. The back-off on the 6 digits is left as it is either way."""
    if right and not device.recovery_failure_count:
        return
    device.recovery_failure_count = 0 if right else device.recovery_failure_count + 1
    device.recovery_failed_at = None if right else timezone.now()
    device.save(update_fields=["recovery_failure_count", "recovery_failed_at"])


def _wait_words(until: datetime | None) -> str:
    """How long until ``until``, as a person reads it ("59 minutes", "20 seconds")."""
    seconds = math.ceil((until - timezone.now()).total_seconds()) if until is not None else 1
    if until is None or seconds < 60:
        seconds = max(seconds, 1)
        return ngettext("%(count)d second", "%(count)d seconds", seconds) % {"count": seconds}
    return timeuntil(until)


def _app_throttled(user: User, wait: str) -> str:
    """The refusal of an app code while the back-off holds, naming the ways in the person still
    has: offered a recovery code with every one used, or a passkey they never added, they
    looked for what they lacked."""
    codes = RecoveryCode.objects.filter(user=user, used_at__isnull=True).exists()
    passkey = Passkey.objects.filter(user=user).exists()
    if codes and passkey:
        text = _(
            "Too many wrong codes from the app: try again in %(wait)s, or use a recovery code "
            "or a passkey."
        )
    elif codes:
        text = _(
            "Too many wrong codes from the app: try again in %(wait)s, or use a recovery code."
        )
    elif passkey:
        text = _("Too many wrong codes from the app: try again in %(wait)s, or use a passkey.")
    else:
        text = _("Too many wrong codes from the app: try again in %(wait)s.")
    return text % {"wait": wait}


def second_factor_verify(
    *,
    user: User,
    code: str,
    request: HttpRequest | None = None,
    verified_action: str = "signin.second_factor_verified",
) -> str:
    """Check a code typed at sign-in, or when a signed-in person confirms it is them
    (tenants.sudo, whose ``verified_action`` names the audit row): a current authenticator code
    (once) or an unused recovery code (once). Returns the factor used; raises TwoFactorError
    otherwise."""
    code = code.strip()
    with transaction.atomic():
        device = TotpDevice.objects.select_for_update().filter(user=user, confirmed=True).first()
        factor = ""
        if device is not None and _ascii_digits(code.replace(" ", "")):
            # The back-off on the 6 digits is the account's, whoever types them: a limit per
            # client would let many clients guess on. It holds for the real person too; a
            # recovery code or a passkey, which cannot be guessed, still signs them in.
            allowed, details = device.verify_is_allowed()
            if not allowed:
                raise TwoFactorError(
                    "throttled",
                    _app_throttled(user, _wait_words((details or {}).get("locked_until"))),
                )
            if _check_totp(device, code):
                factor = "totp"
        elif device is not None and code:
            if until := _recovery_locked_until(device):
                raise TwoFactorError(
                    "throttled",
                    _("Too many wrong recovery codes: try again in %(wait)s.")
                    % {"wait": _wait_words(until)},
                )
            used = RecoveryCode.objects.filter(
                user=user, digest=recovery_digest(code), used_at__isnull=True
            ).update(used_at=Now())
            factor = "recovery_code" if used else ""
            _recovery_attempt_recorded(device, right=bool(used))
    if not factor:
        signin_audit(action="signin.second_factor_failed", user=user, request=request)
        raise TwoFactorError(
            "wrong_code",
            _("That code is not right, or it was already used. Try the code the app shows now."),
        )
    left = RecoveryCode.objects.filter(user=user, used_at__isnull=True).count()
    signin_audit(
        action=verified_action,
        user=user,
        request=request,
        data={"factor": factor, "recovery_codes_left": left},
    )
    return factor


def two_factor_remove(
    *, user: User, actor: User | None, request: HttpRequest | None = None, reason: str = "removed"
) -> None:
    """Remove the authenticator, recovery codes and passkeys of ``user`` (by the person, an
    admin's reset when the device was lost, or an operator's: ``actor`` None). ``request``: the
    person's own session asking, which must still be open; the resets pass none."""
    with transaction.atomic():
        _asked_by_an_open_session(user, request)
        TotpDevice.objects.filter(user=user).delete()
        RecoveryCode.objects.filter(user=user).delete()
        passkeys = Passkey.objects.filter(user=user).delete()[0]
        signin_audit(
            action=f"signin.two_factor_{reason}",
            user=user,
            actor=actor,
            request=request,
            data={"passkeys_removed": passkeys},
        )


def factors_held(user: User) -> bool:
    """Whether ``user`` holds anything a reset removes: an authenticator (set up, or begun: its
    seed was shown), recovery codes or a passkey."""
    return (
        User.objects.filter(pk=user.pk)
        .filter(
            Exists(TotpDevice.objects.filter(user=OuterRef("pk")))
            | Exists(RecoveryCode.objects.filter(user=OuterRef("pk")))
            | Exists(Passkey.objects.filter(user=OuterRef("pk")))
        )
        .exists()
    )


def factor_state(user: User) -> tuple[bool, bool]:
    """(has a second factor, must have one because a tenant of theirs requires it), one query."""
    row = (
        User.objects.filter(pk=user.pk)
        .annotate(
            has_totp=Exists(TotpDevice.objects.filter(user=OuterRef("pk"), confirmed=True)),
            has_passkey=Exists(Passkey.objects.filter(user=OuterRef("pk"))),
            required=Exists(
                Membership.objects.filter(
                    user=OuterRef("pk"), is_active=True, tenant__require_two_factor=True
                )
            ),
        )
        .values_list("has_totp", "has_passkey", "required")
        .first()
    )
    if row is None:
        return False, False
    has_totp, has_passkey, required = row
    return bool(has_totp or has_passkey), bool(required)


def recovery_codes_left(user: User) -> int:
    return RecoveryCode.objects.filter(user=user, used_at__isnull=True).count()


def totp_reseal_all() -> int:
    """Re-seal every authenticator seed under the ring's first key (``reencrypt_secrets``);
    call inside the command's transaction. Returns how many changed."""
    changed = 0
    for device in TotpDevice.objects.select_for_update():
        if crypto.needs_reseal(device.sealed_key):
            seed = crypto.unseal(device.sealed_key, aad=_aad(device.user_id))
            device.sealed_key = crypto.seal(seed, aad=_aad(device.user_id))
            device.save(update_fields=["sealed_key"])
            changed += 1
    return changed
