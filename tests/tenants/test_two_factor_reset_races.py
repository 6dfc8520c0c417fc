"""A second factor written by a request already on its way when its session was ended: by an
operator's reset (manage.py two_factor_reset), a tenant admin's reset of the member, a password
change (which signs every other session out), or the person ending that session from another
browser. Found by a probe: a passkey registration waiting on the account's row committed just
after the operator's reset, so whoever the reset was meant to lock out kept a passkey.

The ending is held open on one connection while the request runs on another; the test lets it
commit once the request waits on a lock (an event, not a sleep), the interleaving of a request
that passed the session middleware just before the ending committed."""

import base64
import hashlib
import io
import json
import os
import threading

import cbor2
import pyotp
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client
from django.urls import reverse

from tenants import passwords, signin_policy, two_factor, user_sessions
from tenants.models import AuditEvent, Passkey, RecoveryCode, TotpDevice, User, UserSession
from tests.intents.helpers import blocked_on_a_lock, in_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_throttle_delay(settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


def b64u(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def attestation(options: dict) -> dict:
    """A new passkey for these registration options, answered as a platform authenticator
    answers (attestation "none", the person present and verified)."""
    point = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()
    cose = {1: 2, 3: -7, -1: 1, -2: point.x.to_bytes(32, "big"), -3: point.y.to_bytes(32, "big")}
    credential_id = os.urandom(16)
    authenticator_data = (
        hashlib.sha256(options["rp"]["id"].encode()).digest()
        + bytes([0x01 | 0x04 | 0x40])  # user present, user verified, credential data attached
        + bytes(4)
        + bytes(16)
        + len(credential_id).to_bytes(2, "big")
        + credential_id
        + cbor2.dumps(cose)
    )
    client_data = json.dumps(
        {
            "type": "webauthn.create",
            "challenge": options["challenge"],
            "origin": "http://testserver",
        }
    ).encode()
    attestation_object = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": authenticator_data})
    return {
        "id": b64u(credential_id),
        "rawId": b64u(credential_id),
        "type": "public-key",
        "response": {
            "clientDataJSON": b64u(client_data),
            "attestationObject": b64u(attestation_object),
            "transports": ["internal"],
        },
    }


def _browser(user: User, factor: str) -> Client:
    """A browser signed in as ``user`` that proved ``factor`` just now."""
    browser = Client(raise_request_exception=False)
    browser.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    session = browser.session
    session[user_sessions.FACTOR_KEY] = factor
    session.save()
    return browser


def _with_a_passkey(user: User) -> Client:
    Passkey.objects.create(user=user, name="Lost", credential_id=os.urandom(16), public_key=b"pk")
    return _browser(user, "passkey")


def _with_an_authenticator(user: User) -> Client:
    device = two_factor.totp_begin(user=user)
    two_factor.totp_confirm(user=user, code=pyotp.TOTP(two_factor.totp_secret(device)).now())
    return _browser(user, "totp")


def _register_a_passkey(user: User):
    browser = _with_a_passkey(user)
    credential = attestation(browser.post(reverse("passkey_register_options")).json())
    body = json.dumps({"credential": credential, "name": "New"})
    return browser, lambda: browser.post(
        reverse("passkey_register"), data=body, content_type="application/json"
    )


def _start_an_authenticator(user: User):
    browser = _with_a_passkey(user)
    return browser, lambda: browser.post(reverse("totp_enrol"))


def _confirm_an_authenticator(user: User):
    browser = _with_a_passkey(user)
    secret = browser.post(reverse("totp_enrol")).context["secret"]
    code = pyotp.TOTP(secret).now()
    return browser, lambda: browser.post(reverse("totp_confirm"), {"code": code})


def _renew_recovery_codes(user: User):
    browser = _with_an_authenticator(user)
    return browser, lambda: browser.post(reverse("recovery_codes_renew"))


def _written(action: str, user: User, codes_before: set[str]) -> bool:
    """Whether ``action`` left its write behind (the row, or its audit row)."""
    return {
        "passkey_register": Passkey.objects.filter(user=user, name="New").exists()
        or AuditEvent.objects.filter(action="signin.passkey_added").exists(),
        # The person had no authenticator: a seed now is one the asking session was shown.
        "totp_begin": TotpDevice.objects.filter(user=user).exists(),
        "totp_confirm": TotpDevice.objects.filter(user=user, confirmed=True).exists()
        or AuditEvent.objects.filter(action="signin.two_factor_enrolled").exists(),
        "recovery_codes_renew": RecoveryCode.objects.filter(user=user)
        .exclude(digest__in=codes_before)
        .exists()
        or AuditEvent.objects.filter(action="signin.recovery_codes_renewed").exists(),
    }[action]


ACTIONS = {
    "passkey_register": _register_a_passkey,
    "totp_begin": _start_an_authenticator,
    "totp_confirm": _confirm_an_authenticator,
    "recovery_codes_renew": _renew_recovery_codes,
}


def _operator_reset(*, membership, admin, session_key):
    return lambda: signin_policy.account_reset_two_factor(email=membership.user.email)


def _admin_reset(*, membership, admin, session_key):
    return lambda: signin_policy.member_reset_two_factor(
        tenant=membership.tenant, membership_id=membership.pk, actor=admin
    )


def _password_changed(*, membership, admin, session_key):
    return lambda: passwords.password_change(
        user=User.objects.get(pk=membership.user_id),
        password="a-new-passphrase-for-this-test",
        keep_session_key=None,
    )


def _session_ended_elsewhere(*, membership, admin, session_key):
    return lambda: user_sessions.session_end(
        user=membership.user,
        session_id=UserSession.objects.get(session_key=session_key).pk,
        current_key="the-other-browser",
    )


ENDINGS = {
    "operator_reset": _operator_reset,
    "admin_reset": _admin_reset,
    "password_changed": _password_changed,
    "session_ended_elsewhere": _session_ended_elsewhere,
}


def _ended_while_on_its_way(end, ask) -> tuple[object, object, bool]:
    """Run ``end`` and hold its transaction open; run ``ask`` meanwhile; let ``end`` commit once
    ``ask`` waits on a lock (or after 10 s). Returns both outcomes and whether ``ask`` waited."""
    ended, release = threading.Event(), threading.Event()

    def end_and_hold():
        with transaction.atomic():
            result = end()
            ended.set()
            release.wait(20)
        return result

    ending: list = []
    asking: list = []
    holder = in_thread(end_and_hold, ending)
    assert ended.wait(10)
    request = in_thread(ask, asking)
    waited = blocked_on_a_lock()
    release.set()
    for thread in (holder, request):
        thread.join(20)
    return ending[0], asking[0], waited


def _sends_to(response) -> str:
    """Where an answer sends the browser: a redirect, or the page a script's refusal names."""
    if response.get("Content-Type", "").startswith("application/json"):
        return response.json().get("redirect", "")
    return response.get("Location", "")


@pytest.mark.parametrize("ending", sorted(ENDINGS))
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_factor_asked_for_by_a_session_ended_on_the_way_is_refused(
    tenant_a, member_of, action, ending
):
    membership = member_of(tenant_a, "approver")
    admin = member_of(tenant_a, "admin").user
    browser, ask = ACTIONS[action](membership.user)
    codes_before = set(
        RecoveryCode.objects.filter(user=membership.user).values_list("digest", flat=True)
    )
    end = ENDINGS[ending](
        membership=membership, admin=admin, session_key=browser.session.session_key
    )

    done, response, waited = _ended_while_on_its_way(end, ask)

    assert not isinstance(done, Exception), done
    assert not _written(action, membership.user, codes_before)
    assert _sends_to(response).startswith(reverse("login"))
    assert waited
    later = browser.get(reverse("account_security"))
    assert later.status_code == 302 and later["Location"].startswith(reverse("login"))


def test_a_second_operator_reset_finds_nothing_to_reset_and_changes_nothing(tenant_a, member_of):
    user = member_of(tenant_a, "approver").user
    _with_an_authenticator(user)
    first = io.StringIO()
    call_command("two_factor_reset", user.email, stdout=first)
    # The person signs in again (their password alone) before the operator's second run.
    again = Client()
    again.force_login(user, backend="django.contrib.auth.backends.ModelBackend")

    with pytest.raises(CommandError) as twice:
        call_command("two_factor_reset", user.email, stdout=io.StringIO())

    assert "ended 1 session(s)" in first.getvalue()
    assert str(twice.value) == f"{user.email} has no second factor to reset; nothing was changed."
    assert AuditEvent.objects.filter(action="signin.two_factor_operator_reset").count() == 1
    assert again.get(reverse("account_security")).status_code == 200


def test_an_operator_reset_of_an_authenticator_only_begun_removes_it(tenant_a, member_of):
    """A set-up left half done holds a seed someone was shown: there is something to reset."""
    user = member_of(tenant_a, "approver").user
    two_factor.totp_begin(user=user)

    call_command("two_factor_reset", user.email, stdout=io.StringIO())

    assert not TotpDevice.objects.filter(user=user).exists()
    assert AuditEvent.objects.filter(action="signin.two_factor_operator_reset").count() == 1
