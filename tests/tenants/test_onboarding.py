"""Onboarding and suspending a tenant (tenants.onboarding): the first admin joins through the real
invitation pages, bad input is refused whole, and a suspension is read-only for members, refused
to agents and audited where the tenant's admins read it."""

import hashlib
from datetime import timedelta

import pytest
from django.conf import settings
from django.db.models.functions import Now
from django.urls import reverse

from tenants import invitations, onboarding
from tenants.models import AuditEvent, Invitation, Membership, Tenant, User
from tenants.services import AdminError
from tenants.tokens import token_create
from tests.agent_api.conftest import Api, draft_body
from tests.factories import make_local_mailbox
from tests.intents.helpers import run_concurrently

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-long-enough-pass-42"


def written() -> tuple[int, int, int, int]:
    return (
        Tenant.objects.count(),
        Invitation.objects.count(),
        AuditEvent.objects.count(),
        User.objects.count(),
    )


def create_account(client, link):
    opened = client.get(link)
    return client.post(
        opened["Location"], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )


def audit_html(client, tenant) -> str:
    return client.get(reverse("admin_audit", args=[tenant.slug])).content.decode()


def test_the_first_admin_joins_through_the_link_and_administers_the_new_tenant(client):
    tenant, token = onboarding.tenant_create(
        name="Acme Support", slug="acme", admin_email="Ana@Acme.test", admin_name="Ana Admin"
    )
    link = onboarding.invitation_url(token)

    created = create_account(client, link)
    signed_in = client.post(
        reverse("login"), {"username": "ana@acme.test", "password": NEW_PASSWORD}
    )
    console = client.get(reverse("admin_members", args=["acme"]))

    assert link == f"{settings.PUBLIC_BASE_URL}/invitations/{token}/"
    assert created.status_code == 302 and created["Location"] == reverse("login")
    assert signed_in.status_code == 302
    assert console.status_code == 200
    membership = Membership.objects.get(tenant=tenant)
    assert (membership.user.email, membership.user.full_name) == ("ana@acme.test", "Ana Admin")
    assert (membership.role, membership.is_active, membership.approve_all_mailboxes) == (
        "admin",
        True,
        True,
    )
    invitation = Invitation.objects.get(tenant=tenant)
    assert (invitation.state, invitation.invited_by, invitation.by_operator) == (
        "accepted",
        None,
        True,
    )
    assert invitation.digest == hashlib.sha256(token.encode()).hexdigest()
    assert list(
        AuditEvent.objects.filter(tenant=tenant)
        .exclude(action__startswith="signin.")
        .order_by("id")
        .values_list("action", "actor")
    ) == [
        ("tenant.created", None),
        ("invitation.invited", None),
        ("invitation.accepted", membership.user.pk),
    ]
    html = audit_html(client, tenant)
    assert "An operator created this tenant" in html
    assert "An operator invited" in html and "ana@acme.test" in html
    assert "The system invited" not in html


def test_the_same_slug_twice_is_refused_and_writes_nothing():
    onboarding.tenant_create(name="Acme", slug="acme", admin_email="ana@acme.test")
    before = written()

    with pytest.raises(AdminError) as refused:
        onboarding.tenant_create(name="Another Acme", slug="acme", admin_email="bob@other.test")

    assert (refused.value.code, refused.value.field) == ("slug_taken", "slug")
    assert refused.value.message == "The slug acme is taken by another tenant."
    assert written() == before
    assert list(Tenant.objects.values_list("name", flat=True)) == ["Acme"]


BAD_INPUT = [
    ("slug", "", "A tenant needs a slug"),
    ("slug", "Acme", "it cannot hold A."),
    ("slug", "acme support", "it cannot hold U+0020."),
    ("slug", "acme/eu", "it cannot hold /."),
    ("slug", "acmé", "it cannot hold é."),
    ("slug", "-acme", "starts and ends with a letter or a digit"),
    ("slug", "a" * 61, "at most 60 characters long; this one has 61"),
    ("name", "   ", "A tenant needs a name."),
    ("name", "Acme\u202eevil", "control character U+202E"),
    ("name", "Acme\x1b[31m", "control character U+001B"),
    ("name", "A" * 121, "at most 120 characters long; this one has 121"),
    ("admin_email", "not-an-address", "Enter a valid email address."),
    ("admin_email", "ana@acme.test\nBcc: eve@evil.test", "Enter a valid email address."),
    ("admin_name", "Ana\u2066Eve", "control character U+2066"),
]
FIELDS = {"slug": "slug", "name": "name", "admin_email": "email", "admin_name": "full_name"}


