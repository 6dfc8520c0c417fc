"""Every tenant administration page renders for an admin."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_admin_pages_render(tenant_a, mailbox_a, admin_a, signed_in):
    client = signed_in(admin_a.user)
    for name in (
        "admin_home",
        "admin_members",
        "admin_policies",
        "admin_recipients",
        "admin_suppressions",
        "admin_webhooks",
        "admin_audit",
    ):
        assert client.get(reverse(name, args=[tenant_a.slug])).status_code == 200, name
    assert client.get(reverse("admin_member", args=[tenant_a.slug, admin_a.pk])).status_code == 200
