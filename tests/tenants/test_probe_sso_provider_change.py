"""An outside probe of a tenant that turns its single sign-on off or replaces its identity
provider while people are signed in through it (the admin found the provider compromised, or
moved to another). The sessions that provider opened must not keep opening the tenant; and the
guard that password sign-in is turned off only after one sign-in through the provider must be
met by the provider being saved, not by the one it replaces."""

import pytest
from django.urls import reverse

from tenants import oidc_signin
from tenants.models import SingleSignOn
from tests.pages import based_on
from tests.tenants.test_sso_callback import CLIENT, Provider, start


@pytest.fixture
def old_provider():
    served = Provider()
    yield served
    served.server.shutdown()


@pytest.fixture
def new_provider():
    served = Provider()
    yield served
    served.server.shutdown()


@pytest.fixture
def admin(db, tenant_a, member_of):
    return member_of(tenant_a, "admin", user__email="ada@acme.test").user


def save_provider(tenant, admin, provider, *, enabled=True, password_signin_allowed=True):
    oidc_signin.sso_settings_save(
        tenant=tenant,
        actor=admin,
        enabled=enabled,
        issuer=provider.issuer,
        client_id=CLIENT,
        client_secret="client-secret-at-the-provider",
        password_signin_allowed=password_signin_allowed,
        domains=["acme.test"],
        jit_role="",
    )


def through(client, provider, tenant, email, sub):
    flow = start(client, tenant)
    provider.id_token = provider.sign(flow["nonce"], sub=sub, email=email)
    back = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    assert back.status_code == 302
    return back


def test_sessions_from_the_provider_stop_opening_the_tenant_once_it_is_turned_off(
    client, old_provider, tenant_a, admin, member_of
):
    alice = member_of(tenant_a, "approver", user__email="alice@acme.test").user
    save_provider(tenant_a, admin, old_provider)
    through(client, old_provider, tenant_a, alice.email, "alice-sub")
    home = reverse("tenant_home", args=[tenant_a.slug])
    assert client.get(home).status_code == 200

    save_provider(tenant_a, admin, old_provider, enabled=False)

    refused = client.get(home)
    assert refused.status_code == 403
    assert "turned off or changed" in refused.content.decode()
    assert client.post(reverse("bulk_approve", args=[tenant_a.slug])).status_code == 403


def test_sessions_from_a_replaced_provider_are_sent_to_the_new_one(
    client, old_provider, new_provider, tenant_a, admin, member_of
):
    alice = member_of(tenant_a, "approver", user__email="alice@acme.test").user
    save_provider(tenant_a, admin, old_provider, password_signin_allowed=False)
    through(client, old_provider, tenant_a, alice.email, "alice-sub")
    outbox = reverse("outbox", args=[tenant_a.slug])
    assert client.get(outbox).status_code == 200

    save_provider(tenant_a, admin, new_provider, password_signin_allowed=False)

    sent = client.get(outbox)
    assert sent.status_code == 302
    assert sent["Location"].startswith(reverse("sso_start", args=[tenant_a.slug]))
    assert client.get(outbox, headers={"HX-Request": "true"}).status_code == 403
    through(client, new_provider, tenant_a, alice.email, "alice-at-the-new-one")
    assert client.get(outbox).status_code == 200


def test_password_sign_in_is_not_turned_off_on_the_word_of_the_provider_being_replaced(
    client, old_provider, new_provider, tenant_a, admin
):
    """The admin came through the old provider; one save names a new issuer (never tried: a
    typo, the wrong realm) and turns password sign-in off. Accepted, every member who signs in
    with a password is sent to a provider that signs nobody in."""
    save_provider(tenant_a, admin, old_provider)
    through(client, old_provider, tenant_a, admin.email, "ada-sub")
    page = reverse("admin_signin", args=[tenant_a.slug])
    form = {
        "based_on": based_on(client, page, "sso_form"),
        "enabled": "on",
        "issuer": new_provider.issuer,
        "client_id": CLIENT,
        "client_secret": "",
        "domains": "acme.test",
        "jit_role": "",
    }

    refused = client.post(reverse("admin_sso_settings", args=[tenant_a.slug]), form)

    assert refused.status_code == 400
    assert set(refused.context["sso_form"].errors) == {"password_signin_allowed"}
    saved = SingleSignOn.objects.get(tenant=tenant_a)
    assert (saved.issuer, saved.password_signin_allowed) == (old_provider.issuer, True)
    # The same save keeping the provider the admin came through is accepted.
    kept = client.post(
        reverse("admin_sso_settings", args=[tenant_a.slug]),
        {**form, "issuer": old_provider.issuer},
    )
    assert kept.status_code == 302
    assert not SingleSignOn.objects.get(tenant=tenant_a).password_signin_allowed


def test_a_session_from_a_provider_turned_off_no_longer_acts_on_the_persons_account(
    client, old_provider, tenant_a, admin, member_of
):
    """A person whose only tenant is A sees and ends their other sessions through a session A's
    provider opened (tests/tenants/test_sso_account_guard.py). Once A turned that provider off,
    its word covers none of the person's tenants."""
    alice = member_of(tenant_a, "approver", user__email="alice@acme.test").user
    save_provider(tenant_a, admin, old_provider)
    through(client, old_provider, tenant_a, alice.email, "alice-sub")
    assert client.get(reverse("sessions")).status_code == 200

    save_provider(tenant_a, admin, old_provider, enabled=False)

    refused = client.get(reverse("sessions"))
    assert refused.status_code == 302 and refused["Location"] == reverse("account_security")
    client.post(reverse("preferences"), {"language": "de", "time_zone": ""})
    alice.refresh_from_db()
    assert alice.language == ""
