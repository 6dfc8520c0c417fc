"""Passkey endpoints refuse what is not a fresh, valid assertion; another person's passkey is
neither usable nor removable. (Registering and signing in for real: the Chromium test with the
virtual authenticator, tests/ui/test_browser_passkeys.py.)"""

import base64
import hashlib
import json
import os

import cbor2
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from django.urls import reverse

from tenants.models import AuditEvent, Passkey, Tenant, UserSession

pytestmark = pytest.mark.django_db


def post_json(client, url, body):
    return client.post(url, data=json.dumps(body), content_type="application/json")


def test_an_assertion_without_a_challenge_of_ours_is_refused(client):
    response = post_json(client, reverse("passkey_signin"), {"credential": {"rawId": "AAAA"}})
    assert response.status_code == 400 and response.json()["error"] == "no_challenge"
    assert "_auth_user_id" not in client.session


def test_garbage_and_unknown_credentials_are_refused_and_audited(client, tenant_a):
    options = client.post(reverse("passkey_signin_options")).json()
    assert options["userVerification"] == "required" and options["allowCredentials"] == []
    garbage = client.post(
        reverse("passkey_signin"), data="not json", content_type="application/json"
    )
    assert garbage.status_code == 400
    client.post(reverse("passkey_signin_options"))
    unknown = post_json(
        client, reverse("passkey_signin"), {"credential": {"rawId": "AAAA", "response": {}}}
    )
    assert unknown.status_code == 400 and unknown.json()["error"] == "unknown"
    # The challenge is spent: the same attempt again finds none.
    again = post_json(client, reverse("passkey_signin"), {"credential": {"rawId": "AAAA"}})
    assert again.json()["error"] == "no_challenge"
    assert AuditEvent.objects.filter(action="signin.passkey_failed").count() == 3


def test_another_persons_passkey_is_not_removable(tenant_a, member_of, signed_in):
    owner = member_of(tenant_a).user
    key = Passkey.objects.create(
        user=owner, name="Owner's", credential_id=b"cred-1", public_key=b"pk"
    )
    other = signed_in(member_of(tenant_a).user)
    assert other.post(reverse("passkey_remove", args=[key.pk])).status_code == 404
    assert Passkey.objects.filter(pk=key.pk).exists()


def test_registration_options_require_user_verification_and_exclude_known_keys(
    tenant_a, member_of, signed_in
):
    user = member_of(tenant_a).user
    Passkey.objects.create(user=user, name="Old", credential_id=b"cred-2", public_key=b"pk")
    client = signed_in(user)
    # Holding a passkey already, this person must use it before anything else.
    assert client.post(reverse("passkey_register_options")).status_code == 403
    session = client.session
    session["cs_factor"] = "passkey"
    session.save()
    options = client.post(reverse("passkey_register_options")).json()
    assert options["rp"]["id"] == "testserver"
    assert options["authenticatorSelection"]["userVerification"] == "required"
    assert options["authenticatorSelection"]["residentKey"] == "required"
    assert [c["id"] for c in options["excludeCredentials"]] == ["Y3JlZC0y"]


def test_deeply_nested_json_is_refused_not_a_500(client, tenant_a, member_of, signed_in):
    client.post(reverse("passkey_signin_options"))
    signin = client.post(
        reverse("passkey_signin"), data=b"[" * 50_000, content_type="application/json"
    )
    person = signed_in(member_of(tenant_a).user)
    person.post(reverse("passkey_register_options"))
    register = person.post(
        reverse("passkey_register"), data=b"[" * 50_000, content_type="application/json"
    )

    assert signin.status_code == 400
    assert register.status_code == 400


@pytest.mark.parametrize("name", ["key\x00", "key \ud800", "\u202egnp.exe", "esc\x1b[31m"])
def test_a_passkey_name_with_a_control_character_is_refused_before_anything_is_stored(
    tenant_a, member_of, signed_in, name
):
    person = signed_in(member_of(tenant_a).user)
    person.post(reverse("passkey_register_options"))

    response = person.post(
        reverse("passkey_register"),
        data=json.dumps({"credential": {"rawId": "AAAA"}, "name": name}),
        content_type="application/json",
    )

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_name"
    assert not Passkey.objects.exists()


