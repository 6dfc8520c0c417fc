"""Passkeys (WebAuthn) with py_webauthn: registering one, and signing in with one, either as the
second factor after a password or on its own (a discoverable credential, verified by the
device's fingerprint, face or PIN, is two factors by itself).

A challenge is made per ceremony, kept in the session and used once. The relying party is this
site: ``WEBAUTHN_RP_ID`` (the host name, default the request's host, which ALLOWED_HOSTS already
vets) and the request's origin. User verification is required both ways.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _
from webauthn import (
    base64url_to_bytes,
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from common.text import unsafe_in_name
from tenants.models import Passkey, User
from tenants.signin_audit import signin_audit
from tenants.user_sessions import SESSION_ENDED, session_ended_message, session_still_open

# What py_webauthn raises for a response it cannot read or does not accept (a missing id or
# attestationObject, a list where an object belongs, a userHandle that is no string...): its own
# exceptions, and the built-in ones from parsing before it checks the structure.
MALFORMED = (WebAuthnException, ValueError, KeyError, TypeError, AttributeError)

REGISTER_KEY = "cs_passkey_register"
SIGNIN_KEY = "cs_passkey_signin"
MAX_PASSKEYS = 10


class PasskeyError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class RelyingParty:
    rp_id: str
    origin: str


def _asked_by_an_open_session(user: User, request: HttpRequest) -> None:
    """First in every write of a passkey: under the person's row lock, refuse (changing
    nothing) a request whose session was ended while it was on its way, by a reset of the
    person's factors above all (``tenants.user_sessions.session_still_open``)."""
    if not session_still_open(user=user, request=request):
        raise PasskeyError(SESSION_ENDED, session_ended_message())


def relying_party(request: HttpRequest) -> RelyingParty:
    host = request.get_host().rsplit(":", 1)[0] if "]" not in request.get_host() else ""
    scheme = "https" if request.is_secure() else "http"
    return RelyingParty(
        rp_id=getattr(settings, "WEBAUTHN_RP_ID", "") or host,
        origin=f"{scheme}://{request.get_host()}",
    )


def _descriptors(user: User) -> list[PublicKeyCredentialDescriptor]:
    return [
        PublicKeyCredentialDescriptor(
            id=bytes(key.credential_id),
            transports=[AuthenticatorTransport(t) for t in key.transports],
        )
        for key in Passkey.objects.filter(user=user)
    ]


def registration_options(request: HttpRequest, user: User) -> str:
    rp = relying_party(request)
    options = generate_registration_options(
        rp_id=rp.rp_id,
        rp_name="Countersign",
        user_id=f"countersign-user-{user.pk}".encode(),
        user_name=user.email,
        user_display_name=user.display_name,
        exclude_credentials=_descriptors(user),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
    )
    request.session[REGISTER_KEY] = options.challenge.hex()
    return options_to_json(options)


def passkey_register(*, request: HttpRequest, user: User, credential: dict, name: str) -> Passkey:
    challenge = request.session.pop(REGISTER_KEY, None)
    if not challenge:
        raise PasskeyError("no_challenge", _("Start again: this set-up has expired."))
    rp = relying_party(request)
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=bytes.fromhex(challenge),
            expected_rp_id=rp.rp_id,
            expected_origin=rp.origin,
            require_user_verification=True,
        )
    except MALFORMED:
        raise PasskeyError("invalid", _("The passkey could not be verified.")) from None
    response = credential.get("response")
    listed = response.get("transports") if isinstance(response, dict) else None
    transports = [t for t in listed if isinstance(t, str)] if isinstance(listed, list) else []
    with transaction.atomic():
        _asked_by_an_open_session(user, request)
        if Passkey.objects.filter(user=user).count() >= MAX_PASSKEYS:
            raise PasskeyError("too_many", _("You have the most passkeys allowed; remove one."))
        if Passkey.objects.filter(credential_id=verified.credential_id).exists():
            raise PasskeyError("duplicate", _("This passkey is already registered."))
        passkey = Passkey.objects.create(
            user=user,
            name=(name.strip() or _("Passkey"))[:64],
            credential_id=verified.credential_id,
            public_key=verified.credential_public_key,
            sign_count=verified.sign_count,
            transports=[t for t in transports if t in AuthenticatorTransport._value2member_map_],
        )
        signin_audit(
            action="signin.passkey_added", user=user, request=request, data={"name": passkey.name}
        )
    return passkey


def authentication_options(request: HttpRequest, user: User | None) -> str:
    """Options for a sign-in: for ``user``'s passkeys (the second-factor step), or for any
    discoverable passkey (signing in without a password)."""
    rp = relying_party(request)
    options = generate_authentication_options(
        rp_id=rp.rp_id,
        allow_credentials=_descriptors(user) if user is not None else None,
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    request.session[SIGNIN_KEY] = options.challenge.hex()
    return options_to_json(options)


def passkey_authenticate(*, request: HttpRequest, credential: dict, user: User | None) -> User:
    """The person a passkey assertion proves; ``user`` set means it must be theirs."""
    challenge = request.session.pop(SIGNIN_KEY, None)
    if not challenge:
        raise PasskeyError("no_challenge", _("Start again: this sign-in has expired."))
    try:
        raw_id = base64url_to_bytes(str(credential["rawId"]))
    except (KeyError, ValueError, TypeError):
        raise PasskeyError("invalid", _("The passkey could not be verified.")) from None
    rp = relying_party(request)
    with transaction.atomic():
        passkey = (
            Passkey.objects.select_for_update()
            .select_related("user")
            .filter(credential_id=raw_id, user__is_active=True)
            .first()
        )
        if passkey is None or (user is not None and passkey.user_id != user.pk):
            raise PasskeyError("unknown", _("This passkey is not registered here."))
        try:
            verified = verify_authentication_response(
                credential=credential,
                expected_challenge=bytes.fromhex(challenge),
                expected_rp_id=rp.rp_id,
                expected_origin=rp.origin,
                credential_public_key=bytes(passkey.public_key),
                credential_current_sign_count=passkey.sign_count,
                require_user_verification=True,
            )
        except MALFORMED:
            raise PasskeyError("invalid", _("The passkey could not be verified.")) from None
        Passkey.objects.filter(pk=passkey.pk).update(
            sign_count=verified.new_sign_count, last_used_at=timezone.now()
        )
    return passkey.user


def passkey_remove(*, request: HttpRequest, user: User, passkey_id: int) -> None:
    with transaction.atomic():
        _asked_by_an_open_session(user, request)
        deleted, _rows = Passkey.objects.filter(pk=passkey_id, user=user).delete()
        if not deleted:
            raise PasskeyError("not_found", _("No such passkey."))
        signin_audit(action="signin.passkey_removed", user=user, request=request)


def parse_credential(body: bytes) -> tuple[dict, str]:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        raise PasskeyError("invalid", _("The passkey could not be verified.")) from None
    credential = data.get("credential") if isinstance(data, dict) else None
    if not isinstance(credential, dict):
        raise PasskeyError("invalid", _("The passkey could not be verified."))
    name = str(data.get("name", ""))[:64]
    if unsafe := unsafe_in_name(name):
        raise PasskeyError(
            "invalid_name",
            _("A passkey name cannot hold the control character %(character)s.")
            % {"character": unsafe},
        )
    return credential, name
