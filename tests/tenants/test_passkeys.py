"""Passkey endpoints refuse what is not a fresh, valid assertion; another person's passkey is
neither usable nor removable. (Registering and signing in for real: the Chromium test with the
virtual authenticator, tests/ui/test_browser_passkeys.py.)"""

import json

import pytest
from django.urls import reverse

from tenants.models import AuditEvent, Passkey

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
