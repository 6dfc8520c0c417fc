"""An outsider probe of single sign-on: tenant A's admin runs A's identity provider, lists tenant
B's domain as A's own and asserts the address of B's admin. Tenant A's provider then signs that
person in (for tenant A only: tests/tenants/test_sso_callback.py). What the session must not do
is act on the person's whole account: set up an authenticator (it would lock the real person out
of tenant B and hand the recovery codes to A's admin), see the addresses and browsers of their
other sessions, or end them."""

import pytest
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse

from tenants import oidc_signin
from tenants.models import TotpDevice, UserSession
from tests.tenants.test_sso_callback import CLIENT, Provider, start


def provider_of(tenant, member_of, provider, *, domains):
    """The tenant's admin turns single sign-on on with ``provider``, new accounts as viewers."""
    oidc_signin.sso_settings_save(
        tenant=tenant,
        actor=member_of(tenant, "admin").user,
        enabled=True,
        issuer=provider.issuer,
        client_id=CLIENT,
        client_secret="client-secret-at-the-provider",
        password_signin_allowed=True,
        domains=domains,
        jit_role="viewer",
    )


@pytest.fixture
def provider():
    served = Provider()
    yield served
    served.server.shutdown()


@pytest.fixture
def bob(db, tenant_b, member_of):
    return member_of(tenant_b, "admin", user__email="bob@globex.test").user


@pytest.fixture
def bobs_own_session(bob, password):
    """Bob signed in with his password from his office, the session A's admin would like to end."""
    own = Client()
    own.post(
        reverse("login"),
        {"username": bob.email, "password": password},
        REMOTE_ADDR="203.0.113.77",
        HTTP_USER_AGENT="Bob's office browser",
    )
    return UserSession.objects.get(user=bob)


@pytest.fixture
def impostor(client, provider, tenant_a, member_of, bob, bobs_own_session):
    """A's admin, signed in as Bob through A's provider."""
    provider_of(tenant_a, member_of, provider, domains=["globex.test"])
    flow = start(client, tenant_a)
    provider.id_token = provider.sign(flow["nonce"], sub="bob-at-a", email=bob.email)
    response = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(bob.pk)
    return client


def test_the_impostor_cannot_set_up_an_authenticator_on_the_account(impostor, bob):
    started = impostor.post(reverse("totp_enrol"))
    confirmed = impostor.post(reverse("totp_confirm"), {"code": "123456"})

    assert started.status_code == 302 and started["Location"] == reverse("account_security")
    assert confirmed.status_code == 302 and confirmed["Location"] == reverse("account_security")
    assert not TotpDevice.objects.filter(user=bob).exists()


def test_the_impostor_does_not_see_the_persons_other_sessions(impostor):
    response = impostor.get(reverse("sessions"), follow=True)

    assert b"203.0.113.77" not in response.content
    assert b"office browser" not in response.content
    assert (
        "Sign in with your password to see and end your other sessions."
        in response.content.decode()
    )


def test_the_impostor_cannot_end_the_persons_other_sessions(impostor, bobs_own_session):
    response = impostor.post(reverse("session_end", args=[bobs_own_session.pk]))

    assert response.status_code == 302
    assert Session.objects.filter(session_key=bobs_own_session.session_key).exists()
    assert UserSession.objects.filter(pk=bobs_own_session.pk).exists()


def test_the_impostor_does_not_open_the_persons_own_tenant(impostor, tenant_b):
    assert impostor.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 403


def test_with_his_password_the_person_still_manages_his_sessions(bob, password, bobs_own_session):
    own = Client()
    own.post(reverse("login"), {"username": bob.email, "password": password})
    page = own.get(reverse("sessions"))

    assert page.status_code == 200
    assert b"203.0.113.77" in page.content


def test_a_person_whose_only_tenant_is_the_providers_sees_their_sessions(
    client, provider, tenant_a, member_of
):
    provider_of(tenant_a, member_of, provider, domains=["acme.test"])
    flow = start(client, tenant_a)
    provider.id_token = provider.sign(flow["nonce"], sub="carol", email="carol@acme.test")
    client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})

    page = client.get(reverse("sessions"))

    assert page.status_code == 200
    assert "Signed in with single sign-on" in page.content.decode()
