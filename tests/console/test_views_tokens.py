"""The agent-token admin pages: shown once, revocation, only admins of the tenant."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from tenants.models import AgentToken
from tenants.tokens import token_authenticate, token_create

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def mailbox_a(mailbox_factory, tenant_a):
    return mailbox_factory(tenant_a, username=f"support-a-{uuid.uuid4().hex[:6]}")


def test_admin_creates_a_token_and_sees_it_exactly_once(tenant_a, member_of, signed_in, mailbox_a):
    client = signed_in(member_of(tenant_a, "admin").user)

    created = client.post(
        "/t/tenant-a/admin/tokens/new/",
        {
            "name": "support-bot",
            "scopes": ["drafts:write", "drafts:read"],
            "mailboxes": [mailbox_a.pk],
            "expires_in_days": "30",
        },
    )
    plaintext = re.search(r'value="(cs_[^"]+)"', created.content.decode()).group(1)
    listing = client.get("/t/tenant-a/admin/tokens/")

    token = AgentToken.objects.get()
    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    assert token_authenticate(plaintext).pk == token.pk
    assert list(token.mailboxes.all()) == [mailbox_a]
    assert token.expires_at > timezone.now() + timedelta(days=29)
    assert listing.status_code == 200
    assert plaintext.split("_", 2)[2] not in listing.content.decode()
    assert f"cs_{token.prefix}_" in listing.content.decode()
    assert mailbox_a.address in listing.content.decode()


def test_opening_the_create_url_leads_to_the_form_not_an_empty_405(tenant_a, member_of, signed_in):
    """The created page lives at /new/; a reload or a typed URL sends a GET there."""
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.get("/t/tenant-a/admin/tokens/new/", follow=True)

    body = response.content.decode()
    assert response.redirect_chain == [("/t/tenant-a/admin/tokens/", 302)]
    assert 'action="/t/tenant-a/admin/tokens/new/"' in body
    assert "shown only once" in body
    assert AgentToken.objects.count() == 0


def test_admin_pages_have_no_inline_script_or_style(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)

    pages = [
        client.get("/t/tenant-a/admin/tokens/").content.decode(),
        client.post(
            "/t/tenant-a/admin/tokens/new/", {"name": "bot", "scopes": ["drafts:read"]}
        ).content.decode(),
    ]

    for html in pages:
        assert " style=" not in html
        assert "<style" not in html
        assert " hx-on" not in html
        assert all(
            "src=" in tag or 'type="application/json"' in tag
            for tag in re.findall(r"<script[^>]*>", html)
        )


def test_invalid_form_is_422_with_the_reason(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.post("/t/tenant-a/admin/tokens/new/", {"name": "bot", "scopes": []})

    assert response.status_code == 422
    assert "This field is required" in response.content.decode()
    assert AgentToken.objects.count() == 0


def test_admin_revokes_and_the_api_refuses_the_token(tenant_a, member_of, signed_in, client):
    admin = member_of(tenant_a, "admin").user
    token, plaintext = token_create(
        tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=admin
    )
    browser = signed_in(admin)

    response = browser.post(f"/t/tenant-a/admin/tokens/{token.pk}/revoke/")
    browser.logout()
    api_response = client.get("/api/v1/mailboxes", headers={"Authorization": f"Bearer {plaintext}"})

    assert response.status_code == 302
    assert AgentToken.objects.get().revoked_at is not None
    assert api_response.status_code == 401


@pytest.mark.parametrize("role", ["approver", "viewer"])
def test_non_admins_cannot_see_or_manage_tokens(tenant_a, member_of, signed_in, role):
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)
    client = signed_in(member_of(tenant_a, role).user)

    listing = client.get("/t/tenant-a/admin/tokens/")
    create = client.post("/t/tenant-a/admin/tokens/new/", {"name": "x", "scopes": ["drafts:read"]})
    revoke = client.post(f"/t/tenant-a/admin/tokens/{token.pk}/revoke/")

    assert [listing.status_code, create.status_code, revoke.status_code] == [403, 403, 403]
    assert AgentToken.objects.filter(revoked_at__isnull=True).count() == 1


def test_admin_of_another_tenant_gets_404_and_cannot_revoke(
    tenant_a, tenant_b, member_of, signed_in
):
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)
    client = signed_in(member_of(tenant_b, "admin").user)

    foreign_page = client.get("/t/tenant-a/admin/tokens/")
    own_tenant_revoke = client.post(f"/t/tenant-b/admin/tokens/{token.pk}/revoke/")

    assert foreign_page.status_code == 404
    assert own_tenant_revoke.status_code == 404
    assert AgentToken.objects.get().revoked_at is None
