"""Sudo mode for a tenant admin (tenants.sudo): what outlives a stolen admin session (an agent
token, an agent-event endpoint or its new secret, a new mailbox key, the single sign-on settings,
an invitation, a higher role, the two-factor requirement turned off) needs a recent proof. A
stale session's request changes nothing and lands on "Confirm it is you", which leads back to the
form; with the password given there, the same request is carried out. Lowering and reading need
none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import reverse

from intents.models import AgentEventEndpoint
from intents.services.event_endpoints import (
    endpoint_create,
    endpoint_disable,
    endpoint_rotation_fingerprint,
)
from mailboxes.models import Mailbox
from tenants import oidc_signin
from tenants.models import (
    AgentToken,
    Invitation,
    Membership,
    SingleSignOn,
    Tenant,
    TotpDevice,
)
from tenants.services import member_rights_fingerprint, member_role_fingerprint
from tenants.signin_policy import two_factor_fingerprint
from tests.tenants.test_sudo import age_proof, sent_to_confirm
from tests.tenants.test_two_factor import enrol

pytestmark = pytest.mark.django_db


@dataclass
class Action:
    url: str
    data: dict
    back: str
    state: Callable[[], Any]


def token(tenant, admin, client, request) -> Action:
    return Action(
        reverse("token_new", args=[tenant.slug]),
        {"name": "bot", "scopes": ["drafts:read"]},
        reverse("token_list", args=[tenant.slug]),
        lambda: AgentToken.objects.filter(tenant=tenant).count(),
    )


def event_endpoint(tenant, admin, client, request) -> Action:
    return Action(
        reverse("agent_events_new", args=[tenant.slug]),
        {"url": "https://agent.example.com/hooks", "event_types": ["draft.approved"]},
        reverse("agent_events", args=[tenant.slug]),
        lambda: AgentEventEndpoint.objects.filter(tenant=tenant).count(),
    )


def endpoint_secret(tenant, admin, client, request) -> Action:
    endpoint, _ = endpoint_create(
        tenant=tenant, url="https://agent.example.com/", event_types=["draft.approved"], actor=admin
    )
    url = reverse("agent_events_rotate", args=[tenant.slug, endpoint.pk])
    return Action(
        url,
        {"based_on": endpoint_rotation_fingerprint(endpoint)},
        url,
        lambda: AgentEventEndpoint.objects.values_list("secret_sealed").get(pk=endpoint.pk),
    )


def endpoint_enabled(tenant, admin, client, request) -> Action:
    """Found by an outside probe: enabling an endpoint an admin had switched off (its URL no
    longer theirs) sent the tenant's events there again without a proof."""
    endpoint, _ = endpoint_create(
        tenant=tenant, url="https://agent.example.com/", event_types=["draft.approved"], actor=admin
    )
    endpoint_disable(tenant=tenant, endpoint_id=endpoint.pk, actor=admin)
    return Action(
        reverse("agent_events_enable", args=[tenant.slug, endpoint.pk]),
        {},
        reverse("agent_events", args=[tenant.slug]),
        lambda: AgentEventEndpoint.objects.values_list("enabled").get(pk=endpoint.pk),
    )


def mailbox_key(tenant, admin, client, request) -> Action:
    mailbox = request.getfixturevalue("mailbox_factory")(tenant)
    return Action(
        reverse("mailbox_key_replace", args=[tenant.slug, mailbox.pk]),
        {"confirmed": "yes"},
        reverse("mailbox_detail", args=[tenant.slug, mailbox.pk]),
        lambda: Mailbox.objects.values_list("provider_api_key_id").get(pk=mailbox.pk),
    )


def mailbox_inbox(tenant, admin, client, request) -> Action:
    mailbox = request.getfixturevalue("mailbox_factory")(tenant)
    request.getfixturevalue("sandbox").sdk().inboxes.delete(mailbox.inbox_id)
    return Action(
        reverse("mailbox_inbox_recover", args=[tenant.slug, mailbox.pk]),
        {"confirmed": "yes"},
        reverse("mailbox_detail", args=[tenant.slug, mailbox.pk]),
        lambda: Mailbox.objects.values_list("agentmail_client_id").get(pk=mailbox.pk),
    )


def single_sign_on(tenant, admin, client, request) -> Action:
    return Action(
        reverse("admin_sso_settings", args=[tenant.slug]),
        {
            "enabled": "on",
            "issuer": "https://login.acme.test/realms/acme",
            "client_id": "countersign",
            "client_secret": "s3cret",
            "password_signin_allowed": "on",
            "domains": "acme.test",
            "jit_role": "",
            "based_on": oidc_signin.sso_fingerprint(None),
        },
        reverse("admin_signin", args=[tenant.slug]),
        lambda: SingleSignOn.objects.filter(tenant=tenant).count(),
    )


def admin_invitation(tenant, admin, client, request) -> Action:
    return Action(
        reverse("admin_members", args=[tenant.slug]),
        {"email": "new@example.test", "role": "admin"},
        reverse("admin_members", args=[tenant.slug]),
        lambda: Invitation.objects.filter(tenant=tenant).count(),
    )


def role_raised(tenant, admin, client, request) -> Action:
    viewer = request.getfixturevalue("member_of")(tenant, "viewer")
    return Action(
        reverse("admin_member_role", args=[tenant.slug, viewer.pk]),
        {"role": "admin", "based_on": member_role_fingerprint(viewer)},
        reverse("admin_member", args=[tenant.slug, viewer.pk]),
        lambda: Membership.objects.values_list("role").get(pk=viewer.pk),
    )


