"""A tenant admin's reset of second factors reaches only the tenant's current members (an outside
probe of membership lifecycles). The person's factors are theirs across tenants, and a person
who left tenant A is nobody of A's: A's admin stripped the factors of a former member whose
membership of tenant B was only paused (deactivated), and B's pages took them back, on their
next reactivation, behind the password alone (or behind whatever A's admin, knowing the
password, enrolled on the account in between)."""

import pytest
from django.test import Client
from django.urls import reverse

from tenants import services
from tenants.models import AuditEvent, RecoveryCode, TotpDevice
from tests.tenants.test_two_factor import enrolled, password_sign_in  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def former_member(enrolled, tenant_a, tenant_b, member_of):  # noqa: F811
    """(the person, their former membership of A, A's admin): they enrolled an authenticator,
    left A (A's admin deactivated them) and are paused in B."""
    user, _secret, _codes = enrolled
    admin = member_of(tenant_a, "admin").user
    in_b = member_of(tenant_b, "approver", user=user)
    services.member_deactivate(
        tenant=tenant_b, membership_id=in_b.pk, actor=member_of(tenant_b, "admin").user
    )
    in_a = user.memberships.get(tenant=tenant_a)
    services.member_deactivate(tenant=tenant_a, membership_id=in_a.pk, actor=admin)
    return user, in_a, admin


def test_an_admin_cannot_reset_the_factors_of_someone_who_left_the_tenant(
    former_member, tenant_a, password
):
    user, in_a, admin = former_member
    browser = Client()
    browser.force_login(admin)

    refused = browser.post(
        reverse("admin_member_two_factor_reset", args=[tenant_a.slug, in_a.pk]), follow=True
    )

    page = refused.content.decode()
    assert f"{user.email} is no longer a member of Tenant A" in page
    assert "second factors are removed" not in page
    assert TotpDevice.objects.filter(user=user, confirmed=True).exists()
    assert RecoveryCode.objects.filter(user=user).count() == 10
    assert not AuditEvent.objects.filter(action__endswith="two_factor_reset").exists()
    theirs = Client()
    password_sign_in(theirs, user, password)
    assert theirs.get(reverse("home")).status_code == 302
    assert theirs.get(reverse("home"))["Location"].startswith(reverse("two_factor_verify"))


def test_a_former_members_page_offers_no_reset(former_member, tenant_a):
    _user, in_a, admin = former_member
    browser = Client()
    browser.force_login(admin)

    page = browser.get(reverse("admin_member", args=[tenant_a.slug, in_a.pk])).content.decode()

    assert reverse("admin_member_two_factor_reset", args=[tenant_a.slug, in_a.pk]) not in page
    assert reverse("admin_member_reactivate", args=[tenant_a.slug, in_a.pk]) in page
