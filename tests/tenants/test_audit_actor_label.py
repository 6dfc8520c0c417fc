"""An audit row names its actor by the address they had when they acted (AuditEvent.actor_label):
every writer fills it, and a later change of the address leaves the row as it was."""

from __future__ import annotations

import pytest

from mailboxes.provisioning import mailbox_set_status
from tenants.invitations import invitation_accept_with_new_account, invitation_create
from tenants.models import AuditEvent, User
from tenants.preferences import user_set_preferences
from tenants.services import member_deactivate
from tenants.signin_audit import signin_audit
from tenants.tokens import token_create, token_revoke

pytestmark = pytest.mark.django_db


def test_every_writer_keeps_the_actors_address_as_it_was_when_they_acted(
    tenant_a, admin_a, member_of, mailbox_a, password
):
    """One action of each writer (the shared audit_record, tokens, mailboxes, invitations, a new
    account, preferences, and sign-in's bulk insert); then the actors' addresses change."""
    admin = admin_a.user
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=admin)
    token_revoke(tenant=tenant_a, token_id=token.pk, actor=admin)
    member_deactivate(tenant=tenant_a, membership_id=member_of(tenant_a, "viewer").pk, actor=admin)
    mailbox_set_status(tenant=tenant_a, mailbox_id=mailbox_a.pk, status="disabled", actor=admin)
    invitation, _secret = invitation_create(
        tenant=tenant_a, email="new.person@example.test", role="viewer", actor=admin
    )
    newcomer = invitation_accept_with_new_account(invitation_id=invitation.pk, password=password)
    user_set_preferences(user=admin, language="de", time_zone="Europe/Berlin")
    signin_audit(action="signin.succeeded", user=admin)
    then = dict(User.objects.values_list("pk", "email"))
    for actor in (admin.pk, newcomer.user_id):
        User.objects.filter(pk=actor).update(email=f"renamed{actor}@example.test")

    rows = list(AuditEvent.objects.filter(actor__isnull=False).values_list("action", "actor_id"))
    labels = AuditEvent.objects.filter(actor__isnull=False).values_list("actor_id", "actor_label")

    assert {action for action, _actor in rows} >= {
        "token.created",
        "token.revoked",
        "member.deactivated",
        "mailbox.disabled",
        "invitation.invited",
        "invitation.accepted",
        "user.created",
        "user.preferences_changed",
        "signin.succeeded",
    }
    assert [label for _actor, label in labels] == [then[actor] for actor, _label in labels]
    assert not [label for _actor, label in labels if label.startswith("renamed")]


def test_a_row_without_an_actor_names_nobody(tenant_a):
    AuditEvent.objects.create(tenant=tenant_a, actor=None, action="mailbox.key_refused")
    AuditEvent.objects.bulk_create([AuditEvent(tenant=tenant_a, action="signin.failed")])

    assert list(AuditEvent.objects.values_list("actor_label", flat=True)) == ["", ""]
