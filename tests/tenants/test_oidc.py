"""Single sign-on, unit level: ID tokens signed here with a test key are checked like the real
provider's (tests/ui/test_browser_sso.py runs the whole flow against one); the mapping of a token
to a member; the admin's settings; the tenant's rule on password sessions."""

import base64
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.db import connection
from django.urls import reverse

from tenants import oidc, oidc_signin
from tenants.models import AuditEvent, Membership, SingleSignOn, SsoIdentity, User
from tenants.user_sessions import METHOD_KEY, SSO_ISSUERS_KEY, SSO_TENANTS_KEY
from tests.pages import based_on

ISSUER = "https://login.acme.test/realms/acme"
CLIENT = "countersign"
NONCE = "nonce-of-this-sign-in"


@pytest.fixture(scope="module")
def signing_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def jwks(signing_key):
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    return {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}


def token(signing_key, **overrides):
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": CLIENT,
        "sub": "subject-1",
        "iat": now,
        "exp": now + 300,
        "nonce": NONCE,
        "email": "alice@acme.test",
        "email_verified": True,
    }
    claims.update(overrides)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, signing_key, algorithm="RS256", headers={"kid": "k1"})


def verify(raw, jwks):
    return oidc.verify_id_token(raw, jwks=jwks, issuer=ISSUER, client_id=CLIENT, nonce=NONCE)


def test_a_good_token_gives_its_claims(signing_key, jwks):
    assert verify(token(signing_key), jwks)["email"] == "alice@acme.test"


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"aud": "another-app"}, "token_audience"),
        ({"aud": [CLIENT, "another-app"], "azp": "another-app"}, "token_audience"),
        ({"iss": "https://evil.test/"}, "token_issuer"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "token_expired"),
        ({"nonce": "a-replayed-sign-in"}, "token_nonce"),
        ({"nonce": None}, "token_nonce"),
        ({"sub": None}, "token_invalid"),
    ],
    ids=["audience", "azp", "issuer", "expired", "nonce", "no-nonce", "no-subject"],
)
def test_tokens_that_are_not_for_this_sign_in_are_refused(signing_key, jwks, overrides, code):
    with pytest.raises(oidc.OidcError) as refused:
        verify(token(signing_key, **overrides), jwks)
    assert refused.value.code == code


def test_an_unsigned_token_is_refused(signing_key, jwks):
    good = token(signing_key)
    header, payload, _ = good.split(".")
    none_header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    for forged in (f"{none_header}.{payload}.", f"{header}.{payload}."):
        with pytest.raises(oidc.OidcError) as refused:
            verify(forged, jwks)
        assert refused.value.code in {"token_unsigned", "token_invalid"}


def test_a_token_signed_with_the_client_secret_or_another_key_is_refused(signing_key, jwks):
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": CLIENT, "sub": "s", "iat": now, "exp": now + 60, "nonce": NONCE}
    hmac_signed = jwt.encode(claims, "the-client-secret-of-thirty-two-bytes!", algorithm="HS256")
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = jwt.encode(claims, other_key, algorithm="RS256", headers={"kid": "k1"})
    unknown_kid = jwt.encode(claims, other_key, algorithm="RS256", headers={"kid": "k9"})
    codes = []
    for raw in (hmac_signed, other, unknown_kid):
        with pytest.raises(oidc.OidcError) as refused:
            verify(raw, jwks)
        codes.append(refused.value.code)
    assert codes == ["token_unsigned", "token_invalid", "token_unknown_key"]


# --- the mapping of verified claims to a member ---


