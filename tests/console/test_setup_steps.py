"""A tenant's first admin on day one (an outside walk in Chromium, /tmp/dayone): the queue was
empty with "New drafts from your agents appear here" and the health page all zeros, and nothing
said that a mailbox, a team and an agent token come first, nor where to make them."""

import pytest
from django.urls import reverse

from tenants import invitations, tokens
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def steps(page) -> dict[str, str]:
    html = page.content.decode()
    return {
        step: html.split(f'data-step="{step}" data-done="', 1)[1][:3].rstrip('"')
        for step in ("mailbox", "team", "token")
        if f'data-step="{step}"' in html
    }


def test_a_new_tenants_health_page_lists_what_is_missing_until_it_is_done(
    tenant_a, member_of, signed_in
):
    admin = member_of(tenant_a, "admin")
    client = signed_in(admin.user)
    url = reverse("admin_home", args=[tenant_a.slug])

    first = client.get(url)
    make_local_mailbox(tenant_a)
    invitations.invitation_create(
        tenant=tenant_a, email="rita@example.test", role="approver", actor=admin.user
    )
    halfway = client.get(url)
    tokens.token_create(tenant=tenant_a, name="bot", scopes=["drafts:write"], actor=admin.user)
    done = client.get(url)

    assert steps(first) == {"mailbox": "no", "team": "no", "token": "no"}
    assert reverse("mailbox_create", args=[tenant_a.slug]).encode() in first.content
    assert steps(halfway) == {"mailbox": "yes", "team": "yes", "token": "no"}
    assert b'id="setup"' not in done.content


def test_an_empty_queue_without_a_mailbox_says_what_is_missing_and_who_fixes_it(
    tenant_a, member_of, client
):
    admin = member_of(tenant_a, "admin")
    approver = member_of(tenant_a, "approver")
    queue = reverse("tenant_home", args=[tenant_a.slug])

    client.force_login(admin.user)
    for_admin = client.get(queue).content.decode()
    client.force_login(approver.user)
    for_approver = client.get(queue).content.decode()
    make_local_mailbox(tenant_a)
    with_mailbox = client.get(queue).content.decode()

    assert "No mailbox is connected yet" in for_admin
    assert f'href="{reverse("admin_home", args=[tenant_a.slug])}"' in for_admin
    assert f"An admin of {tenant_a.name} connects one" in for_approver
    assert "No mailbox is connected yet" not in with_mailbox
    assert "New drafts from your agents appear here" in with_mailbox


def test_the_mailbox_forms_explain_the_address_the_sender_name_and_the_policy(
    tenant_a, member_of, signed_in
):
    admin = member_of(tenant_a, "admin")
    client = signed_in(admin.user)
    mailbox = make_local_mailbox(tenant_a)

    create = client.get(reverse("mailbox_create", args=[tenant_a.slug])).content.decode()
    detail = client.get(
        reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])
    ).content.decode()

    assert "dashes or underscores" in create  # what the refusal allows, not less
    assert "name your customers see" in create
    assert "blocked before sending" in detail
