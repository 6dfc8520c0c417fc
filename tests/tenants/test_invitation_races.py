"""Invitations under concurrency, threads on separate connections: single use (of those taking one
link, exactly one wins), and an acceptance racing its tenant's suspension."""

import threading

import pytest
from django.db import transaction

from tenants import invitations
from tenants.models import AuditEvent, Invitation, Membership, User
from tenants.onboarding import tenant_suspend
from tenants.services import AdminError
from tests.intents.helpers import blocked_on_a_lock, in_thread, run_concurrently

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


@pytest.mark.parametrize("account", ["existing", "new"])
def test_an_acceptance_racing_a_suspension_waits_for_it_and_is_refused(
    tenant_a, tenant_b, member_of, account
):
    """Found by the two-tenant probe, the invitation's side of what single sign-on's newcomers
    were fixed for (tests/tenants/test_probe_suspended_sso.py): the acceptance read the tenant
    before the suspension committed and made a member of a suspended tenant. It now locks the
    tenant's row against the suspension's lock and sees it."""
    admin = member_of(tenant_a, "admin").user
    person = member_of(tenant_b, "viewer").user if account == "existing" else None
    email = person.email if person else "newcomer@example.test"
    invitation, _ = invitations.invitation_create(
        tenant=tenant_a, email=email, role="approver", actor=admin
    )
    suspended, release = threading.Event(), threading.Event()

    def suspend():
        with transaction.atomic():
            tenant_suspend(slug=tenant_a.slug, reason="Unpaid invoice 2024-118")
            suspended.set()
            release.wait(10)

    def accept():
        if person is not None:
            return invitations.invitation_accept(invitation_id=invitation.pk, user=person)
        return invitations.invitation_accept_with_new_account(
            invitation_id=invitation.pk, password="a-long-enough-pass-1"
        )

    suspension, acceptance = [], []
    holder = in_thread(suspend, suspension)
    assert suspended.wait(10)
    accepting = in_thread(accept, acceptance)
    waited = blocked_on_a_lock()
    release.set()
    for thread in (holder, accepting):
        thread.join(20)
    assert waited
    assert isinstance(acceptance[0], AdminError) and acceptance[0].code == "suspended"
    assert not Membership.objects.filter(tenant=tenant_a, user__email=email).exists()
    assert not User.objects.filter(email="newcomer@example.test").exists()
    assert Invitation.objects.get(pk=invitation.pk).state == "pending"