@pytest.fixture
def sso(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    return oidc_signin.sso_settings_save(
        tenant=tenant_a,
        actor=admin,
        enabled=True,
        issuer=ISSUER,
        client_id=CLIENT,
        client_secret="s3cret-from-the-idp",
        password_signin_allowed=False,
        domains=["acme.test"],
        jit_role="viewer",
    )


def claims(**overrides):
    return {"sub": "subject-1", "email": "alice@acme.test", "email_verified": True, **overrides}


def test_the_client_secret_is_sealed_and_never_in_the_audit(sso, tenant_a):
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(t)::text FROM tenants_singlesignon t")
        stored = cursor.fetchone()[0]
    assert "s3cret-from-the-idp" not in stored
    assert oidc_signin.client_secret(sso) == "s3cret-from-the-idp"
    row = AuditEvent.objects.get(action="tenant.sso_changed", tenant=tenant_a)
    assert "s3cret-from-the-idp" not in json.dumps(row.data)


def test_an_existing_member_is_linked_once_by_address(sso, tenant_a, member_of):
    alice = member_of(tenant_a, "approver", user__email="alice@acme.test").user
    assert oidc_signin.sso_member_for(tenant=tenant_a, claims=claims()) == alice
    # Linked by subject now: a changed address at the provider still finds the same person.
    again = oidc_signin.sso_member_for(tenant=tenant_a, claims=claims(email="a.l@acme.test"))
    assert again == alice
    assert SsoIdentity.objects.get().user == alice
    assert AuditEvent.objects.filter(action="signin.sso_linked", tenant=tenant_a).count() == 1


@pytest.mark.parametrize("said", ["false", "False", 0, "no"])
def test_an_address_the_provider_says_is_unverified_links_nobody(sso, tenant_a, member_of, said):
    """Found by an outside probe: some providers send ``email_verified`` as text (AWS Cognito),
    and "false" was taken for verified, so a stranger who signed up at the provider with the
    member's address (unverified) was linked to the member and signed in as them."""
    member_of(tenant_a, "approver", user__email="alice@acme.test")
    with pytest.raises(oidc_signin.SsoRefused) as refused:
        oidc_signin.sso_member_for(
            tenant=tenant_a, claims=claims(sub="stranger", email_verified=said)
        )
    assert refused.value.code == "email_unverified"
    assert not SsoIdentity.objects.exists()


def test_a_newcomer_in_the_domain_joins_with_the_chosen_role_only(sso, tenant_a):
    user = oidc_signin.sso_member_for(
        tenant=tenant_a, claims=claims(sub="new-1", email="Newbie@ACME.test")
    )
    assert user.email == "newbie@acme.test" and not user.has_usable_password()
    assert Membership.objects.get(user=user, tenant=tenant_a).role == "viewer"
    assert AuditEvent.objects.filter(action="member.created_by_sso", tenant=tenant_a).count() == 1


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"email": "eve@elsewhere.test", "sub": "eve"}, "domain_not_allowed"),
        ({"email": "eve@acme.test.elsewhere.test", "sub": "eve"}, "domain_not_allowed"),
        ({"email": "", "sub": "eve"}, "no_email"),
        ({"email_verified": False, "sub": "eve"}, "email_unverified"),
    ],
)
def test_addresses_outside_the_tenants_domains_are_refused(sso, tenant_a, overrides, code):
    with pytest.raises(oidc_signin.SsoRefused) as refused:
        oidc_signin.sso_member_for(tenant=tenant_a, claims=claims(**overrides))
    assert refused.value.code == code
    assert not User.objects.filter(email__startswith="eve@").exists()


def test_without_just_in_time_accounts_a_stranger_is_refused(sso, tenant_a):
    SingleSignOn.objects.filter(pk=sso.pk).update(jit_role="")
    with pytest.raises(oidc_signin.SsoRefused) as refused:
        oidc_signin.sso_member_for(tenant=tenant_a, claims=claims(sub="x", email="x@acme.test"))
    assert refused.value.code == "not_a_member"


def test_a_deactivated_member_is_refused_even_when_linked(sso, tenant_a, member_of):
    membership = member_of(tenant_a, "approver", user__email="alice@acme.test")
    oidc_signin.sso_member_for(tenant=tenant_a, claims=claims())
    Membership.objects.filter(pk=membership.pk).update(is_active=False)
    with pytest.raises(oidc_signin.SsoRefused) as refused:
        oidc_signin.sso_member_for(tenant=tenant_a, claims=claims())
    assert refused.value.code == "inactive"


