"""An outsider probe of single sign-on: tenant A's admin runs A's identity provider, lists tenant
B's domain as A's own and asserts the address of B's admin.

An account that is not a member of A is not made one (automatic accounts are new accounts only).
When the person does belong to A too, A's provider signs them in for tenant A only
(tests/tenants/test_sso_callback.py). What that session must not do is act on the person's whole
account: set up an authenticator (it would lock the real person out of tenant B and hand the
recovery codes to A's admin), see the addresses and browsers of their other sessions, or end
them; nor may it complete a password sign-in that still owes its second factor."""

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse

from tenants import oidc_signin, two_factor
from tenants.models import (
    AuditEvent,
    Invitation,
    Membership,
    SsoIdentity,
    TotpDevice,
    User,
    UserSession,
)
from tenants.user_sessions import METHOD_KEY
from tests.tenants.test_sso_callback import CLIENT, Provider, start
from tests.tenants.test_two_factor import enrol, next_step_code


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


def sso_callback(client, provider, tenant, email, sub):
    flow = start(client, tenant)
    provider.id_token = provider.sign(flow["nonce"], sub=sub, email=email)
    return client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})


def test_the_provider_does_not_make_a_member_of_an_existing_account(
    client, provider, tenant_a, member_of, bob
):
    provider_of(tenant_a, member_of, provider, domains=["globex.test"])

    response = sso_callback(client, provider, tenant_a, bob.email, "bob-at-a")

    assert response.status_code == 403
    assert "admin for an invitation" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not Membership.objects.filter(tenant=tenant_a, user=bob).exists()
    assert not SsoIdentity.objects.filter(user=bob).exists()
    refused = AuditEvent.objects.get(action="signin.sso_refused", tenant=tenant_a)
    assert refused.data["reason"] == "existing_account"


def test_a_password_sign_in_owing_its_second_factor_is_not_completed_by_the_provider(
    client, provider, tenant_a, tenant_b, member_of, bob, password
):
    """A's admin knows Bob's password, not his authenticator. Bob belongs to A too."""
    member_of(tenant_a, "viewer", user=bob)
    own = Client()
    own.post(reverse("login"), {"username": bob.email, "password": password})
    enrol(own)
    provider_of(tenant_a, member_of, provider, domains=["globex.test"])
    client.post(reverse("login"), {"username": bob.email, "password": password})
    owing = client.session.session_key
    assert client.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 302

    response = sso_callback(client, provider, tenant_a, bob.email, "bob-at-a")

    assert response.status_code == 302
    assert client.session.session_key != owing
    assert client.session[METHOD_KEY] == "sso"
    assert client.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200
    assert client.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 403
    client.post(reverse("two_factor_remove"))
    assert TotpDevice.objects.filter(user=bob, confirmed=True).exists()


@pytest.fixture
def impostor(client, provider, tenant_a, member_of, bob, bobs_own_session):
    """A's admin, signed in as Bob through A's provider; Bob belongs to A too (as a viewer)."""
    member_of(tenant_a, "viewer", user=bob)
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


def test_the_impostor_cannot_tell_the_persons_tenants_by_trying_addresses(
    impostor, tenant_b, member_of
):
    """Found by an outside probe: the home page hid Bob's other tenants from the session of A's
    provider, but /t/<address>/ answered 403 ("you signed in through another tenant's single
    sign-on") for a tenant of Bob's and 404 for any other, so A's admin could try company
    names one by one and learn where else Bob works, what /t/<address>/admin/ told of his role
    too. Every tenant the session did not come through now gets the same answer."""
    from tests.factories import TenantFactory

    stranger = TenantFactory(name="Tenant C", slug="tenant-c")
    pages = ("tenant_home", "admin_home", "outbox")
    slugs = (tenant_b.slug, stranger.slug, "no-such-tenant")

    answers = {
        (page, slug): impostor.get(reverse(page, args=[slug])) for page in pages for slug in slugs
    }

    assert {key: r.status_code for key, r in answers.items()} == {key: 403 for key in answers}
    refusal = "signed in through another tenant&#x27;s single sign-on"
    assert all(refusal in r.content.decode() for r in answers.values())
    assert all(tenant_b.name not in r.content.decode() for r in answers.values())