@pytest.mark.parametrize(("field", "value", "message"), BAD_INPUT)
def test_bad_input_is_refused_with_a_message_naming_it_and_writes_nothing(field, value, message):
    good = {"name": "Acme", "slug": "acme", "admin_email": "ana@acme.test", "admin_name": "Ana"}

    with pytest.raises(AdminError) as refused:
        onboarding.tenant_create(**{**good, field: value})

    assert refused.value.field == FIELDS[field]
    assert message in refused.value.message
    assert written() == (0, 0, 0, 0)


@pytest.fixture
def suspended_setup(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    mailbox = make_local_mailbox(tenant_a)
    _, token = token_create(
        tenant=tenant_a,
        name="bot",
        scopes=["drafts:write", "drafts:read"],
        mailbox_ids=[],
        actor=admin,
    )
    return admin, mailbox, token


def test_a_suspended_tenant_refuses_agents_and_staff_writes_then_works_again(
    tenant_a, suspended_setup, client
):
    admin, mailbox, token = suspended_setup
    api = Api(client)
    client.force_login(admin)
    invite = reverse("admin_members", args=[tenant_a.slug])

    onboarding.tenant_suspend(slug=tenant_a.slug, reason="Unpaid invoice 2024-117")
    refused_api = api.post("/drafts", draft_body(mailbox), token=token, key="while-suspended")
    refused_staff = client.post(invite, {"email": "new@example.test", "role": "viewer"})
    suspended_audit = audit_html(client, tenant_a)
    onboarding.tenant_resume(slug=tenant_a.slug)
    allowed_api = api.post("/drafts", draft_body(mailbox), token=token, key="after-resume")
    allowed_staff = client.post(invite, {"email": "new@example.test", "role": "viewer"})

    assert (refused_api.status_code, refused_api.json()["code"]) == (403, "tenant_suspended")
    assert refused_staff.status_code == 403
    assert "An operator suspended this tenant: it is read-only" in suspended_audit
    assert "Unpaid invoice 2024-117" in suspended_audit
    assert (allowed_api.status_code, allowed_staff.status_code) == (201, 200)
    assert "An operator resumed this tenant: it is active again" in audit_html(client, tenant_a)
    assert Invitation.objects.filter(tenant=tenant_a, email="new@example.test").count() == 1
    rows = AuditEvent.objects.filter(tenant=tenant_a, action__startswith="tenant.")
    assert list(rows.order_by("id").values_list("action", "data", "object_id")) == [
        (
            "tenant.suspended",
            {"reason": "Unpaid invoice 2024-117", "sends_in_flight": 0},
            str(tenant_a.pk),
        ),
        ("tenant.resumed", {}, str(tenant_a.pk)),
    ]


def test_a_quota_change_reads_on_the_tenants_audit_page_with_before_and_after(
    tenant_a, member_of, client, settings
):
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = 1024**3
    client.force_login(member_of(tenant_a, "admin").user)

    onboarding.tenant_storage_quota_set(slug=tenant_a.slug, quota_bytes=20 * 1024**3)
    page = audit_html(client, tenant_a)

    assert "An operator changed the attachment storage quota of this tenant" in page
    assert "1073741824 → 21474836480" in page
    assert "no → yes" in page


def test_suspending_twice_is_refused_and_leaves_one_audit_row(tenant_a):
    onboarding.tenant_suspend(slug=tenant_a.slug, reason="abuse report 7")

    with pytest.raises(AdminError) as twice:
        onboarding.tenant_suspend(slug=tenant_a.slug, reason="again")

    assert twice.value.code == "already_suspended"
    assert twice.value.message == "The tenant tenant-a is already suspended; nothing was changed."
    assert AuditEvent.objects.filter(action="tenant.suspended").count() == 1
    assert Tenant.objects.get(pk=tenant_a.pk).status == "suspended"


def test_resuming_an_active_tenant_is_refused_and_changes_nothing(tenant_a):
    with pytest.raises(AdminError) as refused:
        onboarding.tenant_resume(slug=tenant_a.slug)

    assert refused.value.code == "already_active"
    assert "is not suspended" in refused.value.message
    assert not AuditEvent.objects.filter(tenant=tenant_a).exists()


@pytest.mark.parametrize("reason", ["", "   ", "stop\x00now", "x" * 501])
def test_a_suspension_needs_a_plain_reason(tenant_a, reason):
    with pytest.raises(AdminError) as refused:
        onboarding.tenant_suspend(slug=tenant_a.slug, reason=reason)

    assert (refused.value.code, refused.value.field) == ("invalid_reason", "reason")
    assert Tenant.objects.get(pk=tenant_a.pk).status == "active"
    assert not AuditEvent.objects.exists()


def test_an_unknown_slug_is_named_in_the_refusal():
    with pytest.raises(AdminError) as refused:
        onboarding.tenant_suspend(slug="nobody", reason="test")

    assert (refused.value.code, refused.value.message) == (
        "not_found",
        "No tenant has the slug 'nobody'.",
    )


@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_suspensions_one_wins(tenant_a):
    results = run_concurrently(
        lambda i: onboarding.tenant_suspend(slug=tenant_a.slug, reason=f"operator {i}"), 2
    )

    assert sorted(type(r).__name__ for r in results) == ["AdminError", "Stopped"]
    assert AuditEvent.objects.filter(action="tenant.suspended").count() == 1


def test_an_expired_or_replaced_operator_link_is_still_refused(client):
    _, first = onboarding.tenant_create(name="Acme", slug="acme", admin_email="ana@acme.test")
    _, second = onboarding.tenant_invite_admin(slug="acme", admin_email="ana@acme.test")
    Invitation.objects.filter(state="pending").update(expires_at=Now() - timedelta(minutes=1))

    replaced = client.get(onboarding.invitation_url(first))
    expired = client.get(onboarding.invitation_url(second))

    assert replaced.status_code == 410
    assert b"withdrawn or replaced by a newer one. Ask whoever gave you the link" in (
        replaced.content
    )
    assert expired.status_code == 410
    assert b"has expired. Ask whoever gave you the link for a new one." in expired.content
    assert not User.objects.exists() and not Membership.objects.exists()


def test_the_services_refuse_a_closed_operator_invitation_on_their_own():
    tenant, _ = onboarding.tenant_create(name="Acme", slug="acme", admin_email="ana@acme.test")
    invitation = Invitation.objects.get(tenant=tenant)
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=Now() - timedelta(seconds=1))

    with pytest.raises(AdminError) as refused:
        invitations.invitation_accept_with_new_account(
            invitation_id=invitation.pk, password=NEW_PASSWORD
        )

    assert refused.value.code == "expired"
    assert not User.objects.exists()


