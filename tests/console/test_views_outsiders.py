"""The admin pages tried as outsiders the access walk (tests/ui/test_access_walk.py) does not
play: a deactivated admin, one person who is an admin of one tenant and a viewer of another, and
forms that name another tenant's mailbox or member."""

import pytest
from django.urls import reverse

from intents.models import AgentEvent, AgentEventDelivery, AgentEventEndpoint, Suppression
from intents.services import event_endpoints
from mailboxes.models import Mailbox
from tenants import invitations
from tenants.models import AgentToken, AuditEvent, Invitation, Membership, Tenant
from tenants.tokens import token_create
from tests.factories import make_local_mailbox
from tests.pages import based_on
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db


def _client(user, **options):
    client = RoutedClient(**options)
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
    endpoint_b, _ = event_endpoints.endpoint_create(
        tenant=tenant_b,
        url="https://b.example.com/hook",
        event_types=["draft.approved"],
        actor=admin_b.user,
    )
    event_endpoints.endpoint_disable(tenant=tenant_b, endpoint_id=endpoint_b.pk, actor=admin_b.user)
    event = AgentEvent.objects.create(
        tenant=tenant_b, public_id="evt_b_1", type="draft.approved", payload={}
    )
    delivery_b = AgentEventDelivery.objects.create(
        tenant=tenant_b, endpoint=endpoint_b, event=event, status="failed"
    )
    return {
        "admin": admin_b,
        "approver": approver_b,
        "member": member_of(tenant_b, "approver", is_active=False),
        "mailbox": mailbox_b,
        "token": token_b,
        "invitation": invitation_b,
        "suppression": suppression_b,
        "endpoint": endpoint_b,
        "delivery": delivery_b,
    }


def _snapshot(tenant):
    return (
        list(
            Membership.objects.filter(tenant=tenant)
            .order_by("pk")
            .values_list("role", "is_active", "is_away", "approve_all_mailboxes")
        ),
        list(AgentToken.objects.filter(tenant=tenant).values_list("revoked_at", flat=True)),
        list(
            Mailbox.objects.filter(tenant=tenant).values_list(
                "status", "policy_mode", "sla_minutes", "key_refused_at", "api_key_sealed"
            )
        ),
        list(Invitation.objects.filter(tenant=tenant).values_list("state", flat=True)),
        Suppression.objects.filter(tenant=tenant).count(),
        list(
            AgentEventEndpoint.objects.filter(tenant=tenant).values_list("enabled", "secret_sealed")
        ),
        AgentEventDelivery.objects.filter(tenant=tenant).count(),
        AuditEvent.objects.filter(tenant=tenant).count(),
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


def _every_id_url(slug, b):
    """Every console URL that names a row by id, with B's row, and what it posts."""
    m, mb, ep = b["member"].pk, b["mailbox"].pk, b["endpoint"].pk
    return [
        ("admin_member", [slug, m], None),
        ("admin_member_role", [slug, m], {"role": "admin"}),
        ("admin_member_rights", [slug, m], {"approve_all_mailboxes": "on", "based_on": "x"}),
        ("admin_member_away", [slug, m], {"away": "1"}),
        ("admin_member_deactivate", [slug, b["admin"].pk], {}),
        ("admin_member_deactivate", [slug, b["admin"].pk], None),
        ("admin_member_reactivate", [slug, m], {}),
        ("admin_member_two_factor_reset", [slug, m], {}),
        ("admin_invitation_revoke", [slug, b["invitation"].pk], {}),
        ("admin_suppression_remove", [slug, b["suppression"].pk], {"reason": "because"}),
        ("token_revoke", [slug, b["token"].pk], {}),
        ("token_revoke", [slug, b["token"].pk], None),
        ("agent_events_rotate", [slug, ep], {}),
        ("agent_events_rotate", [slug, ep], None),
        ("agent_events_delete", [slug, ep], {}),
        ("agent_events_delete", [slug, ep], None),
        ("agent_events_enable", [slug, ep], {}),
        ("agent_events_disable", [slug, ep], {}),
        ("agent_events_resend", [slug, b["delivery"].pk], {}),
        ("mailbox_detail", [slug, mb], None),
        ("mailbox_policy", [slug, mb], {"policy_mode": "restricted", "allowed_domains": "a.io"}),
        ("mailbox_assignment", [slug, mb], {"sla_minutes": "5", "based_on": "x"}),
        ("mailbox_status", [slug, mb], {"status": "disabled"}),
        ("mailbox_retry", [slug, mb], {}),
        ("mailbox_key_check", [slug, mb], {}),
        ("mailbox_key_replace", [slug, mb], {"confirmed": "yes"}),
        ("mailbox_inbox_recover", [slug, mb], {"confirmed": "yes"}),
    ]


def test_another_tenants_ids_through_this_tenants_urls_are_404_and_change_nothing(
    tenant_a, tenant_b, member_of, b_world
):
    """An admin of A who is also a viewer of B names B's rows through A's URLs."""
    admin_a = member_of(tenant_a, "admin")
    Membership.objects.create(tenant=tenant_b, user=admin_a.user, role="viewer")
    client = _client(admin_a.user, raise_request_exception=False)
    before = _snapshot(tenant_b)
    answers = {}
    for name, args, data in _every_id_url(tenant_a.slug, b_world):
        url = reverse(name, args=args)
        answer = client.get(url) if data is None else client.post(url, data)
        answers[f"{'GET' if data is None else 'POST'} {name}"] = answer.status_code
    assert _snapshot(tenant_b) == before
    assert {k: v for k, v in answers.items() if v != 404} == {}