def b64u(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class SoftPasskey:
    """A software authenticator at the process edge: an ES256 key pair registered for ``user``
    (public key as COSE), signing assertions exactly as a platform authenticator does, with the
    user present and verified."""

    def __init__(self, user):
        self.key = ec.generate_private_key(ec.SECP256R1())
        point = self.key.public_key().public_numbers()
        cose = {
            1: 2,
            3: -7,
            -1: 1,
            -2: point.x.to_bytes(32, "big"),
            -3: point.y.to_bytes(32, "big"),
        }
        self.credential_id = os.urandom(16)
        self.count = 0
        Passkey.objects.create(
            user=user, name="Soft", credential_id=self.credential_id, public_key=cbor2.dumps(cose)
        )

    def assert_(self, *, challenge: str, origin: str, rp_id: str) -> dict:
        self.count += 1
        client_data = json.dumps(
            {"type": "webauthn.get", "challenge": challenge, "origin": origin}
        ).encode()
        flags = bytes([0x01 | 0x04])  # user present, user verified
        authenticator_data = (
            hashlib.sha256(rp_id.encode()).digest() + flags + self.count.to_bytes(4, "big")
        )
        signature = self.key.sign(
            authenticator_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256())
        )
        return {
            "id": b64u(self.credential_id),
            "rawId": b64u(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64u(client_data),
                "authenticatorData": b64u(authenticator_data),
                "signature": b64u(signature),
            },
        }


@pytest.mark.parametrize(
    ("given", "kept"),
    [("http://testserver/preferences/", "/"), ("/preferences/", "/preferences/")],
    ids=["plain-http", "path"],
)
def test_a_passkey_sign_in_over_https_never_sends_on_over_http(
    client, tenant_a, member_of, given, kept
):
    """Django's own sign-in refuses a plain-http "next" on a secure request (require_https); the
    passkey sign-in handed it to the page's script, which followed it."""
    user = member_of(tenant_a).user
    passkey = SoftPasskey(user)
    options = client.post(reverse("passkey_signin_options"), secure=True).json()
    credential = passkey.assert_(
        challenge=options["challenge"], origin="https://testserver", rp_id=options["rpId"]
    )
    response = client.post(
        reverse("passkey_signin") + "?next=" + given,
        data=json.dumps({"credential": credential}),
        content_type="application/json",
        secure=True,
    )
    assert response.status_code == 200
    assert client.session["_auth_user_id"] == str(user.pk)
    assert response.json()["redirect"] == kept


@pytest.mark.parametrize(
    "given",
    ["/%09//evil.test/", "/%0A//evil.test/", "/%5C%09/evil.test/", "/%00//evil.test/"],
    ids=["tab", "newline", "backslash-tab", "nul"],
)
def test_a_passkey_sign_in_never_hands_the_script_an_address_a_browser_reads_as_another_site(
    client, tenant_a, member_of, given
):
    """Browsers drop tabs and newlines from a URL before reading it (WHATWG URL), and read
    ``///evil.test/`` as the host evil.test; Django's check drops them too, and read "/", a tab,
    "//evil.test/" as a path. A redirect header is safe (Django percent-encodes them), but the
    passkey sign-in hands "next" to the page's script, whose ``location.assign()`` went there."""
    user = member_of(tenant_a).user
    passkey = SoftPasskey(user)
    options = client.post(reverse("passkey_signin_options")).json()
    credential = passkey.assert_(
        challenge=options["challenge"], origin="http://testserver", rp_id=options["rpId"]
    )
    response = client.post(
        reverse("passkey_signin") + "?next=" + given,
        data=json.dumps({"credential": credential}),
        content_type="application/json",
    )
    assert client.session["_auth_user_id"] == str(user.pk)
    assert response.json()["redirect"] == "/"


def test_the_sign_in_page_gives_its_passkey_script_no_address_with_a_tab(client):
    page = client.get(reverse("login") + "?next=/%09//evil.test/")

    assert "evil.test" not in page.content.decode()


CREDENTIAL_ID = b"known-credential-id"

