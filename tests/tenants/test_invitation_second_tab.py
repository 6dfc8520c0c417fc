"""An invitation page open in two tabs of one browser: Accept in the first made the person a
member; Accept (or Decline) in the second answered "Open the invitation link you were given,
then accept it there." (403), and the link itself then said "This invitation was already used."
The person, a member already, was sent round in a circle. Found by an outside probe."""

import pytest
from django.urls import reverse

from tenants.models import Invitation, Membership
from tests.tenants.test_invitations import invite, sign_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def accepted_in_one_tab(tenant_a, tenant_b, member_of, client, password):
    """(the invitation, the browser): a member of B opened A's link, signed in and accepted it
    in one tab; the second tab still shows the invitation's page with its buttons."""
    person = member_of(tenant_b, "viewer").user
    link = invite(client, member_of(tenant_a, "admin"), tenant_a, person.email).context["link"]
    sign_in(client, person.email, password)
    client.get(link)
    invitation = Invitation.objects.get(tenant=tenant_a)
    first = client.post(reverse("invitation_accept", args=[invitation.pk]))
    assert first.status_code == 302
    return invitation, client


@pytest.mark.parametrize("action", ["invitation_accept", "invitation_decline"])
def test_the_second_tab_says_the_person_is_a_member_already(accepted_in_one_tab, tenant_a, action):
    invitation, client = accepted_in_one_tab

    second = client.post(reverse(action, args=[invitation.pk]))

    assert second.status_code == 302
    assert second["Location"] == reverse("tenant_home", args=[tenant_a.slug])
    page = client.get(second["Location"]).content.decode()
    assert "You accepted this invitation already: you are a member of Tenant A." in page
    assert Invitation.objects.get(pk=invitation.pk).state == "accepted"
    assert Membership.objects.filter(tenant=tenant_a, user__email=invitation.email).count() == 1


def test_someone_else_without_the_link_still_gets_the_link_refusal(
    accepted_in_one_tab, member_of, tenant_b, password
):
    """The shortcut is for the person who accepted it, not for whoever names its id."""
    from django.test import Client

    invitation, _client = accepted_in_one_tab
    stranger = member_of(tenant_b, "viewer").user
    other = Client()
    sign_in(other, stranger.email, password)

    refused = other.post(reverse("invitation_accept", args=[invitation.pk]))

    assert refused.status_code == 403
    assert "Open the invitation link you were given" in refused.content.decode()