def test_the_impostor_cannot_tell_the_persons_tenants_that_require_their_own_provider(
    impostor, tenant_b, member_of, provider
):
    """A tenant whose members must come through its own provider sends the session there: a
    tenant of Bob's and a tenant of strangers alike, a page or a post."""
    from tests.factories import TenantFactory

    stranger = TenantFactory(name="Tenant C", slug="tenant-c")
    for tenant in (tenant_b, stranger):
        oidc_signin.sso_settings_save(
            tenant=tenant,
            actor=member_of(tenant, "admin").user,
            enabled=True,
            issuer=provider.issuer,
            client_id=CLIENT,
            client_secret="client-secret-at-the-provider",
            password_signin_allowed=False,
            domains=["globex.test"],
            jit_role="",
        )

    got = {}
    for tenant in (tenant_b, stranger):
        page = impostor.get(reverse("outbox", args=[tenant.slug]))
        posted = impostor.post(reverse("my_away", args=[tenant.slug]), {"away": "1"})
        got[tenant.slug] = (page.status_code, page["Location"].split("?")[0], posted.status_code)

    assert got == {
        tenant.slug: (302, reverse("sso_start", args=[tenant.slug]), 403)
        for tenant in (tenant_b, stranger)
    }
    assert not Membership.objects.filter(tenant=tenant_b, is_away=True).exists()


def test_a_session_planted_by_the_impostor_gains_nothing_from_the_persons_own_provider(
    impostor, bob, tenant_b, member_of
):
    """Found by an outside probe: A's admin, signed in as Bob through A's provider, plants that
    session's cookie in Bob's browser. Bob, sent to tenant B, signs in through B's own provider;
    the callback added B to the session in place, under the key A's admin still held, and A's
    admin then opened B as B's admin. A session whose reach grows now gets a new key, as it does
    when it proves a second factor."""
    b_provider = Provider()
    try:
        provider_of(tenant_b, member_of, b_provider, domains=["globex.test"])
        planted = impostor.session.session_key
        browser = Client()
        browser.cookies[settings.SESSION_COOKIE_NAME] = planted
        flow = start(browser, tenant_b)
        b_provider.id_token = b_provider.sign(flow["nonce"], sub="bob-at-b", email=bob.email)
        back = browser.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})
    finally:
        b_provider.server.shutdown()

    home_b = reverse("tenant_home", args=[tenant_b.slug])
    assert back.status_code == 302
    assert browser.session.session_key != planted
    assert browser.get(home_b).status_code == 200
    assert impostor.get(home_b).status_code == 302  # to the sign-in: its key is gone
    assert not Session.objects.filter(session_key=planted).exists()
    assert UserSession.objects.filter(user=bob, session_key=browser.session.session_key).exists()


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


def test_the_impostor_does_not_learn_the_persons_other_tenants(impostor, tenant_a, tenant_b):
    page = impostor.get(reverse("home"), follow=True)

    assert page.status_code == 200
    assert tenant_a.name in page.content.decode()
    assert tenant_b.name not in page.content.decode()
    assert tenant_b.slug not in page.content.decode()


def test_the_impostor_cannot_change_the_persons_language_or_time_zone(impostor, bob):
    before = (bob.language, bob.time_zone)

    response = impostor.post(
        reverse("preferences"), {"language": "de", "time_zone": "Asia/Tokyo"}, follow=True
    )

    bob.refresh_from_db()
    assert (bob.language, bob.time_zone) == before
    assert "Sign in with your password to change your language" in response.content.decode()


def test_the_impostor_cannot_accept_an_invitation_for_the_person(impostor, bob, member_of):
    """Joining a tenant is the person's own act: C's invitation, opened by a session that is
    only A's provider's word, is neither accepted nor declined."""
    from tests.factories import TenantFactory
    from tests.tenants.test_invitations import invite

    tenant_c = TenantFactory(name="Tenant C", slug="tenant-c")
    session = impostor.session.session_key
    link = invite(Client(), member_of(tenant_c, "admin"), tenant_c, bob.email).context["link"]
    impostor.get(link)
    invitation = Invitation.objects.get(tenant=tenant_c)
    assert impostor.session.session_key == session

    for action in ("invitation_accept", "invitation_decline"):
        refused = impostor.post(reverse(action, args=[invitation.pk]))
        assert refused.status_code == 403
        assert "Sign in with your password to accept" in refused.content.decode()
    assert Invitation.objects.get(pk=invitation.pk).state == "pending"
    assert not Membership.objects.filter(tenant=tenant_c, user=bob).exists()


