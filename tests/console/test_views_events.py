"""Console → Agent events: the secret shown once, precise URL errors, resend, and only the
tenant's own admins (another tenant's admin gets 404 and changes nothing)."""

from __future__ import annotations

import re

import pytest

from intents import services as intent_services
from intents.events.delivery import deliver_due
from intents.models import AgentEventDelivery, AgentEventEndpoint
from intents.services.event_endpoints import endpoint_create
from tenants.models import AuditEvent
from tests.factories import make_local_mailbox

BASE = "/t/tenant-a/admin/agent-events/"


def rejected_draft(tenant, member_of):
    approver = member_of(tenant, "approver").user
    draft = intent_services.draft_create(
        tenant=tenant,
        mailbox=make_local_mailbox(tenant),
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
    intent_services.draft_reject(tenant=tenant, draft_id=draft.pk, reason="No", actor=approver)
    return draft


@pytest.mark.django_db
def test_admin_adds_an_endpoint_and_sees_the_secret_exactly_once(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)

    created = client.post(
        f"{BASE}new/",
        {"url": "https://agent.example.com/hooks", "event_types": ["draft.approved"]},
    )
    secret = re.search(r'value="(whsec_[^"]+)"', created.content.decode()).group(1)
    listing = client.get(BASE)

    endpoint = AgentEventEndpoint.objects.get()
    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    assert endpoint.secrets(endpoint.created_at) == [secret]
    assert secret not in endpoint.secret_sealed
    assert listing.status_code == 200
    assert secret not in listing.content.decode()
    assert "https://agent.example.com/hooks" in listing.content.decode()
    assert AuditEvent.objects.filter(action="agent_events.endpoint_created").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://agent.example.com/hooks", "must use https"),
        ("https://user:pw@agent.example.com/", "user name or password"),
        ("https://10.0.0.7/hooks", "not a public address"),
        ("https://169.254.169.254/", "never a delivery address"),
        ("javascript:alert(1)", "must start with https"),
        ("https://agent.example.com/a b", "spaces or control characters"),
        ("https://agent.example.com/\x00", "Null characters are not allowed"),
    ],
)
def test_a_bad_url_gets_a_precise_error_and_creates_nothing(
    tenant_a, member_of, signed_in, settings, url, message
):
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = False
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.post(f"{BASE}new/", {"url": url, "event_types": ["draft.approved"]})

    assert response.status_code == 422
    assert message in response.content.decode()
    assert AgentEventEndpoint.objects.count() == 0


@pytest.mark.django_db
def test_another_tenants_mailbox_or_no_events_are_refused(tenant_a, tenant_b, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)
    foreign = make_local_mailbox(tenant_b)

    no_types = client.post(f"{BASE}new/", {"url": "https://a.example.com/", "event_types": []})
    foreign_mailbox = client.post(
        f"{BASE}new/",
        {"url": "https://a.example.com/", "event_types": ["draft.approved"], "mailbox": foreign.pk},
    )

    assert (no_types.status_code, foreign_mailbox.status_code) == (422, 422)
    assert AgentEventEndpoint.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_admin_resends_a_delivery_as_a_new_delivery_of_the_same_event(
    tenant_a, member_of, signed_in, receiver, subscribe
):
    subscribe(tenant_a, receiver, types=["draft.rejected"])
    rejected_draft(tenant_a, member_of)
    deliver_due()
    first = AgentEventDelivery.objects.get()
    client = signed_in(member_of(tenant_a, "admin").user)

    resent = client.post(f"{BASE}deliveries/{first.pk}/resend/")
    deliver_due()
    page = client.get(BASE)

    again = AgentEventDelivery.objects.exclude(pk=first.pk).get()
    assert resent.status_code == 302
    assert (again.resend_of_id, again.event_id, again.status) == (
        first.pk,
        first.event_id,
        "delivered",
    )
    assert receiver.types == ["draft.rejected", "draft.rejected"]
    assert receiver.headers[0]["webhook-id"] == receiver.headers[1]["webhook-id"]
    assert page.content.decode().count('data-delivery="') == 2


@pytest.mark.django_db
def test_admin_disables_enables_rotates_and_deletes(tenant_a, member_of, signed_in):
    admin = member_of(tenant_a, "admin").user
    endpoint, old = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    client = signed_in(admin)

    disabled = client.post(f"{BASE}{endpoint.pk}/disable/")
    endpoint.refresh_from_db()
    state_off = (endpoint.enabled, endpoint.disabled_reason)
    page = client.get(BASE).content.decode()
    enabled = client.post(f"{BASE}{endpoint.pk}/enable/")
    endpoint.refresh_from_db()
    state_on = endpoint.enabled
    rotated = client.post(f"{BASE}{endpoint.pk}/rotate/")
    new = re.search(r'value="(whsec_[^"]+)"', rotated.content.decode()).group(1)
    endpoint.refresh_from_db()
    signing = endpoint.secrets(endpoint.created_at)
    confirm = client.get(f"{BASE}{endpoint.pk}/delete/")
    deleted = client.post(f"{BASE}{endpoint.pk}/delete/")

    assert (disabled.status_code, enabled.status_code, rotated.status_code) == (302, 302, 200)
    assert state_off == (False, f"Disabled by {admin.display_name}")
    assert f"Disabled by {admin.display_name}" in page
    assert state_on is True
    assert signing == [new, old]
    assert (confirm.status_code, deleted.status_code) == (200, 302)
    assert AgentEventEndpoint.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_another_tenants_admin_cannot_see_resend_rotate_disable_or_delete(
    tenant_a, tenant_b, member_of, signed_in, receiver, subscribe
):
    endpoint = subscribe(tenant_a, receiver, types=["draft.rejected"])
    rejected_draft(tenant_a, member_of)
    deliver_due()
    delivery = AgentEventDelivery.objects.get()
    client = signed_in(member_of(tenant_b, "admin").user)
    own = "/t/tenant-b/admin/agent-events/"

    answers = [
        client.get(BASE).status_code,
        client.get(own).status_code,
        client.post(f"{own}deliveries/{delivery.pk}/resend/").status_code,
        client.post(f"{own}{endpoint.pk}/rotate/").status_code,
        client.get(f"{own}{endpoint.pk}/rotate/").status_code,
        client.post(f"{own}{endpoint.pk}/disable/").status_code,
        client.post(f"{own}{endpoint.pk}/delete/").status_code,
    ]
    listing = client.get(own).content.decode()

    endpoint.refresh_from_db()
    assert answers == [404, 200, 404, 404, 404, 404, 404]
    assert receiver.url not in listing
    assert endpoint.enabled is True
    assert AgentEventDelivery.objects.count() == 1
    assert endpoint.secrets(endpoint.created_at) == [receiver.secret]


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["approver", "viewer"])
def test_non_admins_cannot_reach_the_page(tenant_a, member_of, signed_in, role):
    admin = member_of(tenant_a, "admin").user
    endpoint, _ = endpoint_create(
        tenant=tenant_a, url="https://a.example.com/", event_types=["draft.approved"], actor=admin
    )
    client = signed_in(member_of(tenant_a, role).user)

    answers = [
        client.get(BASE).status_code,
        client.post(f"{BASE}new/", {"url": "https://b.example.com/"}).status_code,
        client.post(f"{BASE}{endpoint.pk}/disable/").status_code,
        client.post(f"{BASE}{endpoint.pk}/delete/").status_code,
    ]

    assert answers == [403, 403, 403, 403]
    assert list(AgentEventEndpoint.objects.values_list("enabled", flat=True)) == [True]
