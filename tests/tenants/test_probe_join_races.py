"""What one tenant's admin may do to a member depends on whether the person belongs to another
tenant too (``tenants.services.belongs_elsewhere``): a reset of their second factors is refused
then (those factors guard the other tenant as well), and a deactivation leaves their sessions
alone. The question is asked under a lock of the person's row. Found by an outside probe: the
person's acceptance of another tenant's invitation did not take that lock, so a reset asked
while the acceptance was under way read the new membership as not there yet, and A's admin
removed the factors of someone who, a moment later, was a member of B."""

import pyotp
import pytest

from tenants import invitations, services, signin_policy, two_factor
from tenants.models import Membership, TotpDevice, UserSession
from tests.intents.helpers import blocked_on_a_lock, held_open, in_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def joining_b(tenant_a, tenant_b, member_of):
    """(the person's membership of A, A's admin, B's invitation to the person): the person, an
    approver of A with an authenticator and a session, was invited to B."""
    person = member_of(tenant_a, "approver")
    admin_a = member_of(tenant_a, "admin")
    device = two_factor.totp_begin(user=person.user)
    two_factor.totp_confirm(user=person.user, code=pyotp.TOTP(two_factor.totp_secret(device)).now())
    UserSession.objects.create(session_key="k" * 32, user=person.user)
    invitation, _token = invitations.invitation_create(
        tenant=tenant_b,
        email=person.user.email,
        role="viewer",
        actor=member_of(tenant_b, "admin").user,
    )
    return person, admin_a, invitation


def _accept(person, invitation):
    return lambda: invitations.invitation_accept(invitation_id=invitation.pk, user=person.user)


def test_a_reset_asked_while_the_person_joins_another_tenant_waits_and_is_refused(
    tenant_a, joining_b
):
    person, admin_a, invitation = joining_b
    joined: list = []
    resetting: list = []
    with held_open(_accept(person, invitation), joined):
        reset = in_thread(
            lambda: signin_policy.member_reset_two_factor(
                tenant=tenant_a, membership_id=person.pk, actor=admin_a.user
            ),
            resetting,
        )
        waited = blocked_on_a_lock()
    reset.join(20)

    assert waited
    assert isinstance(joined[0], Membership)
    assert isinstance(resetting[0], services.AdminError) and resetting[0].code == "other_tenants"
    assert TotpDevice.objects.get(user=person.user).confirmed
    assert UserSession.objects.filter(user=person.user).exists()


def test_a_deactivation_while_the_person_joins_another_tenant_leaves_their_sessions(
    tenant_a, joining_b
):
    person, admin_a, invitation = joining_b
    joined: list = []
    removing: list = []
    with held_open(_accept(person, invitation), joined):
        remove = in_thread(
            lambda: services.member_deactivate(
                tenant=tenant_a, membership_id=person.pk, actor=admin_a.user
            ),
            removing,
        )
        waited = blocked_on_a_lock()
    remove.join(20)

    assert waited
    assert not Membership.objects.get(pk=person.pk).is_active
    assert UserSession.objects.filter(user=person.user).exists()


def test_a_reset_asked_while_another_tenant_reactivates_the_person_waits_and_is_refused(
    tenant_a, tenant_b, member_of, joining_b
):
    """The same race through a reactivation: B's admin gives the person their membership back."""
    person, admin_a, _invitation = joining_b
    admin_b = member_of(tenant_b, "admin")
    in_b = Membership.objects.create(
        tenant=tenant_b, user=person.user, role="viewer", is_active=False
    )
    back: list = []
    resetting: list = []
    with held_open(
        lambda: services.member_reactivate(
            tenant=tenant_b, membership_id=in_b.pk, actor=admin_b.user
        ),
        back,
    ):
        reset = in_thread(
            lambda: signin_policy.member_reset_two_factor(
                tenant=tenant_a, membership_id=person.pk, actor=admin_a.user
            ),
            resetting,
        )
        waited = blocked_on_a_lock()
    reset.join(20)

    assert waited
    assert isinstance(back[0], Membership) and back[0].is_active
    assert isinstance(resetting[0], services.AdminError) and resetting[0].code == "other_tenants"
    assert TotpDevice.objects.get(user=person.user).confirmed
