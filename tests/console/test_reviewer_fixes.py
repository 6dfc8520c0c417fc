"""The fixes a reviewer asked for on the administration pages (issue 16): the mailbox pages keep
the admin navigation, one member status, confirmations, the tenant's own domains, audit in words."""

import pytest
from django.urls import reverse

from tenants.tokens import token_create

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


def test_revoking_a_token_asks_first_and_the_get_changes_nothing(tenant_a, admin_a, signed_in):
    token, _ = token_create(tenant=tenant_a, name="triage-bot", scopes=["drafts:read"], actor=None)
    client = signed_in(admin_a.user)
    listing = client.get(reverse("token_list", args=[tenant_a.slug])).content.decode()
    url = reverse("token_revoke", args=[tenant_a.slug, token.pk])

    confirm = client.get(url)
    token.refresh_from_db()

    assert f'href="{url}"' in listing
    assert confirm.status_code == 200
    assert "triage-bot" in confirm.content.decode()
    assert 'method="post"' in confirm.content.decode()
    assert token.revoked_at is None
    assert client.post(url).status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_another_tenants_token_has_no_confirm_page(tenant_a, tenant_b, member_of, signed_in):
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)
    client = signed_in(member_of(tenant_b, "admin").user)
    assert client.get(reverse("token_revoke", args=[tenant_b.slug, token.pk])).status_code == 404


def test_deactivating_a_member_asks_first_and_the_get_changes_nothing(
    tenant_a, admin_a, member_of, signed_in
):
    other = member_of(tenant_a, "approver")
    client = signed_in(admin_a.user)
    url = reverse("admin_member_deactivate", args=[tenant_a.slug, other.pk])
    detail = client.get(reverse("admin_member", args=[tenant_a.slug, other.pk])).content.decode()

    confirm = client.get(url)
    other.refresh_from_db()

    assert f'href="{url}"' in detail
    assert confirm.status_code == 200
    assert other.user.display_name in confirm.content.decode()
    assert other.is_active
    client.post(url)
    other.refresh_from_db()
    assert not other.is_active


def test_a_member_whose_account_is_disabled_has_one_status_not_active(
    tenant_a, admin_a, member_of, signed_in
):
    other = member_of(tenant_a, "approver")
    other.user.is_active = False
    other.user.save(update_fields=["is_active"])
    client = signed_in(admin_a.user)

    listing = client.get(reverse("admin_members", args=[tenant_a.slug])).content.decode()
    detail = client.get(reverse("admin_member", args=[tenant_a.slug, other.pk])).content.decode()

    row = listing.split(f"<small>{other.user.email}</small>")[1].split("</tr>")[0]
    assert "account disabled" in row
    assert ">active<" not in row
    assert 'data-member-status="account_disabled"' in detail
    assert ">active<" not in detail


def test_the_audit_log_reads_as_sentences_with_links_and_no_dicts(
    tenant_a, admin_a, member_of, signed_in
):
    admin_a.user.full_name = "Ana Admin"
    admin_a.user.save(update_fields=["full_name"])
    token, _ = token_create(
        tenant=tenant_a, name="triage-bot", scopes=["drafts:read"], actor=admin_a.user
    )
    token_create(tenant=tenant_a, name="<b>x</b>", scopes=["drafts:read"], actor=admin_a.user)
    client = signed_in(admin_a.user)
    client.post(reverse("token_revoke", args=[tenant_a.slug, token.pk]))
    other = member_of(tenant_a, "approver")
    client.post(reverse("admin_member_deactivate", args=[tenant_a.slug, other.pk]))

    html = client.get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()

    tokens = reverse("token_list", args=[tenant_a.slug])
    member = reverse("admin_member", args=[tenant_a.slug, other.pk])
    assert f'Ana Admin revoked the agent token <a href="{tokens}">triage-bot</a>' in html
    assert f'Ana Admin deactivated <a href="{member}">{other.user.display_name}</a>' in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>x</b>" not in html
    assert "{&#x27;" not in html and "{'" not in html


def test_the_audit_csv_keeps_the_data(tenant_a, admin_a, signed_in):
    token_create(tenant=tenant_a, name="triage-bot", scopes=["drafts:read"], actor=admin_a.user)
    client = signed_in(admin_a.user)
    body = b"".join(client.get(reverse("admin_audit_csv", args=[tenant_a.slug])).streaming_content)
    assert b"token.created" in body
    assert b'""name"": ""triage-bot""' in body


def test_deactivating_says_what_the_person_set_up_goes_on_working(
    tenant_a, admin_a, member_of, signed_in
):
    """Found by the two-tenant probe: agent tokens and event endpoints belong to the tenant and
    outlive their maker's membership, and the deactivation page did not say so."""
    from intents.models_events import AgentEventEndpoint
    from tenants.tokens import token_revoke

    maker = member_of(tenant_a, "admin")
    for name in ("bot", "bot 2", "old bot"):
        token_create(tenant=tenant_a, name=name, scopes=["drafts:read"], actor=maker.user)
    old = tenant_a.agent_tokens.get(name="old bot")
    token_revoke(tenant=tenant_a, token_id=old.pk, actor=admin_a.user)
    AgentEventEndpoint.objects.create(
        tenant=tenant_a,
        url="https://hooks.example.com/cs",
        event_types=["draft.approved"],
        secret_sealed="sealed",
        created_by=maker.user,
    )
    client = signed_in(admin_a.user)

    page = client.get(reverse("admin_member_deactivate", args=[tenant_a.slug, maker.pk]))
    quiet = client.get(
        reverse("admin_member_deactivate", args=[tenant_a.slug, member_of(tenant_a, "viewer").pk])
    )

    assert "Still working after this: 2 agent tokens and 1 agent-event endpoint" in (
        page.content.decode()
    )
    assert "Still working after this" not in quiet.content.decode()