def test_a_member_of_another_tenant_is_not_joined_by_address_there(sso, tenant_b, member_of):
    """Tenant A's provider speaks for tenant A only, and automatic accounts are new accounts: a
    person of tenant B with an address in A's domain is made a member of neither (as a member
    of A, their sessions and second factors would be within reach of A's admin, who runs the
    provider). They join A by invitation."""
    bob = member_of(tenant_b, "admin", user__email="bob@acme.test").user
    with pytest.raises(oidc_signin.SsoRefused) as refused:
        oidc_signin.sso_member_for(
            tenant=sso.tenant, claims=claims(sub="bob", email="bob@acme.test")
        )
    assert refused.value.code == "existing_account"
    assert not Membership.objects.filter(user=bob, tenant=sso.tenant).exists()
    assert Membership.objects.get(user=bob, tenant=tenant_b).role == "admin"


# --- the tenant's rule, per session ---


def came_through(client, tenant, issuer):
    """The client's session came through ``tenant``'s provider at ``issuer`` (as the callback
    records it, tenants.views_sso)."""
    session = client.session
    session[SSO_TENANTS_KEY] = [tenant.pk]
    session[SSO_ISSUERS_KEY] = {str(tenant.pk): issuer}
    session.save()


def test_a_password_session_is_sent_to_the_identity_provider_of_an_sso_only_tenant(
    sso, tenant_a, tenant_b, member_of, signed_in
):
    user = member_of(tenant_a, "approver").user
    member_of(tenant_b, "approver", user=user)
    client = signed_in(user)
    home_a = reverse("tenant_home", args=[tenant_a.slug])
    sent = client.get(home_a)
    assert sent.status_code == 302
    assert sent["Location"].startswith(reverse("sso_start", args=[tenant_a.slug]))
    assert client.get(home_a, headers={"HX-Request": "true"}).status_code == 403
    assert client.post(reverse("outbox", args=[tenant_a.slug])).status_code == 403
    assert client.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 200
    came_through(client, tenant_a, ISSUER)
    assert client.get(home_a).status_code == 200


def test_a_session_from_one_tenants_provider_opens_no_other_tenant(
    sso, tenant_a, tenant_b, member_of, signed_in
):
    user = member_of(tenant_a, "approver").user
    member_of(tenant_b, "admin", user=user)
    client = signed_in(user)
    session = client.session
    session[METHOD_KEY] = "sso"
    session.save()
    came_through(client, tenant_a, ISSUER)
    assert client.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 200
    assert client.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 403
    assert client.get(reverse("admin_home", args=[tenant_b.slug])).status_code == 403


def test_a_callback_with_a_state_we_did_not_start_is_refused(client, db):
    response = client.get(reverse("sso_callback"), {"state": "forged", "code": "x"})
    assert response.status_code == 400
    assert "_auth_user_id" not in client.session


def test_admin_settings_need_an_https_issuer_and_real_domains(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)
    url = reverse("admin_sso_settings", args=[tenant_a.slug])
    page = reverse("admin_signin", args=[tenant_a.slug])
    form = {
        "based_on": based_on(client, page, "sso_form"),
        "enabled": "on",
        "issuer": "http://login.acme.test/",
        "client_id": "c",
        "client_secret": "s",
        "domains": "acme.test, not a domain",
        "jit_role": "admin",
    }
    refused = client.post(url, form)
    assert refused.status_code == 400
    errors = refused.context["sso_form"].errors
    assert set(errors) == {"issuer", "domains", "jit_role"}
    assert not SingleSignOn.objects.exists()
    fixed = {**form, "issuer": ISSUER, "domains": "acme.test", "jit_role": ""}
    unproven = client.post(url, fixed)
    assert unproven.status_code == 400
    assert set(unproven.context["sso_form"].errors) == {"password_signin_allowed"}
    assert client.post(url, {**fixed, "password_signin_allowed": "on"}).status_code == 302
    # Once this admin came through the provider, password sign-in can be turned off.
    came_through(client, tenant_a, ISSUER)
    ok = client.post(
        url, {**fixed, "client_secret": "", "based_on": based_on(client, page, "sso_form")}
    )
    assert ok.status_code == 302
    saved = SingleSignOn.objects.get(tenant=tenant_a)
    assert (saved.issuer, saved.jit_domains, saved.password_signin_allowed) == (
        ISSUER,
        ["acme.test"],
        False,
    )
    # A blank secret kept the stored one.
    assert oidc_signin.client_secret(saved) == "s"