def test_a_browser_signed_in_as_someone_else_is_not_switched_to_the_providers_person(
    client, provider, tenant_a, member_of, bob, password
):
    """A link to a tenant's sign-in, whose admin runs the provider, must not silently sign this
    browser into another account (login CSRF)."""
    member_of(tenant_a, "viewer", user=bob)
    provider_of(tenant_a, member_of, provider, domains=["globex.test"])
    carol = member_of(tenant_a, "approver", user__email="carol@acme.test").user
    client.post(reverse("login"), {"username": carol.email, "password": password})

    response = sso_callback(client, provider, tenant_a, bob.email, "bob-at-a")

    assert response.status_code == 409
    assert "You are signed in as carol@acme.test" in response.content.decode()
    assert client.session["_auth_user_id"] == str(carol.pk)


def test_a_browser_sent_through_a_providers_sign_in_cannot_accept_another_tenants_invitation(
    client, provider, tenant_a, tenant_b, member_of
):
    """Found by an outside probe: A's admin made an account for x@globex.test (a plain invitation
    of A), put x's domain on A's provider, and sent x's browser to A's sign-in start (a link
    does it). Signed in as that account, x opened B's invitation, saw their own address, and
    accepting gave B's admin role to the account A's admin holds. A session from A's provider
    now accepts only invitations to A."""
    from tests.tenants.test_invitations import create_account, invite

    account = "x@globex.test"
    create_account(
        Client(), invite(Client(), member_of(tenant_a, "admin"), tenant_a, account).context["link"]
    )
    provider_of(tenant_a, member_of, provider, domains=["globex.test"])
    link = invite(Client(), member_of(tenant_b, "admin"), tenant_b, account, role="admin")
    link = link.context["link"]
    held = Membership.objects.get(tenant=tenant_a, user__email=account).user
    # The forced sign-in: A's provider vouches for the account A's admin holds.
    SsoIdentity.objects.create(tenant=tenant_a, issuer=provider.issuer, subject="held", user=held)
    sso_callback(client, provider, tenant_a, account, "held")
    client.get(link)
    invitation = Invitation.objects.get(tenant=tenant_b)

    refused = client.post(reverse("invitation_accept", args=[invitation.pk]))

    assert refused.status_code == 403
    assert "Sign in with your password to accept" in refused.content.decode()
    assert Invitation.objects.get(pk=invitation.pk).state == "pending"
    assert not Membership.objects.filter(tenant=tenant_b, user=held).exists()


def test_an_account_made_by_single_sign_on_is_told_its_way_to_another_tenants_invitation(
    client, provider, tenant_a, tenant_b, member_of
):
    """An account that single sign-on made has no password: "sign in with your password" was a
    dead end for it. The invitation page says so before Accept is pressed, and what to do."""
    from tests.tenants.test_invitations import invite

    provider_of(tenant_a, member_of, provider, domains=["globex.test"])
    sso_callback(client, provider, tenant_a, "newcomer@globex.test", "newcomer-at-a")
    newcomer = User.objects.get(email="newcomer@globex.test")
    assert not newcomer.has_usable_password()
    link = invite(Client(), member_of(tenant_b, "admin"), tenant_b, newcomer.email).context["link"]

    page = client.get(link, follow=True)
    invitation = Invitation.objects.get(tenant=tenant_b)
    refused = client.post(reverse("invitation_accept", args=[invitation.pk]))

    for answer in (page, refused):
        text = answer.content.decode()
        assert "signs in only through single sign-on" in text
        assert "Sign in with your password to accept" not in text
    assert reverse("invitation_accept", args=[invitation.pk]) not in page.content.decode()
    assert refused.status_code == 403
    assert Invitation.objects.get(pk=invitation.pk).state == "pending"
    assert not Membership.objects.filter(tenant=tenant_b, user=newcomer).exists()


# --- An operator's account (the Django admin acts on every tenant) ------------------------------


