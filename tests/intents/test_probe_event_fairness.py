"""Probe (an outsider's view of agent events): receivers that are down must not hold back another
tenant's delivery. The worker looks at a bounded number of endpoints a round; it used to take the
first 500 endpoints with anything unfinished and only then keep the due ones, so 500 endpoints
waiting for a retry (25 tenants whose receivers are down, 20 endpoints each, registered first)
hid every later endpoint's due delivery for as long as they kept failing: up to 27 hours."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from intents import services as intent_services
from intents.events.delivery import deliver_due
from intents.models import AgentEvent, AgentEventDelivery, AgentEventEndpoint
from intents.services.event_endpoints import MAX_ENDPOINTS, new_secret
from tests.factories import TenantFactory, make_local_mailbox


def seal_each_secret(endpoints: list[AgentEventEndpoint]) -> None:
    """A secret for each endpoint just created: sealed for its row, so once it has its id."""
    for endpoint in endpoints:
        endpoint.secret_sealed = endpoint.seal_secret(new_secret())
    AgentEventEndpoint.objects.bulk_update(endpoints, ["secret_sealed"])


def endpoints_waiting_for_a_retry(tenants: int) -> None:
    """``tenants`` tenants with MAX_ENDPOINTS endpoints each, each endpoint's head delivery
    failed three times and waiting an hour for its next attempt."""
    later = timezone.now() + timedelta(hours=1)
    for tenant in TenantFactory.create_batch(tenants):
        event = AgentEvent.objects.create(
            tenant=tenant, public_id=f"evt_{uuid.uuid4().hex}", type="draft.rejected", payload={}
        )
        endpoints = []
        for i in range(MAX_ENDPOINTS):
            endpoint = AgentEventEndpoint(
                tenant=tenant, url=f"https://down-{i}.example.test/", event_types=["draft.rejected"]
            )
            endpoints.append(endpoint)
        seal_each_secret(AgentEventEndpoint.objects.bulk_create(endpoints))
        AgentEventDelivery.objects.bulk_create(
            AgentEventDelivery(
                tenant=tenant,
                endpoint=endpoint,
                event=event,
                attempts=3,
                next_attempt_at=later,
                last_error="HTTP 503",
            )
            for endpoint in endpoints
        )


@pytest.mark.django_db(transaction=True)
def test_endpoints_waiting_for_a_retry_do_not_hide_another_tenants_due_delivery(
    tenant_b, member_of, receiver, subscribe
):
    endpoints_waiting_for_a_retry(25)
    subscribe(tenant_b, receiver, types=["draft.rejected"])
    approver = member_of(tenant_b, "approver").user
    draft = intent_services.draft_create(
        tenant=tenant_b,
        mailbox=make_local_mailbox(tenant_b),
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
    intent_services.draft_reject(tenant=tenant_b, draft_id=draft.pk, reason="No", actor=approver)

    attempts = deliver_due()

    assert attempts == 1
    assert [e["data"]["draft"]["id"] for e in receiver.accepted] == [draft.pk]
    assert AgentEventDelivery.objects.filter(attempts=3, status="pending").count() == 500


@pytest.mark.django_db
def test_the_longest_waiting_due_endpoints_make_the_round_not_the_lowest_ids():
    """Found by a reviewer: the round took due endpoints in id order, so endpoints that are always
    due (backed-up receivers, registered first) kept every later one out for as long as they
    stayed busy. The longest waiting come first."""
    from intents.events.delivery import due_endpoint_ids

    tenant = TenantFactory()
    event = AgentEvent.objects.create(
        tenant=tenant, public_id=f"evt_{uuid.uuid4().hex}", type="draft.rejected", payload={}
    )
    endpoints = []
    for i in range(4):
        endpoint = AgentEventEndpoint(
            tenant=tenant, url=f"https://busy-{i}.example.test/", event_types=["draft.rejected"]
        )
        endpoints.append(endpoint)
    seal_each_secret(AgentEventEndpoint.objects.bulk_create(endpoints))
    now = timezone.now()
    # The last endpoint (highest id) has waited an hour; the first three became due just now.
    waited = [timedelta(seconds=1)] * 3 + [timedelta(hours=1)]
    AgentEventDelivery.objects.bulk_create(
        AgentEventDelivery(tenant=tenant, endpoint=endpoint, event=event, next_attempt_at=now - w)
        for endpoint, w in zip(endpoints, waited, strict=True)
    )

    assert due_endpoint_ids(limit=3)[0] == endpoints[-1].pk