def two_factor_off(tenant, admin, client, request) -> Action:
    enrol(client)
    Tenant.objects.filter(pk=tenant.pk).update(require_two_factor=True)
    tenant.refresh_from_db()
    return Action(
        reverse("admin_two_factor_policy", args=[tenant.slug]),
        {"based_on": two_factor_fingerprint(tenant)},
        reverse("admin_signin", args=[tenant.slug]),
        lambda: Tenant.objects.values_list("require_two_factor").get(pk=tenant.pk),
    )


def rights_widened(tenant, admin, client, request) -> Action:
    approver = request.getfixturevalue("member_of")(tenant, "approver")
    Membership.objects.filter(pk=approver.pk).update(approve_all_mailboxes=False)
    approver.refresh_from_db()
    return Action(
        reverse("admin_member_rights", args=[tenant.slug, approver.pk]),
        {"approve_all_mailboxes": "on", "based_on": member_rights_fingerprint(approver)},
        reverse("admin_member", args=[tenant.slug, approver.pk]),
        lambda: Membership.objects.values_list("approve_all_mailboxes").get(pk=approver.pk),
    )


def member_two_factor_reset(tenant, admin, client, request) -> Action:
    member = request.getfixturevalue("member_of")(tenant, "approver")
    TotpDevice.objects.create(user=member.user, name="phone", confirmed=True)
    return Action(
        reverse("admin_member_two_factor_reset", args=[tenant.slug, member.pk]),
        {},
        reverse("admin_member", args=[tenant.slug, member.pk]),
        lambda: TotpDevice.objects.filter(user=member.user).count(),
    )


def member_reactivated(tenant, admin, client, request) -> Action:
    member = request.getfixturevalue("member_of")(tenant, "admin")
    Membership.objects.filter(pk=member.pk).update(is_active=False)
    return Action(
        reverse("admin_member_reactivate", args=[tenant.slug, member.pk]),
        {},
        reverse("admin_member", args=[tenant.slug, member.pk]),
        lambda: Membership.objects.values_list("is_active").get(pk=member.pk),
    )


@pytest.mark.parametrize(
    "action",
    [
        token,
        member_reactivated,
        rights_widened,
        member_two_factor_reset,
        event_endpoint,
        endpoint_secret,
        endpoint_enabled,
        mailbox_key,
        mailbox_inbox,
        single_sign_on,
        admin_invitation,
        role_raised,
        two_factor_off,
    ],
)
def test_a_stale_admin_session_changes_nothing_until_it_is_proven_again(
    tenant_a, member_of, signed_in, password, settings, request, action
):
    admin = member_of(tenant_a, "admin").user
    client = signed_in(admin)
    wanted = action(tenant_a, admin, client, request)
    before = wanted.state()
    age_proof(client, settings)

    held = client.post(wanted.url, wanted.data)

    confirm = sent_to_confirm(held, wanted.back)
    assert wanted.state() == before
    page = client.get(confirm).content.decode()
    assert "Nothing was changed: confirm it is you, then do it again." in page
    assert client.post(confirm, {"password": password})["Location"] == wanted.back
    done = client.post(wanted.url, wanted.data)
    assert done.status_code in (200, 302)
    assert wanted.state() != before


def test_the_question_before_a_new_secret_or_key_asks_for_the_proof_first(
    tenant_a, member_of, signed_in, settings, mailbox_factory
):
    """Rotating a secret and replacing a key each ask a question first: the proof comes before
    it, so that the admin's answer is carried out, not sent round again."""
    admin = member_of(tenant_a, "admin").user
    endpoint, _ = endpoint_create(
        tenant=tenant_a,
        url="https://agent.example.com/",
        event_types=["draft.approved"],
        actor=admin,
    )
    mailbox = mailbox_factory(tenant_a)
    client = signed_in(admin)
    age_proof(client, settings)
    rotate = reverse("agent_events_rotate", args=[tenant_a.slug, endpoint.pk])

    question = client.get(rotate)
    replace = client.post(reverse("mailbox_key_replace", args=[tenant_a.slug, mailbox.pk]))

    sent_to_confirm(question, rotate)
    sent_to_confirm(replace, reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk]))


def test_only_what_adds_lasting_power_asks_reading_lowering_and_requiring_do_not(
    tenant_a, member_of, signed_in, settings
):
    """A viewer made approver may approve sends: held. Lowering an admin, requiring two-factor
    sign-in and reading the admin pages go through on a stale session."""
    admin = member_of(tenant_a, "admin").user
    other_admin, viewer = member_of(tenant_a, "admin"), member_of(tenant_a, "viewer")
    client = signed_in(admin)
    age_proof(client, settings)

    pages = [
        client.get(reverse(name, args=[tenant_a.slug])).status_code
        for name in ("token_list", "agent_events", "admin_signin", "admin_members")
    ]
    raised = client.post(
        reverse("admin_member_role", args=[tenant_a.slug, viewer.pk]),
        {"role": "approver", "based_on": member_role_fingerprint(viewer)},
    )
    lowered = client.post(
        reverse("admin_member_role", args=[tenant_a.slug, other_admin.pk]),
        {"role": "viewer", "based_on": member_role_fingerprint(other_admin)},
    )
    required = client.post(
        reverse("admin_two_factor_policy", args=[tenant_a.slug]),
        {"require_two_factor": "on", "based_on": two_factor_fingerprint(tenant_a)},
    )

    assert pages == [200, 200, 200, 200]
    sent_to_confirm(raised, reverse("admin_member", args=[tenant_a.slug, viewer.pk]))
    assert Membership.objects.get(pk=viewer.pk).role == "viewer"
    assert lowered.status_code == 302 and required.status_code == 302
    assert Membership.objects.get(pk=other_admin.pk).role == "viewer"
    assert Tenant.objects.get(pk=tenant_a.pk).require_two_factor