def test_a_session_from_a_tenants_provider_cannot_remove_the_persons_factors(
    tenant_a, member_of, signed_in
):
    import pyotp

    from tenants import two_factor
    from tenants.models import TotpDevice

    user = member_of(tenant_a, "approver").user
    device = two_factor.totp_begin(user=user)
    two_factor.totp_confirm(user=user, code=pyotp.TOTP(two_factor.totp_secret(device)).now())
    client = signed_in(user)
    session = client.session
    session.update({METHOD_KEY: "sso", "cs_factor": "sso", SSO_TENANTS_KEY: [tenant_a.pk]})
    session.save()
    client.post(reverse("two_factor_remove"))
    client.post(reverse("recovery_codes_renew"))
    assert TotpDevice.objects.filter(user=user, confirmed=True).exists()
    assert two_factor.recovery_codes_left(user) == 10


@pytest.mark.django_db(transaction=True)
def test_an_invitation_written_while_the_invitee_joins_through_sso_does_not_stay_pending(
    sso, tenant_a
):
    """The newcomer's join closes the pending invitations to their address; one an admin was
    writing at that moment had checked for a member before the join committed, and the join
    had looked for invitations before it committed: it stayed pending. Here an older invitation
    holds the admin's write after its check, the join starts meanwhile, and the test releases
    them together: one waits for the other, and nothing pending is left."""
    from django.db import transaction

    from tenants import invitations
    from tenants.models import Invitation
    from tests.intents.helpers import in_thread, until_done_or_waiting

    admin = Membership.objects.get(tenant=tenant_a, role="admin").user
    older, _ = invitations.invitation_create(
        tenant=tenant_a, email="newbie@acme.test", role="approver", actor=admin
    )
    outcomes: list[list] = [[], []]
    with transaction.atomic():
        Invitation.objects.select_for_update().get(pk=older.pk)
        invite = in_thread(
            lambda: invitations.invitation_create(
                tenant=tenant_a, email="newbie@acme.test", role="approver", actor=admin
            ),
            outcomes[0],
        )
        until_done_or_waiting(invite, 1)
        join = in_thread(
            lambda: oidc_signin.sso_member_for(
                tenant=tenant_a, claims=claims(sub="new-1", email="newbie@acme.test")
            ),
            outcomes[1],
        )
        until_done_or_waiting(join, 2)
    invite.join(20)
    join.join(20)

    assert isinstance(outcomes[1][0], User)
    assert Membership.objects.filter(tenant=tenant_a, user__email="newbie@acme.test").exists()
    assert not Invitation.objects.filter(state="pending").exists()


@pytest.mark.parametrize(
    "email", ["b\u043eb@acme.test", "\uff42ob@acme.test", "b\u03bfb@acme.test"]
)
def test_a_newcomer_whose_address_could_pass_for_another_gets_no_account(
    sso, tenant_a, member_of, email
):
    """An invitation refuses a local part that reads as another (a Cyrillic o, a full-width b,
    a Greek omicron); the provider's word made such an account all the same, beside
    bob@acme.test, whose name it would carry to every colleague."""
    member_of(tenant_a, "approver", user__email="bob@acme.test")

    with pytest.raises(oidc_signin.SsoRefused) as refused:
        oidc_signin.sso_member_for(tenant=tenant_a, claims=claims(sub="look-alike", email=email))

    assert refused.value.code == "email_lookalike"
    assert list(
        User.objects.filter(email__endswith="@acme.test").values_list("email", flat=True)
    ) == ["bob@acme.test"]
    assert not SsoIdentity.objects.exists()