@pytest.fixture
def operator(db, tenant_a, member_of, password):
    """An operator who also belongs to tenant A and keeps an authenticator app."""
    user = member_of(tenant_a, "viewer", user__email="ops@countersign-ops.test").user
    User.objects.filter(pk=user.pk).update(is_staff=True, is_superuser=True)
    own = Client()
    own.post(reverse("login"), {"username": user.email, "password": password})
    enrol(own)
    return User.objects.get(pk=user.pk)


def test_a_tenants_provider_does_not_sign_in_an_operators_account(
    client, provider, tenant_a, member_of, operator
):
    """Found by an outside probe: A's admin listed the operator's domain as A's own, asserted
    the operator's address, and the session opened /ops/admin/ with neither the operator's
    password nor their authenticator."""
    provider_of(tenant_a, member_of, provider, domains=["countersign-ops.test"])

    response = sso_callback(client, provider, tenant_a, operator.email, "anything")

    assert response.status_code == 403
    assert "operator of Countersign" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not SsoIdentity.objects.filter(user=operator).exists()
    refused = AuditEvent.objects.get(action="signin.sso_refused", tenant=tenant_a)
    assert refused.data["reason"] == "operator_account"
    assert client.get("/ops/admin/tenants/tenant/").status_code == 302  # to the admin's sign-in


def test_a_link_made_before_the_account_became_an_operators_signs_nobody_in(
    client, provider, tenant_a, member_of
):
    person = member_of(tenant_a, "viewer", user__email="dana@acme.test").user
    provider_of(tenant_a, member_of, provider, domains=["acme.test"])
    assert sso_callback(Client(), provider, tenant_a, person.email, "dana").status_code == 302
    User.objects.filter(pk=person.pk).update(is_staff=True)

    response = sso_callback(client, provider, tenant_a, person.email, "dana")

    assert response.status_code == 403
    assert "_auth_user_id" not in client.session


def test_a_session_from_a_tenants_provider_never_opens_the_operators_admin(
    client, provider, tenant_a, member_of
):
    """An account made an operator while a session from A's provider is open: that session
    still never reaches the admin, which needs the password and the person's own factor."""
    person = member_of(tenant_a, "viewer", user__email="dana@acme.test").user
    provider_of(tenant_a, member_of, provider, domains=["acme.test"])
    assert sso_callback(client, provider, tenant_a, person.email, "dana").status_code == 302
    User.objects.filter(pk=person.pk).update(is_staff=True, is_superuser=True)

    pages = [
        client.get(url).status_code
        for url in ("/ops/admin/", "/ops/admin/tenants/tenant/", "/ops/admin/login/")
    ]

    assert pages == [403, 403, 403]
    assert client.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200


def test_the_same_operator_signed_in_with_password_and_factor_opens_the_admin(operator, password):
    browser = Client()
    browser.post(reverse("login"), {"username": operator.email, "password": password})
    assert browser.get("/ops/admin/").status_code == 302  # owes the second factor
    secret = two_factor.totp_secret(TotpDevice.objects.get(user=operator))
    browser.post(reverse("two_factor_verify"), {"code": next_step_code(secret)})

    assert browser.get("/ops/admin/").status_code == 200


def test_a_new_accounts_name_from_the_provider_loses_its_controls(
    client, provider, tenant_a, member_of
):
    """The name claim is cleaned, not refused: it is optional, the person cannot change what
    their company's provider sends, and the sign-in should not fail over it."""
    provider_of(tenant_a, member_of, provider, domains=["acme.test"])
    flow = start(client, tenant_a)
    provider.id_token = provider.sign(
        flow["nonce"], sub="new", email="new@acme.test", name="Eve\u202egnp.exe\tMallory\x1b[2J"
    )

    response = client.get(reverse("sso_callback"), {"state": flow["state"], "code": "c0de"})

    assert response.status_code == 302
    assert User.objects.get(email="new@acme.test").full_name == "Evegnp.exe Mallory[2J"


def test_the_impostor_cannot_change_the_persons_password(impostor, bob, password):
    page = impostor.get(reverse("password_change"))
    posted = impostor.post(
        reverse("password_change"),
        {
            "old_password": password,
            "new_password1": "Zx9-taken-over",
            "new_password2": "Zx9-taken-over",
        },
    )

    assert (page.status_code, posted.status_code) == (302, 302)
    bob.refresh_from_db()
    assert bob.check_password(password)
    assert not AuditEvent.objects.filter(action="signin.password_changed").exists()
