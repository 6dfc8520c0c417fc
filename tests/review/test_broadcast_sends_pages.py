"""A broadcast's sends in the outbox and the needs-attention page, each with its send page: a
stuck one is resolved from there like a reply's; another tenant's admin gets 404, a viewer 403."""

import pytest

from intents.models import IntentEvent, SendIntent
from intents.sending.fanout import broadcast_run
from intents.services.broadcasts import broadcast_approve, broadcast_create
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stuck(tenant_a, member_of):
    """One send of an approved broadcast left needs_attention (its outcome unknown)."""
    approver = member_of(tenant_a, "approver").user
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        name="Warehouse outage",
        subject="Delay {{ n }}",
        text="Hello {{ n }}",
        recipients=[{"address": f"p{i}@example.com", "variables": {"n": i}} for i in range(3)],
    )
    broadcast_approve(
        tenant=tenant_a,
        broadcast_id=broadcast.pk,
        content_hash=broadcast.content_hash,
        actor=approver,
    )
    broadcast_run(broadcast.pk)
    intent = SendIntent.objects.filter(broadcast=broadcast).order_by("id").first()
    SendIntent.objects.filter(pk=intent.pk).update(state="needs_attention", attempts=1)
    return intent, approver


def send_url(intent, tail=""):
    return f"/t/{intent.tenant.slug}/outbox/{intent.pk}/{tail}"


def test_the_stuck_send_is_listed_and_resolved_like_a_replys(signed_in, stuck):
    intent, approver = stuck
    client = signed_in(approver)
    attention = client.get(f"/t/{intent.tenant.slug}/attention/").content.decode()
    outbox = client.get(f"/t/{intent.tenant.slug}/outbox/").content.decode()
    page = client.get(send_url(intent)).content.decode()
    assert send_url(intent) in attention
    assert "data-broadcast-send" in attention
    assert outbox.count("data-broadcast-send") == 3
    assert f"/broadcasts/{intent.broadcast_id}/" in page
    assert 'id="resolve"' in page
    response = client.post(
        send_url(intent, "resolve/"),
        {"provider_message_id": "<m-1@agentmail.to>", "evidence": "The customer's copy."},
    )
    assert response.status_code == 302
    intent.refresh_from_db()
    assert (intent.state, intent.resolved_by) == ("accepted", approver)
    assert IntentEvent.objects.filter(intent=intent, action="intent.resolved_accepted").exists()
    assert (
        send_url(intent) not in client.get(f"/t/{intent.tenant.slug}/attention/").content.decode()
    )


def test_another_tenants_admin_gets_404_and_a_viewer_403(signed_in, member_of, tenant_b, stuck):
    intent, _ = stuck
    evidence = {"provider_message_id": "<m-1@agentmail.to>", "evidence": "seen"}
    outsider = signed_in(member_of(tenant_b, "admin").user)
    foreign = f"/t/{tenant_b.slug}/outbox/{intent.pk}/"
    assert outsider.get(foreign).status_code == 404
    assert outsider.post(foreign + "resolve/", evidence).status_code == 404
    viewer = signed_in(member_of(intent.tenant, "viewer").user)
    assert viewer.get(send_url(intent)).status_code == 200
    assert viewer.post(send_url(intent, "resolve/"), evidence).status_code == 403
    assert viewer.post(send_url(intent, "cancel/"), {}).status_code == 403
    intent.refresh_from_db()
    assert intent.state == "needs_attention"


def test_reopen_and_undo_of_a_broadcast_send_are_refused_not_errors(signed_in, stuck):
    intent, approver = stuck
    client = signed_in(approver)
    for action in ("reopen/", "undo/"):
        response = client.post(send_url(intent, action), {"reason": "x"})
        assert response.status_code in (302, 404)
    intent.refresh_from_db()
    assert intent.state == "needs_attention"


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("<m-1@agent mail.to>", "holds U+0020"),
        ("<m-1@agentmail.to>\x00", "Provider message id: Null characters are not allowed."),
    ],
)
def test_a_message_id_no_webhook_could_name_is_refused_by_name(signed_in, stuck, typed, said):
    """The page says what is wrong with the id (the service's refusal, or the form's for a NUL
    byte, which once came back as one line for every field) and records nothing."""
    intent, approver = stuck
    client = signed_in(approver)
    response = client.post(
        send_url(intent, "resolve/"),
        {"provider_message_id": typed, "evidence": "The customer's copy."},
        follow=True,
    )
    assert said in response.content.decode()
    intent.refresh_from_db()
    assert (intent.state, intent.provider_message_id) == ("needs_attention", "")


@pytest.mark.parametrize("state", ["blocked", "failed", "expired", "cancelled"])
def test_an_ended_send_of_a_broadcast_says_there_is_nothing_to_do(signed_in, stuck, state):
    """Found in a screenshot: a blocked send of a broadcast showed an "Actions" card with nothing
    in it (no draft to re-approve, nothing left to cancel)."""
    intent, approver = stuck
    SendIntent.objects.filter(pk=intent.pk).update(state=state)

    page = signed_in(approver).get(send_url(intent)).content.decode()

    assert "data-nothing-to-do" in page
    assert "Nothing to do: this send ended without going out." in page