def test_an_admins_invitation_without_its_inviter_is_not_taken_for_an_operators(
    tenant_a, member_of
):
    """The flag, not an empty ``invited_by``, makes an operator's link: an admin's invitation whose
    inviter went (the column is SET_NULL) still needs an inviter who is an admin."""
    admin = member_of(tenant_a, "admin").user
    invitation, _ = invitations.invitation_create(
        tenant=tenant_a, email="late@example.test", role="admin", actor=admin
    )
    Invitation.objects.filter(pk=invitation.pk).update(invited_by=None)

    with pytest.raises(AdminError) as refused:
        invitations.invitation_accept_with_new_account(
            invitation_id=invitation.pk, password=NEW_PASSWORD
        )

    assert refused.value.code == "inviter_not_admin"
    assert not User.objects.filter(email="late@example.test").exists()


def test_an_operator_invites_a_new_admin_to_a_tenant_with_none_left(tenant_a, client):
    tenant, token = onboarding.tenant_invite_admin(slug=tenant_a.slug, admin_email="new@a.test")

    create_account(client, onboarding.invitation_url(token))

    membership = Membership.objects.get(tenant=tenant_a)
    assert (tenant, membership.user.email, membership.role) == (tenant_a, "new@a.test", "admin")


def test_an_operator_cannot_invite_into_a_suspended_tenant_or_a_member(tenant_a, member_of):
    member = member_of(tenant_a, "viewer").user
    with pytest.raises(AdminError) as a_member:
        onboarding.tenant_invite_admin(slug=tenant_a.slug, admin_email=member.email)
    onboarding.tenant_suspend(slug=tenant_a.slug, reason="test")

    with pytest.raises(AdminError) as suspended:
        onboarding.tenant_invite_admin(slug=tenant_a.slug, admin_email="new@a.test")

    assert (a_member.value.code, suspended.value.code) == ("already_member", "suspended")
    assert not Invitation.objects.exists()
