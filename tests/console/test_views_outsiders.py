"""The admin pages tried as outsiders the access walk (tests/ui/test_access_walk.py) does not
play: a deactivated admin, one person who is an admin of one tenant and a viewer of another, and
forms that name another tenant's mailbox or member."""

import pytest
from django.urls import reverse

from intents.models import Suppression
from mailboxes.models import Mailbox
from tenants import invitations
from tenants.models import AgentToken, AuditEvent, Invitation, Membership, Tenant
from tenants.tokens import token_create
from tests.factories import make_local_mailbox
from tests.pages import based_on
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db


def _client(user):
    client = RoutedClient()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return client


@pytest.fixture
def b_world(tenant_b, member_of):
    admin_b = member_of(tenant_b, "admin")
    approver_b = member_of(tenant_b, "approver")
    mailbox_b = make_local_mailbox(tenant_b)
    token_b, _ = token_create(
        tenant=tenant_b, name="agent-b", scopes=["drafts:write"], actor=admin_b.user
    )
    invitation_b, _ = invitations.invitation_create(
        tenant=tenant_b, email="new-b@example.test", role="admin", actor=admin_b.user
    )
    suppression_b = Suppression.objects.create(
        tenant=tenant_b, address="gone@example.com", reason="manual", note="x"
    )
    return {
        "admin": admin_b,
        "approver": approver_b,
        "mailbox": mailbox_b,
        "token": token_b,
        "invitation": invitation_b,
        "suppression": suppression_b,
    }


def _snapshot(tenant_b):
    return (
        list(
            Membership.objects.filter(tenant=tenant_b)
            .order_by("pk")
            .values_list("role", "is_active", "is_away", "approve_all_mailboxes")
        ),
        list(AgentToken.objects.filter(tenant=tenant_b).values_list("revoked_at", flat=True)),
        list(Mailbox.objects.filter(tenant=tenant_b).values_list("status", "policy_mode")),
        list(Invitation.objects.filter(tenant=tenant_b).values_list("state", flat=True)),
        Suppression.objects.filter(tenant=tenant_b).count(),
        AuditEvent.objects.filter(tenant=tenant_b).count(),
    )


def _foreign_posts(slug, b):
    m, mb = b["approver"].pk, b["mailbox"].pk
    return [
        ("admin_member_role", [slug, m], {"role": "admin"}),
        ("admin_member_rights", [slug, m], {"approve_all_mailboxes": "on"}),
        ("admin_member_away", [slug, m], {"away": "1"}),
        ("admin_member_deactivate", [slug, m], {}),
        ("admin_member_reactivate", [slug, m], {}),
        ("admin_member_two_factor_reset", [slug, m], {}),
        ("admin_invitation_revoke", [slug, b["invitation"].pk], {}),
        ("token_revoke", [slug, b["token"].pk], {}),
        ("mailbox_policy", [slug, mb], {"policy_mode": "restricted", "allowed_domains": "a.io"}),
        ("mailbox_status", [slug, mb], {"status": "disabled"}),
        ("mailbox_assignment", [slug, mb], {"sla_minutes": "5"}),
        ("mailbox_retry", [slug, mb], {}),
        ("admin_suppression_remove", [slug, b["suppression"].pk], {"reason": "because"}),
    ]


def test_deactivated_admin_is_refused_everywhere(tenant_b, member_of, b_world):
    gone = member_of(tenant_b, "admin", is_active=False)
    client = _client(gone.user)
    before = _snapshot(tenant_b)
    answers = {
        name: client.post(reverse(name, args=args), data).status_code
        for name, args, data in _foreign_posts(tenant_b.slug, b_world)
    }
    assert _snapshot(tenant_b) == before
    assert set(answers.values()) == {404}, answers


def test_an_admin_of_one_tenant_is_only_a_viewer_in_the_other(
    tenant_a, tenant_b, member_of, b_world
):
    both = member_of(tenant_a, "admin")
    Membership.objects.create(tenant=tenant_b, user=both.user, role="viewer")
    client = _client(both.user)
    before = _snapshot(tenant_b)
    on_b = {
        name: client.post(reverse(name, args=args), data).status_code
        for name, args, data in _foreign_posts(tenant_b.slug, b_world)
    }
    assert set(on_b.values()) == {403}, on_b
    # Demoting/deactivating oneself in A must not touch the B membership.
    member_of(tenant_a, "admin")
    client.post(reverse("admin_member_role", args=[tenant_a.slug, both.pk]), {"role": "viewer"})
    assert Membership.objects.get(tenant=tenant_b, user=both.user).role == "viewer"
    assert _snapshot(tenant_b)[:5] == before[:5]


def test_token_invite_and_escalation_cannot_name_another_tenants_rows(
    tenant_a, tenant_b, member_of, b_world
):
    client = _client(member_of(tenant_a, "admin").user)
    token = client.post(
        reverse("token_new", args=[tenant_a.slug]),
        {"name": "x", "scopes": ["drafts:write"], "mailboxes": [b_world["mailbox"].pk]},
    )
    invite = client.post(
        reverse("admin_members", args=[tenant_a.slug]),
        {
            "email": "q@example.test",
            "role": "approver",
            "approve": "some",
            "mailboxes": [b_world["mailbox"].pk],
        },
    )
    escalate = client.post(
        reverse("admin_deadlines", args=[tenant_a.slug]),
        {
            "escalate_to": b_world["admin"].user_id,
            "based_on": based_on(
                client, reverse("admin_policies", args=[tenant_a.slug]), "deadlines_form"
            ),
        },
    )
    assert (token.status_code, invite.status_code, escalate.status_code) == (422, 400, 400)
    assert not AgentToken.objects.filter(tenant=tenant_a).exists()
    assert not Invitation.objects.filter(tenant=tenant_a).exists()
    assert Tenant.objects.get(pk=tenant_a.pk).escalate_to_id is None
