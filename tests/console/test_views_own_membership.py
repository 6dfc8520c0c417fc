"""An admin who lowers their own role, or leaves the tenant, from their own member page (the
service allows both while another admin remains). The change went through, then the page sent
them back to that member page, which an admin page no longer opens for them: "Not allowed: Your
role does not allow this." after a demotion, "Not found" after leaving, each under a success
message that spoke of them in the third person. Found by an outside probe."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from tenants.models import Membership
from tenants.services import member_role_fingerprint

pytestmark = pytest.mark.django_db


def flash(page) -> list[str]:
    return re.findall(r'<li class="success">(.*?)</li>', page.content.decode())


@pytest.fixture
def two_admins(tenant_a, member_of, password):
    """(my membership, a client signed in as me): I am one of tenant A's two admins."""
    mine = member_of(tenant_a, "admin")
    member_of(tenant_a, "admin")
    client = Client()
    client.post(reverse("login"), {"username": mine.user.email, "password": password})
    return mine, client


def test_lowering_my_own_role_lands_on_the_tenant_start_page(two_admins):
    mine, client = two_admins

    answer = client.post(
        reverse("admin_member_role", args=["tenant-a", mine.pk]),
        {"role": "approver", "based_on": member_role_fingerprint(mine)},
    )

    assert answer.status_code == 302
    assert answer["Location"] == reverse("tenant_home", args=["tenant-a"])
    page = client.get(answer["Location"], follow=True)
    assert page.status_code == 200
    assert flash(page) == ["You are now Approver in Tenant A; the admin pages are for admins."]
    assert Membership.objects.get(pk=mine.pk).role == "approver"


def test_leaving_while_i_belong_to_another_tenant_lands_on_my_start_page(
    two_admins, tenant_b, member_of
):
    mine, client = two_admins
    member_of(tenant_b, "viewer", user=mine.user)

    answer = client.post(reverse("admin_member_deactivate", args=["tenant-a", mine.pk]))

    assert answer.status_code == 302 and answer["Location"] == reverse("home")
    page = client.get(answer["Location"], follow=True)
    assert page.status_code == 200
    assert flash(page) == ["You left Tenant A."]
    assert not Membership.objects.get(pk=mine.pk).is_active


def test_leaving_my_only_tenant_signs_me_out_without_a_way_back_to_its_page(two_admins):
    mine, client = two_admins

    answer = client.post(reverse("admin_member_deactivate", args=["tenant-a", mine.pk]))

    assert answer.status_code == 302 and answer["Location"] == reverse("home")
    page = client.get(answer["Location"])
    assert page.status_code == 302 and page["Location"] == reverse("login")
    assert flash(client.get(page["Location"])) == ["You left Tenant A."]


def test_an_admin_changing_someone_else_stays_on_their_page(tenant_a, member_of, two_admins):
    _mine, client = two_admins
    other = member_of(tenant_a, "approver")

    answer = client.post(
        reverse("admin_member_role", args=["tenant-a", other.pk]),
        {"role": "viewer", "based_on": member_role_fingerprint(other)},
    )

    assert answer["Location"] == reverse("admin_member", args=["tenant-a", other.pk])


def test_lowering_my_own_role_says_which_of_my_sends_still_go_out(two_admins, mailbox_a):
    from tests.intents.helpers import sends_in_flight

    mine, client = two_admins
    sends_in_flight(mailbox_a, mine.user, 2)

    answer = client.post(
        reverse("admin_member_role", args=["tenant-a", mine.pk]),
        {"role": "viewer", "based_on": member_role_fingerprint(mine)},
        follow=True,
    )

    assert flash(answer) == [
        "You are now Viewer in Tenant A; the admin pages are for admins. 2 sends you approved "
        "were already on their way and will go out; nothing else you approved will be sent."
    ]
