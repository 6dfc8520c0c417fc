"""Outsider probe: one person, member of tenants A and B, seen from A's admin. What B's identity
provider and B's admin did about them (a link through B's single sign-on from B's browser and
address, B's admin setting them away) stays out of A's audit page and export; A's member page
names nothing of B; A's admin deactivating them leaves their session, their factors and B's
single sign-on link as they were for B."""

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse

from tenants import oidc_signin, two_factor
from tenants.models import AuditEvent, SsoIdentity, UserSession

pytestmark = pytest.mark.django_db

ISSUER_B = "https://login.tenant-b.test/realms/b"
B_ADDRESS = "203.0.113.77"
B_BROWSER = "BrowserOnlyTenantBSees/9.1"


@pytest.fixture
def shared(tenant_a, tenant_b, member_of):
    """(person, their membership of A, A's admin client, B's admin client)."""
    in_a = member_of(tenant_a, "approver")
    person = in_a.user
    member_of(tenant_b, "approver", user=person)
    admin_a, admin_b = Client(), Client()
    admin_a.force_login(member_of(tenant_a, "admin").user)
    admin_b.force_login(member_of(tenant_b, "admin").user)
    return person, in_a, admin_a, admin_b


def _link_through_bs_provider(tenant_b, person, actor):
    oidc_signin.sso_settings_save(
        tenant=tenant_b,
        actor=actor,
        enabled=True,
        issuer=ISSUER_B,
        client_id="countersign-b",
        client_secret="s3cret-of-b-s-provider",
        password_signin_allowed=True,
        domains=[person.email.rsplit("@", 1)[1]],
        jit_role="viewer",
    )
    request = RequestFactory().get(
        "/sso/callback/", REMOTE_ADDR=B_ADDRESS, HTTP_USER_AGENT=B_BROWSER
    )
    claims = {"sub": "b-subject-42", "email": person.email, "email_verified": True}
    assert oidc_signin.sso_member_for(tenant=tenant_b, claims=claims, request=request) == person


def test_bs_provider_link_and_bs_admins_change_stay_out_of_as_audit_page_and_export(
    tenant_a, tenant_b, shared
):
    person, _, admin_a, admin_b = shared
    in_b = person.memberships.get(tenant=tenant_b)
    _link_through_bs_provider(tenant_b, person, in_b.tenant.memberships.get(role="admin").user)
    away = admin_b.post(reverse("admin_member_away", args=[tenant_b.slug, in_b.pk]), {"away": "1"})
    assert away.status_code == 302

    b_export = b"".join(
        admin_b.get(reverse("admin_audit_csv", args=[tenant_b.slug])).streaming_content
    ).decode()
    b_page = admin_b.get(reverse("admin_audit", args=[tenant_b.slug])).content.decode()
    a_page = admin_a.get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()
    a_export = b"".join(
        admin_a.get(reverse("admin_audit_csv", args=[tenant_a.slug])).streaming_content
    ).decode()

    # B's own log holds all of it: the probe below looks where the rows would be.
    for of_b in (ISSUER_B, "b-subject-42", "signin.sso_linked", "member.away"):
        assert of_b in b_export
    linked = AuditEvent.objects.filter(action="signin.sso_linked", ip_address=B_ADDRESS)
    assert list(linked.values_list("tenant_id", flat=True)) == [tenant_b.pk]
    for of_b in (ISSUER_B, "b-subject-42", "sso_linked", "member.away"):
        assert of_b not in a_export
    # The page shows an action in words, not by its key: what B's page shows of these rows is
    # what A's must not.
    shown_to_b = [of_b for of_b in (ISSUER_B, "b-subject-42", B_ADDRESS) if of_b in b_page]
    assert shown_to_b, "B's page shows none of its rows: nothing to look for on A's"
    assert [of_b for of_b in shown_to_b if of_b in a_page] == []


def test_as_member_page_of_the_person_names_nothing_of_b(tenant_b, shared):
    person, in_a, admin_a, _ = shared
    _link_through_bs_provider(tenant_b, person, tenant_b.memberships.get(role="admin").user)

    page = admin_a.get(reverse("admin_member", args=[in_a.tenant.slug, in_a.pk]))

    body = page.content.decode()
    assert page.status_code == 200 and person.email in body
    for of_b in (tenant_b.name, tenant_b.slug, ISSUER_B):
        assert of_b not in body


def test_as_admin_deactivating_the_person_leaves_their_b_session_factors_and_link(
    tenant_a, tenant_b, shared
):
    person, in_a, admin_a, _ = shared
    _link_through_bs_provider(tenant_b, person, tenant_b.memberships.get(role="admin").user)
    # A set-up begun (its seed shown) is a factor a reset would remove.
    two_factor.totp_begin(user=person, request=None)
    theirs = Client()
    theirs.force_login(person, backend="django.contrib.auth.backends.ModelBackend")
    assert theirs.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 200

    done = admin_a.post(reverse("admin_member_deactivate", args=[tenant_a.slug, in_a.pk]))

    assert done.status_code == 302
    assert theirs.get(reverse("tenant_home", args=[tenant_a.slug])).status_code == 404
    assert theirs.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 200
    assert UserSession.objects.filter(user=person).count() == 1
    assert two_factor.factors_held(person)
    assert SsoIdentity.objects.filter(tenant=tenant_b, user=person).exists()
    reset = admin_a.post(
        reverse("admin_member_two_factor_reset", args=[tenant_a.slug, in_a.pk]), follow=True
    )
    assert "no longer a member of" in reset.content.decode()
    assert two_factor.factors_held(person)
