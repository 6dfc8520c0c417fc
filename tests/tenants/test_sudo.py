"""Sudo mode (tenants.sudo): a session whose last proof of who it is is older than SUDO_SECONDS
(a stolen cookie, a browser left open) cannot turn off two-factor sign-in, add a passkey, make new
recovery codes or end the person's other sessions; it is sent to "Confirm it is you", where wrong
passwords count as at sign-in, and the right proof lets the person do it again."""

import time
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pyotp
import pytest
from axes.models import AccessAttempt
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tenants.models import AuditEvent, Passkey, RecoveryCode, TotpDevice, UserSession
from tenants.user_sessions import PROVEN_AT_KEY
from tests.tenants.test_passkeys import SoftPasskey, post_json
from tests.tenants.test_sso_account_guard import provider_of
from tests.tenants.test_sso_callback import FLOW_KEY, Provider
from tests.tenants.test_two_factor import enrol, next_step_code

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_throttle_delay(settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


def sign_in(user, password, ip="10.2.0.1"):
    client = Client(REMOTE_ADDR=ip)
    response = client.post(reverse("login"), {"username": user.email, "password": password})
    assert response.status_code == 302
    return client


def age_proof(client, settings):
    """The session's last proof, one second older than SUDO_SECONDS."""
    session = client.session
    proven = timezone.now() - timedelta(seconds=settings.SUDO_SECONDS + 1)
    session[PROVEN_AT_KEY] = proven.isoformat()
    session.save()


def sent_to_confirm(response, back):
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert location.path == reverse("account_confirm")
    assert parse_qs(location.query)["next"] == [back]
    return response["Location"]


@pytest.fixture
def enrolled_session(tenant_a, member_of, password):
    """(user, client, secret): a person who set up an authenticator app in this session."""
    user = member_of(tenant_a).user
    client = sign_in(user, password)
    secret, _codes = enrol(client)
    return user, client, secret


def test_a_stale_session_cannot_turn_off_two_factor_until_the_password_is_proven(
    enrolled_session, password, settings
):
    user, client, _secret = enrolled_session
    age_proof(client, settings)

    refused = client.post(reverse("two_factor_remove"))

    confirm = sent_to_confirm(refused, reverse("account_security"))
    assert TotpDevice.objects.filter(user=user, confirmed=True).exists()
    page = client.get(confirm)
    assert page.status_code == 200
    assert "Nothing was changed: confirm it is you, then do it again." in page.content.decode()

    wrong = client.post(confirm, {"password": "not-the-password"})
    assert wrong.status_code == 400
    assert AccessAttempt.objects.get(username=user.email).failures_since_start == 1
    assert AuditEvent.objects.filter(action="signin.failed", object_id=str(user.pk)).exists()
    assert TotpDevice.objects.filter(user=user).exists()

    right = client.post(confirm, {"password": password})
    assert right.status_code == 302 and right["Location"] == reverse("account_security")
    assert AuditEvent.objects.filter(
        action="signin.reauthenticated", data__method="password"
    ).exists()
    assert client.post(reverse("two_factor_remove")).status_code == 302
    assert not TotpDevice.objects.filter(user=user).exists()


def test_an_htmx_request_is_told_to_open_the_confirm_page_not_to_swap_it_in(
    enrolled_session, settings
):
    """htmx follows a 302 inside its request and would put the whole confirm page where the
    fragment was; HX-Redirect has the browser open it."""
    user, client, _secret = enrolled_session
    digests = set(RecoveryCode.objects.filter(user=user).values_list("digest", flat=True))
    age_proof(client, settings)

    held = client.post(reverse("recovery_codes_renew"), headers={"HX-Request": "true"})

    assert held.status_code == 200 and not held.has_header("Location")
    location = urlsplit(held["HX-Redirect"])
    assert location.path == reverse("account_confirm")
    assert parse_qs(location.query)["next"] == [reverse("account_security")]
    assert set(RecoveryCode.objects.filter(user=user).values_list("digest", flat=True)) == digests


def test_wrong_passwords_on_the_confirm_page_lock_out_as_at_sign_in(
    enrolled_session, password, settings
):
    settings.AXES_FAILURE_LIMIT = 2
    _user, client, _secret = enrolled_session
    age_proof(client, settings)
    confirm = reverse("account_confirm")

    answers = [client.post(confirm, {"password": "guess"}).status_code for _ in range(2)]
    locked = client.post(confirm, {"password": password})

    assert answers == [400, 429]
    assert locked.status_code == 429
    assert client.post(reverse("two_factor_remove")).status_code == 302
    assert TotpDevice.objects.exists()


def test_a_stale_session_cannot_renew_recovery_codes_or_add_a_passkey(enrolled_session, settings):
    user, client, _secret = enrolled_session
    digests = set(RecoveryCode.objects.filter(user=user).values_list("digest", flat=True))
    challenge = client.post(reverse("passkey_register_options"))
    assert challenge.status_code == 200
    age_proof(client, settings)

    renew = client.post(reverse("recovery_codes_renew"))
    options = client.post(reverse("passkey_register_options"))
    register = post_json(client, reverse("passkey_register"), {"credential": {"rawId": "AAAA"}})

    sent_to_confirm(renew, reverse("account_security"))
    assert set(RecoveryCode.objects.filter(user=user).values_list("digest", flat=True)) == digests
    assert options.status_code == 403 and register.status_code == 403
    assert register.json()["error"] == "confirm"
    assert register.json()["redirect"] == (
        reverse("account_confirm") + "?next=" + reverse("account_security").replace("/", "%2F")
    )
    assert not Passkey.objects.filter(user=user).exists()


def test_an_authenticator_code_confirms_once(enrolled_session, settings):
    _user, client, secret = enrolled_session
    age_proof(client, settings)
    code = next_step_code(secret)

    first = client.post(reverse("account_confirm"), {"code": code, "next": "/account/sessions/"})
    age_proof(client, settings)
    again = client.post(reverse("account_confirm"), {"code": code})

    assert first.status_code == 302 and first["Location"] == "/account/sessions/"
    assert again.status_code == 400
    assert AuditEvent.objects.filter(action="signin.reauthenticated", data__factor="totp").exists()
    assert AuditEvent.objects.filter(action="signin.second_factor_failed").exists()


def test_a_passkey_confirms_it_is_you(tenant_a, member_of, password, settings):
    user = member_of(tenant_a).user
    passkey = SoftPasskey(user)
    client = sign_in(user, password)
    options = client.post(reverse("passkey_signin_options")).json()
    credential = passkey.assert_(
        challenge=options["challenge"], origin="http://testserver", rp_id=options["rpId"]
    )
    signed_in = post_json(client, reverse("passkey_signin"), {"credential": credential})
    assert signed_in.status_code == 200
    age_proof(client, settings)
    own = Passkey.objects.get(user=user)
    assert client.post(reverse("passkey_remove", args=[own.pk])).status_code == 302
    assert Passkey.objects.filter(user=user).exists()

    options = client.post(reverse("passkey_signin_options")).json()
    credential = passkey.assert_(
        challenge=options["challenge"], origin="http://testserver", rp_id=options["rpId"]
    )
    confirmed = post_json(
        client, reverse("passkey_signin") + "?next=/account/security/", {"credential": credential}
    )

    assert confirmed.json() == {"redirect": "/account/security/"}
    assert AuditEvent.objects.filter(
        action="signin.reauthenticated", data__method="passkey"
    ).exists()
    assert client.post(reverse("passkey_remove", args=[own.pk])).status_code == 302
    assert not Passkey.objects.filter(user=user).exists()


def test_a_fresh_sign_in_ends_another_session_without_asking_a_stale_one_must_confirm(
    tenant_a, member_of, password, settings
):
    user = member_of(tenant_a).user
    laptop = sign_in(user, password, "10.2.0.1")
    sign_in(user, password, "10.2.0.2")
    sign_in(user, password, "10.2.0.3")
    phone, tablet = UserSession.objects.filter(user=user).exclude(ip_address="10.2.0.1")

    assert laptop.post(reverse("session_end", args=[phone.pk])).status_code == 302
    age_proof(laptop, settings)
    held = laptop.post(reverse("session_end", args=[tablet.pk]))

    assert not Session.objects.filter(session_key=phone.session_key).exists()
    sent_to_confirm(held, reverse("sessions"))
    assert Session.objects.filter(session_key=tablet.session_key).exists()


@pytest.mark.parametrize(
    "given", ["https://evil.example/", "//evil.example/account/", "/\\evil.example", "account/"]
)
def test_the_confirm_page_sends_on_only_within_the_site(enrolled_session, password, given):
    _user, client, _secret = enrolled_session

    response = client.post(reverse("account_confirm"), {"password": password, "next": given})

    assert response.status_code == 302
    assert response["Location"] == reverse("account_security")


def test_a_person_who_must_enrol_does_so_right_after_signing_in_and_confirms_when_slow(
    tenant_a, member_of, password, settings
):
    tenant_a.require_two_factor = True
    tenant_a.save(update_fields=["require_two_factor"])
    user = member_of(tenant_a).user
    client = sign_in(user, password)
    assert client.post(reverse("totp_enrol")).status_code == 200
    age_proof(client, settings)

    confirm = sent_to_confirm(client.get(reverse("totp_enrol")), reverse("totp_enrol"))
    assert client.get(confirm).status_code == 200
    back = client.post(confirm, {"password": password})
    assert back["Location"] == reverse("totp_enrol")
    secret = client.get(back["Location"]).context["secret"]
    done = client.post(reverse("totp_confirm"), {"code": pyotp.TOTP(secret).now()})

    assert done.status_code == 200
    assert TotpDevice.objects.get(user=user).confirmed


@pytest.fixture
def idp():
    served = Provider()
    yield served
    served.server.shutdown()


def sso_sign_in(client, idp, start_url, **claims):
    went = client.get(start_url)
    flow = client.session[FLOW_KEY]
    idp.id_token = idp.sign(flow["nonce"], sub="carol", email="carol@acme.test", **claims)
    back = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    back.went = went
    return back


def test_a_single_sign_on_session_confirms_through_its_provider(
    client, idp, tenant_a, member_of, settings
):
    provider_of(tenant_a, member_of, idp, domains=["acme.test"])
    start = reverse("sso_start", args=[tenant_a.slug])
    sso_sign_in(Client(REMOTE_ADDR="10.2.0.9"), idp, start)
    phone = UserSession.objects.get()
    sso_sign_in(client, idp, start)
    age_proof(client, settings)

    held = client.post(reverse("session_end", args=[phone.pk]))
    page = client.get(sent_to_confirm(held, reverse("sessions"))).content.decode()
    link = f"{start}?next=%2Faccount%2Fsessions%2F"
    back = sso_sign_in(client, idp, link, auth_time=int(time.time()))
    ended = client.post(reverse("session_end", args=[phone.pk]))

    assert link in page.replace("&amp;", "&")
    # The provider is asked for a new sign-in, not its session's word.
    assert "prompt=login" in back.went["Location"]
    assert "max_age=0" in back.went["Location"]
    assert back["Location"] == reverse("sessions")
    assert ended.status_code == 302
    assert not Session.objects.filter(session_key=phone.session_key).exists()


@pytest.mark.parametrize("auth_time", [None, "old"])
def test_a_provider_that_rode_on_its_own_session_is_no_proof(
    client, idp, tenant_a, member_of, settings, auth_time
):
    """Asked for a new sign-in (max_age=0), a provider that still answered from its own session
    (no auth_time, or one from before the request) proves nothing about who is at the keyboard."""
    provider_of(tenant_a, member_of, idp, domains=["acme.test"])
    start = reverse("sso_start", args=[tenant_a.slug])
    sso_sign_in(Client(REMOTE_ADDR="10.2.0.9"), idp, start)
    phone = UserSession.objects.get()
    sso_sign_in(client, idp, start)
    age_proof(client, settings)

    claims = {} if auth_time is None else {"auth_time": int(time.time()) - 3600}
    sso_sign_in(client, idp, f"{start}?next=%2Faccount%2Fsessions%2F", **claims)
    held = client.post(reverse("session_end", args=[phone.pk]))

    assert sent_to_confirm(held, reverse("sessions"))
    assert Session.objects.filter(session_key=phone.session_key).exists()


def test_another_tenants_provider_is_no_proof_for_a_session_it_did_not_open(
    client, idp, tenant_a, tenant_b, member_of, settings
):
    """B's admin runs B's provider and can sign Carol in there at will: with a stolen cookie of
    her session from A's provider, a fresh sign-in at B's was a proof for all that session opens
    (A's guarded actions, her other sessions)."""
    provider_of(tenant_a, member_of, idp, domains=["acme.test"])
    b_idp = Provider()
    try:
        provider_of(tenant_b, member_of, b_idp, domains=["acme.test"])
        start_a = reverse("sso_start", args=[tenant_a.slug])
        sso_sign_in(Client(REMOTE_ADDR="10.2.0.9"), idp, start_a)
        phone = UserSession.objects.get()
        member_of(tenant_b, "viewer", user=phone.user)
        sso_sign_in(client, idp, start_a)
        age_proof(client, settings)

        start_b = reverse("sso_start", args=[tenant_b.slug])
        sso_sign_in(
            client, b_idp, f"{start_b}?next=%2Faccount%2Fsessions%2F", auth_time=int(time.time())
        )
        held = client.post(reverse("session_end", args=[phone.pk]))
    finally:
        b_idp.server.shutdown()

    assert tenant_b.pk in client.session["cs_sso_tenants"]
    assert sent_to_confirm(held, reverse("sessions"))
    assert Session.objects.filter(session_key=phone.session_key).exists()
