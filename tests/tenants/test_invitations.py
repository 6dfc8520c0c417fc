"""Invitations through the pages, tried as outsiders: another tenant's admin, a user of two tenants,
a replayed, revoked or expired link, the wrong person signed in."""

import pytest
from django.urls import reverse

from tenants.models import AuditEvent, Membership, User

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-long-enough-pass-42"


def invite(client, admin, tenant, email, role="approver", **extra):
    client.force_login(admin.user)
    page = client.post(
        reverse("admin_members", args=[tenant.slug]), {"email": email, "role": role, **extra}
    )
    client.logout()
    return page


def create_account(client, link, password=NEW_PASSWORD):
    return client.post(link, {"new_password1": password, "new_password2": password})


def result_box(page) -> str:
    """The box that answers the invite (the rest of the page lists this tenant's invitations)."""
    html = page.content.decode()
    start = html.index('<div class="ok-box" role="status">')
    return html[start : html.index("</div>", start)]


def sign_in(client, email, password=NEW_PASSWORD):
    return client.post(reverse("login"), {"username": email, "password": password})


def test_another_tenants_admin_cannot_take_over_a_pending_invitee(
    tenant_a, tenant_b, member_of, client
):
    """Globex (B) invites new.cfo as admin; Acme's (A) admin invites the same address, follows his
    own link and chooses the password: he owns an account of Acme's, nothing of Globex's."""
    globex_admin = member_of(tenant_b, "admin")
    acme_admin = member_of(tenant_a, "admin")
    invite(client, globex_admin, tenant_b, "new.cfo@globex.test", role="admin")
    link = invite(client, acme_admin, tenant_a, "new.cfo@globex.test").context["link"]
    create_account(client, link)
    sign_in(client, "new.cfo@globex.test")
    assert client.get(reverse("tenant_home", args=[tenant_b.slug])).status_code == 404
    assert client.get(reverse("admin_home", args=[tenant_b.slug])).status_code == 404
    assert not Membership.objects.filter(tenant=tenant_b, user__email="new.cfo@globex.test")
    assert b"Tenant B" not in client.get(reverse("home"), follow=True).content


def test_the_inviting_admin_gets_the_same_answer_whatever_the_address(
    tenant_a, tenant_b, member_of, client
):
    elsewhere = member_of(tenant_b, "viewer").user.email
    acme_admin = member_of(tenant_a, "admin")
    pages = {
        email: invite(client, acme_admin, tenant_a, email)
        for email in ("nobody.yet@example.test", elsewhere)
    }
    shown = {
        email: result_box(page)
        .replace(email, "EMAIL")
        .replace(page.context["link"] or "\0", "LINK")
        for email, page in pages.items()
    }
    assert all(page.status_code == 200 for page in pages.values())
    assert shown["nobody.yet@example.test"] == shown[elsewhere]
    rows = AuditEvent.objects.filter(tenant=tenant_a).order_by("id")
    first, second = (sorted(row.data) for row in rows)
    assert first == second
    assert all("new_user" not in row.data for row in rows)


def test_inviting_a_user_of_another_tenant_adds_nothing_until_they_accept(
    tenant_a, tenant_b, member_of, client
):
    globex_viewer = member_of(tenant_b, "viewer")
    acme_admin = member_of(tenant_a, "admin")
    invite(client, acme_admin, tenant_a, globex_viewer.user.email, role="admin")
    assert not Membership.objects.filter(tenant=tenant_a, user=globex_viewer.user).exists()
    assert list(globex_viewer.user.memberships.values_list("tenant__slug", flat=True)) == [
        tenant_b.slug
    ]
    assert User.objects.get(pk=globex_viewer.user.pk).check_password("correct-horse-battery-staple")
