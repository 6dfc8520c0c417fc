import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_member_sees_own_tenant(tenant_a, member_of, signed_in):
    membership = member_of(tenant_a, "viewer")
    response = signed_in(membership.user).get(reverse("tenant_home", args=[tenant_a.slug]))
    assert response.status_code == 200
    assert b"Tenant A" in response.content


def test_member_of_a_gets_404_for_b(tenant_a, tenant_b, member_of, signed_in):
    membership = member_of(tenant_a, "admin")
    response = signed_in(membership.user).get(reverse("tenant_home", args=[tenant_b.slug]))
    assert response.status_code == 404


def test_unknown_tenant_is_the_same_404(tenant_a, member_of, signed_in):
    membership = member_of(tenant_a, "admin")
    client = signed_in(membership.user)
    missing = client.get("/t/no-such-tenant/")
    assert missing.status_code == 404


def test_inactive_membership_loses_access_at_once(tenant_a, member_of, signed_in):
    membership = member_of(tenant_a, "admin")
    client = signed_in(membership.user)
    url = reverse("tenant_home", args=[tenant_a.slug])
    assert client.get(url).status_code == 200
    membership.is_active = False
    membership.save(update_fields=["is_active"])
    assert client.get(url).status_code == 404


def test_anonymous_is_sent_to_sign_in(client, tenant_a):
    response = client.get(reverse("tenant_home", args=[tenant_a.slug]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_suspended_tenant_is_read_only(tenant_a, member_of, signed_in):
    membership = member_of(tenant_a, "admin")
    tenant_a.status = "suspended"
    tenant_a.save(update_fields=["status"])
    client = signed_in(membership.user)
    url = reverse("tenant_home", args=[tenant_a.slug])
    page = client.get(url)
    assert page.status_code == 200
    assert b"suspended" in page.content
    assert client.post(url).status_code == 403


def test_home_lists_only_my_tenants(tenant_a, tenant_b, member_of, signed_in):
    membership = member_of(tenant_a, "viewer")
    member_of(tenant_b, "viewer", user=membership.user)
    other = member_of(tenant_b, "viewer")
    page = signed_in(other.user).get("/", follow=True)
    assert b"Tenant B" in page.content
    assert b"Tenant A" not in page.content
    both = signed_in(membership.user).get("/")
    assert b"Tenant A" in both.content and b"Tenant B" in both.content


def test_a_suspended_tenants_draft_page_sends_no_presence_beats(
    tenant_a, member_of, mailbox_a, make_draft, signed_in
):
    """Every beat is a POST, which a suspended tenant refuses: a 403 every 6 s per open page."""
    draft = make_draft(mailbox_a)
    client = signed_in(member_of(tenant_a, "approver").user)
    presence = reverse("draft_presence", args=[tenant_a.slug, draft.pk])
    page = reverse("draft", args=[tenant_a.slug, draft.pk])
    assert presence in client.get(page).content.decode()

    tenant_a.status = "suspended"
    tenant_a.save(update_fields=["status"])
    suspended = client.get(page)

    assert suspended.status_code == 200
    assert presence not in suspended.content.decode()
