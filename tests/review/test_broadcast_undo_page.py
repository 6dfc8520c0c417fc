"""A broadcast's undo window in its page: the countdown and the Undo button after Approve, the
undo route, and who may use it (the service, the fan-out and the worker are tested in
tests/intents/test_broadcast_undo.py)."""

import re

import pytest

from intents.models import Broadcast, IntentEvent
from intents.services.broadcast_controls import broadcast_pause
from intents.services.broadcasts import broadcast_create
from tenants.models import Tenant
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def broadcast(tenant_a):
    Tenant.objects.filter(pk=tenant_a.pk).update(send_hold_seconds=30)
    tenant_a.refresh_from_db()
    return broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Delay {{ n }}",
        text="Hello {{ n }}",
        recipients=[{"address": f"p{i}@example.com", "variables": {"n": i}} for i in range(3)],
    )


def url(broadcast, tail=""):
    return f"/t/{broadcast.tenant.slug}/broadcasts/{broadcast.pk}/{tail}"


def approve(client, broadcast):
    return client.post(
        url(broadcast, "approve/"), {"content_hash": broadcast.content_hash}, follow=True
    )


def test_approve_shows_the_countdown_and_undo_puts_it_back_in_review(
    signed_in, member_of, broadcast
):
    client = signed_in(member_of(broadcast.tenant, "approver").user)
    page = approve(client, broadcast).content.decode()
    assert "sending starts in" in page and "you can undo it until then" in page
    assert page.count(f'action="{url(broadcast, "undo/")}"') == 1
    seconds = [int(s) for s in re.findall(r'data-seconds-left="(\d+)"', page)]
    assert len(seconds) == 1 and 25 <= seconds[0] <= 30
    page = client.post(url(broadcast, "undo/"), follow=True).content.decode()
    assert "Undone: nothing was sent, and the broadcast is back in review." in page
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"
    assert "data-undo" not in page and "data-approve-form" in page
    assert IntentEvent.objects.filter(
        broadcast=broadcast, action="broadcast.approval_undone"
    ).exists()


def test_a_viewer_sees_the_countdown_without_the_button_and_cannot_undo(
    signed_in, member_of, broadcast
):
    approve(signed_in(member_of(broadcast.tenant, "approver").user), broadcast)
    client = signed_in(member_of(broadcast.tenant, "viewer").user)
    page = client.get(url(broadcast)).content.decode()
    assert "an approver of this mailbox can still undo it" in page
    assert "data-undo-button" not in page
    assert client.post(url(broadcast, "undo/")).status_code == 403
    assert Broadcast.objects.get(pk=broadcast.pk).state == "approved"


def test_a_viewer_of_a_broadcast_paused_inside_its_window_is_told_it_is_paused(
    signed_in, member_of, broadcast
):
    """Found by a probe: "Sending in 30 seconds" of a paused broadcast, which sends nothing
    when its window closes (the approver's countdown: tests/review/test_browser_broadcasts.py)."""
    approver = member_of(broadcast.tenant, "approver").user
    approve(signed_in(approver), broadcast)
    broadcast_pause(tenant=broadcast.tenant, broadcast_id=broadcast.pk, actor=approver)
    client = signed_in(member_of(broadcast.tenant, "viewer").user)

    page = client.get(url(broadcast)).content.decode()

    told = re.search(
        r"Paused: nothing is sent until someone resumes it\. An approver of this "
        r"mailbox can still undo the approval for (\d+) more seconds\.",
        page,
    )
    assert told is not None and 25 <= int(told[1]) <= 30
    assert "Sending in" not in page


def test_another_tenants_admin_gets_404_and_undoes_nothing(
    signed_in, member_of, tenant_b, broadcast
):
    approve(signed_in(member_of(broadcast.tenant, "approver").user), broadcast)
    client = signed_in(member_of(tenant_b, "admin").user)
    assert client.post(f"/t/{tenant_b.slug}/broadcasts/{broadcast.pk}/undo/").status_code == 404
    assert Broadcast.objects.get(pk=broadcast.pk).state == "approved"


def test_without_a_window_the_page_offers_no_undo(signed_in, member_of, broadcast):
    Tenant.objects.filter(pk=broadcast.tenant_id).update(send_hold_seconds=0)
    client = signed_in(member_of(broadcast.tenant, "approver").user)
    page = approve(client, broadcast).content.decode()
    assert "Approved: one message per recipient is being sent." in page
    assert "data-undo" not in page
    page = client.post(url(broadcast, "undo/"), follow=True).content.decode()
    assert "approved without an undo window" in page
    assert Broadcast.objects.get(pk=broadcast.pk).state == "approved"
