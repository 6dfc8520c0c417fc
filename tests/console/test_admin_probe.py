"""Outside probes of the tenant admin console: another tenant's ids through every URL that
names a row, the token secret after its one showing, mailbox provisioning by an admin demoted
meanwhile or of a disabled mailbox, and two admins saving one member's rights at once."""

import logging
import re
import uuid

import pytest
from django.conf import settings
from django.urls import reverse

from intents.models import AgentEvent, AgentEventDelivery, AgentEventEndpoint, Suppression
from intents.services import event_endpoints
from mailboxes import provisioning
from mailboxes.models import Mailbox
from tenants import invitations, services
from tenants.models import AgentToken, AuditEvent, Invitation, Membership
from tenants.stale import StaleSave
from tenants.tokens import token_create
from tests.factories import make_local_mailbox
from tests.intents.helpers import run_concurrently
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db


def _client(user):
    client = RoutedClient(raise_request_exception=False)
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return client


@pytest.fixture
def b_world(tenant_b, member_of):
    admin_b = member_of(tenant_b, "admin")
    approver_b = member_of(tenant_b, "approver", is_active=False)
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
        "member": approver_b,
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
    ]


def test_another_tenants_ids_through_this_tenants_urls_are_404_and_change_nothing(
    tenant_a, tenant_b, member_of, b_world
):
    """An admin of A who is also a viewer of B names B's rows through A's URLs."""
    admin_a = member_of(tenant_a, "admin")
    Membership.objects.create(tenant=tenant_b, user=admin_a.user, role="viewer")
    client = _client(admin_a.user)
    before = _snapshot(tenant_b)
    answers = {}
    for name, args, data in _every_id_url(tenant_a.slug, b_world):
        url = reverse(name, args=args)
        answer = client.get(url) if data is None else client.post(url, data)
        answers[f"{'GET' if data is None else 'POST'} {name}"] = answer.status_code
    assert _snapshot(tenant_b) == before
    assert {k: v for k, v in answers.items() if v != 404} == {}


def test_a_token_secret_is_in_no_page_log_or_audit_row_after_creation(tenant_a, member_of, caplog):
    admin = member_of(tenant_a, "admin")
    client = _client(admin.user)
    with caplog.at_level(logging.DEBUG):
        created = client.post(
            reverse("token_new", args=[tenant_a.slug]),
            {"name": "bot", "scopes": ["drafts:write"]},
        )
    plaintext = re.search(r"cs_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}", created.content.decode()).group(0)
    secret = plaintext.split("_", 2)[2]
    pages = [
        client.get(reverse("token_list", args=[tenant_a.slug])),
        client.get(reverse("token_new", args=[tenant_a.slug]), follow=True),
        client.get(reverse("admin_audit", args=[tenant_a.slug])),
        client.get(reverse("admin_audit_csv", args=[tenant_a.slug])),
        client.get(reverse("admin_home", args=[tenant_a.slug])),
    ]
    bodies = [b"".join(p.streaming_content) if p.streaming else p.content for p in pages]
    assert all(p.status_code == 200 for p in pages)
    assert not [b for b in bodies if secret.encode() in b]
    assert secret not in caplog.text
    assert secret not in str(list(AuditEvent.objects.values_list("data", flat=True)))
    assert secret not in str(list(AgentToken.objects.values()))


@pytest.mark.parametrize("how", ["retry", "create again"])
def test_provisioning_refuses_an_admin_demoted_meanwhile(tenant_a, member_of, sandbox, how):
    """Found by this probe: provisioning (the mailbox page's retry, and a create that finds the
    row) never checked the actor again, so an admin demoted while their request ran brought
    the mailbox into service: an inbox and a key at AgentMail, the mailbox active."""
    alice = member_of(tenant_a, "admin")
    bob = member_of(tenant_a, "admin")
    username = f"waiting-{uuid.uuid4().hex[:8]}"
    mailbox = Mailbox.objects.create(
        tenant=tenant_a,
        username=username,
        address=f"{username}@{settings.AGENTMAIL_INBOX_DOMAIN}",
        status=Mailbox.Status.PROVISIONING,
    )
    services.member_set_role(tenant=tenant_a, membership_id=alice.pk, role="viewer", actor=bob.user)
    audited = AuditEvent.objects.count()
    with pytest.raises(services.NotAnAdmin):
        if how == "retry":
            provisioning.mailbox_provision(mailbox=mailbox, actor=alice.user)
        else:
            provisioning.mailbox_create(tenant=tenant_a, username=username, actor=alice.user)
    mailbox.refresh_from_db()
    assert (mailbox.status, mailbox.inbox_id, mailbox.api_key_sealed) == ("provisioning", "", "")
    assert AuditEvent.objects.count() == audited


def test_creating_a_disabled_mailbox_again_is_refused_not_called_ready(
    tenant_a, member_of, mailbox_factory
):
    """Found by this probe: the create form with a disabled mailbox's username answered
    "connected and ready to send" and left it disabled."""
    admin = member_of(tenant_a, "admin")
    username = f"paused-{uuid.uuid4().hex[:8]}"
    mailbox = mailbox_factory(tenant_a, username=username)
    client = _client(admin.user)
    client.post(reverse("mailbox_status", args=[tenant_a.slug, mailbox.pk]), {"status": "disabled"})
    again = client.post(reverse("mailbox_create", args=[tenant_a.slug]), {"username": username})
    assert again.status_code == 400
    assert "already has the mailbox" in again.content.decode()
    assert Mailbox.objects.get(pk=mailbox.pk).status == "disabled"


@pytest.mark.django_db(transaction=True)
def test_two_admins_saving_one_members_rights_from_the_same_page_one_wins(tenant_a, member_of):
    alice = member_of(tenant_a, "admin")
    bob = member_of(tenant_a, "admin")
    carol = member_of(tenant_a, "approver")
    first = make_local_mailbox(tenant_a, username="first")
    second = make_local_mailbox(tenant_a, username="second")
    shown = services.member_rights_fingerprint(carol)
    admins, wanted = [alice.user, bob.user], [first.pk, second.pk]

    def save(i):
        return services.member_set_mailbox_rights(
            tenant=tenant_a,
            membership_id=carol.pk,
            approve_all_mailboxes=False,
            mailbox_ids=[wanted[i]],
            actor=admins[i],
            based_on=shown,
        )

    results = run_concurrently(save, 2)
    won = [i for i, r in enumerate(results) if not isinstance(r, Exception)]
    assert len(won) == 1, results
    assert isinstance(results[1 - won[0]], StaleSave)
    assert list(carol.approve_mailboxes.values_list("pk", flat=True)) == [wanted[won[0]]]
    assert AuditEvent.objects.filter(action="member.rights_changed").count() == 1
