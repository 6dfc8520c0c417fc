"""One tenant's endpoints at names whose lookups hang fail no other tenant's delivery. The name
lookups run on a pool of threads (``common.egress``); a lookup given up at its request's
deadline keeps its thread until the resolver answers, so a pool no larger than the deliveries
in flight was held by the hanging names of one tenant, and the next tenant's lookup waited
behind them until its own deadline: its attempt failed ("did not resolve"), counted towards
disabling its endpoint. Loopback receivers and a fake resolver for the names."""

from __future__ import annotations

import socket
import threading
import uuid

import pytest

from intents import services as intent_services
from intents.events.delivery import deliver_due
from intents.models import AgentEventDelivery
from intents.services.event_endpoints import endpoint_create
from tests.factories import make_local_mailbox

HANGING = 8  # the delivery's default concurrency: one round of attempts


def reject_one(tenant, approver) -> int:
    mailbox = make_local_mailbox(tenant, username=f"support-{uuid.uuid4().hex[:6]}")
    draft = intent_services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
    intent_services.draft_reject(tenant=tenant, draft_id=draft.pk, reason="no", actor=approver)
    return draft.pk


@pytest.mark.django_db(transaction=True)
def test_names_that_hang_for_one_tenant_fail_no_other_tenants_delivery(
    tenant_a, tenant_b, member_of, receiver, subscribe, monkeypatch, settings
):
    settings.AGENT_EVENTS_TOTAL_TIMEOUT = 1.0
    port = receiver.server.server_address[1]
    real = socket.getaddrinfo
    released = threading.Event()

    def resolver(host, *args, **kwargs):
        if host.startswith("hang-"):
            released.wait(15)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        if host == "hooks.b.example.test":
            return real("127.0.0.1", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    admin_a = member_of(tenant_a, "admin").user
    for i in range(HANGING):
        endpoint_create(
            tenant=tenant_a,
            url=f"http://hang-{i}.a.example.test:{port}/hooks",
            event_types=["draft.rejected"],
            actor=admin_a,
        )
    try:
        reject_one(tenant_a, member_of(tenant_a, "approver").user)
        a_attempts = deliver_due()
        b_endpoint, receiver.secret = endpoint_create(
            tenant=tenant_b,
            url=f"http://hooks.b.example.test:{port}/hooks",
            event_types=["draft.rejected"],
            actor=member_of(tenant_b, "admin").user,
        )
        b_draft = reject_one(tenant_b, member_of(tenant_b, "approver").user)
        b_attempts = deliver_due()
    finally:
        released.set()

    b_delivery = AgentEventDelivery.objects.get(endpoint=b_endpoint)
    assert a_attempts == HANGING
    assert b_attempts == 1
    assert (b_delivery.status, b_delivery.last_error) == ("delivered", "")
    assert [e["data"]["draft"]["id"] for e in receiver.accepted] == [b_draft]