MALFORMED_ASSERTIONS = {
    "no_id": {"rawId": b64u(CREDENTIAL_ID), "response": {}},
    "no_response": {"id": b64u(CREDENTIAL_ID), "rawId": b64u(CREDENTIAL_ID), "type": "public-key"},
    "response_list": {
        "id": b64u(CREDENTIAL_ID),
        "rawId": b64u(CREDENTIAL_ID),
        "response": [],
        "type": "public-key",
    },
    "wrong_type": {
        "id": b64u(CREDENTIAL_ID),
        "rawId": b64u(CREDENTIAL_ID),
        "type": "nope",
        "response": {"clientDataJSON": "e30", "authenticatorData": "AA", "signature": "AA"},
    },
    "user_handle_no_string": {
        "id": b64u(CREDENTIAL_ID),
        "rawId": b64u(CREDENTIAL_ID),
        "type": "public-key",
        "response": {
            "clientDataJSON": "e30",
            "authenticatorData": "AA",
            "signature": "AA",
            "userHandle": 5,
        },
    },
}


@pytest.mark.parametrize("shape", sorted(MALFORMED_ASSERTIONS))
def test_a_malformed_assertion_for_a_known_credential_is_refused_and_audited(
    client, tenant_a, member_of, shape
):
    """Found by an outside probe: py_webauthn's own exceptions (InvalidJSONStructure...) went
    uncaught, a 500. Credential ids are no secret: the second-factor step lists them."""
    user = member_of(tenant_a).user
    Passkey.objects.create(user=user, name="Known", credential_id=CREDENTIAL_ID, public_key=b"pk")
    client.post(reverse("passkey_signin_options"))

    response = post_json(
        client, reverse("passkey_signin"), {"credential": MALFORMED_ASSERTIONS[shape]}
    )

    assert response.status_code == 400 and response.json()["error"] == "invalid"
    assert "_auth_user_id" not in client.session
    assert AuditEvent.objects.get(action="signin.passkey_failed").data["reason"] == "invalid"


MALFORMED_REGISTRATIONS = {
    "empty": {},
    "no_id": {"rawId": "AAAA", "response": {}},
    "response_list": {"id": "AAAA", "rawId": "AAAA", "response": [], "type": "public-key"},
    "no_attestation": {
        "id": "AAAA",
        "rawId": "AAAA",
        "type": "public-key",
        "response": {"clientDataJSON": "e30"},
    },
}


@pytest.mark.parametrize("shape", sorted(MALFORMED_REGISTRATIONS))
def test_a_malformed_registration_is_refused(tenant_a, member_of, signed_in, shape):
    user = member_of(tenant_a).user
    client = signed_in(user)
    client.post(reverse("passkey_register_options"))

    response = post_json(
        client,
        reverse("passkey_register"),
        {"credential": MALFORMED_REGISTRATIONS[shape], "name": "mine"},
    )

    assert response.status_code == 400 and response.json()["error"] == "invalid"
    assert not Passkey.objects.filter(user=user).exists()


def test_removing_the_only_passkey_under_a_requirement_sends_the_session_to_enrolment(
    tenant_a, member_of, client, password
):
    """Found by an outside probe: removing the authenticator forgot the session's factor, but
    removing the last passkey did not, and the gate trusted what the session had proven."""
    Tenant.objects.filter(pk=tenant_a.pk).update(require_two_factor=True)
    user = member_of(tenant_a).user
    passkey = SoftPasskey(user)
    client.post(reverse("login"), {"username": user.email, "password": password})
    options = client.post(reverse("passkey_signin_options")).json()
    credential = passkey.assert_(
        challenge=options["challenge"], origin="http://testserver", rp_id=options["rpId"]
    )
    post_json(client, reverse("passkey_signin"), {"credential": credential})
    home = reverse("tenant_home", args=[tenant_a.slug])
    assert client.get(home).status_code == 200

    client.post(reverse("passkey_remove", args=[Passkey.objects.get(user=user).pk]))

    response = client.get(home)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("account_security"))


def test_a_passkey_as_second_factor_renews_the_session_key(tenant_a, member_of, client, password):
    user = member_of(tenant_a).user
    passkey = SoftPasskey(user)
    client.post(reverse("login"), {"username": user.email, "password": password})
    owing = client.session.session_key
    options = client.post(reverse("passkey_signin_options")).json()
    credential = passkey.assert_(
        challenge=options["challenge"], origin="http://testserver", rp_id=options["rpId"]
    )

    response = post_json(client, reverse("passkey_signin"), {"credential": credential})

    assert response.status_code == 200
    assert client.session.session_key != owing
    assert UserSession.objects.filter(user=user, session_key=client.session.session_key).exists()
    assert client.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200
