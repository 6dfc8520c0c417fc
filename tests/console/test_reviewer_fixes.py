"""The fixes a reviewer asked for on the administration pages (issue 16): the mailbox pages keep
the admin navigation, one member status, confirmations, the tenant's own domains, audit in words."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

ADMIN_NAV = 'aria-label="Administration"'


def test_mailbox_pages_keep_the_admin_navigation(tenant_a, mailbox_a, admin_a, signed_in):
    client = signed_in(admin_a.user)
    for url in (
        reverse("mailbox_list", args=[tenant_a.slug]),
        reverse("mailbox_detail", args=[tenant_a.slug, mailbox_a.pk]),
        reverse("mailbox_create", args=[tenant_a.slug]),
    ):
        html = client.get(url).content.decode()
        assert ADMIN_NAV in html, url
        assert 'aria-current="page">Mailboxes</a>' in html, url


def test_a_viewer_sees_mailboxes_without_the_admin_navigation(
    tenant_a, mailbox_a, member_of, signed_in
):
    client = signed_in(member_of(tenant_a, "viewer").user)
    html = client.get(reverse("mailbox_list", args=[tenant_a.slug])).content.decode()
    assert mailbox_a.address in html
    assert ADMIN_NAV not in html
