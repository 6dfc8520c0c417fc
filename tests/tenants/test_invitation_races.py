"""Single use under concurrency: threads on separate connections take one link, exactly one wins."""

import pytest

from tenants import invitations
from tenants.models import AuditEvent, Invitation, Membership, User
from tenants.services import AdminError
from tests.intents.helpers import run_concurrently

pytestmark = pytest.mark.django_db(transaction=True)


def test_ten_concurrent_new_account_acceptances_make_one_account(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    invitation, _ = invitations.invitation_create(
        tenant=tenant_a, email="race@example.test", role="admin", actor=admin
    )

    def accept(i):
        return invitations.invitation_accept_with_new_account(
            invitation_id=invitation.pk, password=f"a-long-enough-pass-{i}"
        )

    results = run_concurrently(accept, 10)
    winners = [r for r in results if isinstance(r, Membership)]
    assert len(winners) == 1
    assert all(isinstance(r, AdminError) and r.code == "used" for r in results if r not in winners)
    assert User.objects.filter(email="race@example.test").count() == 1
    assert Membership.objects.filter(tenant=tenant_a, user__email="race@example.test").count() == 1
    assert AuditEvent.objects.filter(action="invitation.accepted").count() == 1


def test_accept_races_decline_and_revoke_one_wins(tenant_a, tenant_b, member_of):
    admin = member_of(tenant_a, "admin").user
    person = member_of(tenant_b, "viewer").user
    invitation, _ = invitations.invitation_create(
        tenant=tenant_a, email=person.email, role="approver", actor=admin
    )

    def act(i):
        if i % 3 == 0:
            return invitations.invitation_accept(invitation_id=invitation.pk, user=person)
        if i % 3 == 1:
            return invitations.invitation_decline(invitation_id=invitation.pk, user=person)
        return invitations.invitation_revoke(
            tenant=tenant_a, invitation_id=invitation.pk, actor=admin
        )

    results = run_concurrently(act, 12)
    assert len([r for r in results if not isinstance(r, Exception)]) == 1
    assert all(isinstance(r, AdminError) for r in results if isinstance(r, Exception))
    state = Invitation.objects.get(pk=invitation.pk).state
    joined = Membership.objects.filter(tenant=tenant_a, user=person).count()
    assert joined == (state == "accepted")
    closing = AuditEvent.objects.filter(
        tenant=tenant_a,
        action__in=["invitation.accepted", "invitation.declined", "invitation.revoked"],
    )
    assert closing.count() == 1


def test_two_admins_inviting_one_address_at_once_leave_one_live_link(tenant_a, member_of):
    admins = [member_of(tenant_a, "admin").user for _ in range(2)]

    def invite(i):
        return invitations.invitation_create(
            tenant=tenant_a, email="twice@example.test", role="viewer", actor=admins[i % 2]
        )

    results = run_concurrently(invite, 6)
    assert all(isinstance(r, tuple | AdminError) for r in results)
    assert Invitation.objects.filter(email="twice@example.test", state="pending").count() == 1
