"""The delivery worker: an endpoint that keeps failing is disabled with its reason after the last
retry and gets nothing new until enabled; two workers at once still keep one delivery in flight
per endpoint, in order; a worker that died mid-request leaves a lease that expires; one endpoint
whose request cannot be built or whose attempt crashes fails that attempt and the round goes on
to the other tenants' endpoints; receivers holding their requests open hold back no other
tenant's delivery; a run starts no attempt that could outlast the task's time limit."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest
from django.db import connection

from intents import services as intent_services
from intents.events.delivery import deliver_due, delivery_claim
from intents.models import AgentEventDelivery, AgentEventEndpoint
from intents.services.event_endpoints import endpoint_enable
from tenants.models import AuditEvent
from tests.factories import make_local_mailbox


def reject_drafts(tenant, approver, n: int) -> list[int]:
    mailbox = make_local_mailbox(tenant, username=f"support-{uuid.uuid4().hex[:6]}")
    ids = []
    for i in range(n):
        draft = intent_services.draft_create(
            tenant=tenant,
            mailbox=mailbox,
            to=["jane@customer.test"],
            subject=f"Hi {i}",
            text="Hello",
            actor_user=approver,
        )
        intent_services.draft_reject(
            tenant=tenant, draft_id=draft.pk, reason=f"reason {i}", actor=approver
        )
        ids.append(draft.pk)
    return ids


@pytest.mark.django_db(transaction=True)
def test_an_endpoint_failing_every_retry_is_disabled_with_its_reason_and_resumes_when_enabled(
    tenant_a, member_of, settings, receiver, subscribe
):
    settings.AGENT_EVENTS_RETRY_DELAYS = [0.0, 0.0]
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    endpoint = subscribe(tenant_a, receiver, types=["draft.rejected"])
    receiver.fail_next = 100
    first, second = reject_drafts(tenant_a, approver, 2)

    attempts = deliver_due()
    endpoint.refresh_from_db()
    while_disabled = reject_drafts(tenant_a, approver, 1)
    receiver.fail_next = 0
    endpoint_enable(tenant=tenant_a, endpoint_id=endpoint.pk, actor=admin)
    after = deliver_due()

    assert attempts == 3
    assert (endpoint.enabled, endpoint.disabled_automatically, endpoint.disabled_reason) == (
        False,
        True,
        "HTTP 500",
    )
    assert endpoint.consecutive_failures == 3
    assert AuditEvent.objects.filter(action="agent_events.endpoint_auto_disabled").count() == 1
    assert list(
        AgentEventDelivery.objects.order_by("id").values_list("event__draft_id", "status")
    ) == [(first, "failed"), (second, "delivered")]
    assert while_disabled and after == 1
    assert [e["data"]["draft"]["id"] for e in receiver.accepted] == [second]


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_keep_one_delivery_in_flight_per_endpoint_in_order(
    tenant_a, member_of, receiver, subscribe
):
    approver = member_of(tenant_a, "approver").user
    subscribe(tenant_a, receiver, types=["draft.rejected"])
    drafts = reject_drafts(tenant_a, approver, 6)
    receiver.delay = 0.1
    barrier = threading.Barrier(3)
    done: list[int] = []

    def work():
        barrier.wait()
        done.append(deliver_due())
        connection.close()

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sum(done) == 6
    assert receiver.most_in_flight == 1
    assert [e["data"]["draft"]["id"] for e in receiver.accepted] == drafts


@pytest.mark.django_db(transaction=True)
def test_a_claim_whose_worker_died_is_taken_over_after_its_lease(
    tenant_a, member_of, receiver, subscribe, settings
):
    """The lost attempt counts as a failed one; with no wait before the retry it goes again at
    once, and its success clears the endpoint's failures."""
    settings.AGENT_EVENTS_RETRY_DELAYS = [0.0, 0.0]
    approver = member_of(tenant_a, "approver").user
    endpoint = subscribe(tenant_a, receiver, types=["draft.rejected"])
    reject_drafts(tenant_a, approver, 1)
    dead = delivery_claim(endpoint_id=endpoint.pk)

    while_leased = deliver_due()
    AgentEventDelivery.objects.filter(pk=dead.delivery_id).update(
        lease_expires_at="2000-01-01T00:00:00Z"
    )
    after_lease = deliver_due()

    delivery = AgentEventDelivery.objects.get()
    assert (while_leased, after_lease) == (0, 1)
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    assert AgentEventEndpoint.objects.get().consecutive_failures == 0


@pytest.mark.django_db(transaction=True)
def test_a_receiver_that_stalls_every_attempt_past_the_lease_is_retried_then_disabled(
    tenant_a, member_of, receiver, subscribe, settings
):
    """An answer trickled a byte at a time keeps resetting the read timeout, so the task's time
    limit ends the attempt and nothing is recorded. Such a delivery was claimed and posted again
    every two minutes for ever, never failing; now each lost attempt is a failed one, retried at
    its delay, and the endpoint is disabled when they run out."""
    settings.AGENT_EVENTS_RETRY_DELAYS = [3600.0]
    approver = member_of(tenant_a, "approver").user
    endpoint = subscribe(tenant_a, receiver, types=["draft.rejected"])
    reject_drafts(tenant_a, approver, 1)
    stalled = AgentEventDelivery.objects.filter(
        pk=delivery_claim(endpoint_id=endpoint.pk).delivery_id
    )

    stalled.update(lease_expires_at="2000-01-01T00:00:00Z")
    first = deliver_due()
    delivery = stalled.get()
    assert first == 0 and receiver.accepted == []
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert delivery.last_error.startswith("no answer recorded within the lease")

    stalled.update(next_attempt_at="2000-01-01T00:00:00Z")
    delivery_claim(endpoint_id=endpoint.pk)  # the retry stalls too
    stalled.update(lease_expires_at="2000-01-01T00:00:00Z")
    second = deliver_due()

    endpoint.refresh_from_db()
    assert second == 0 and receiver.accepted == []
    assert (stalled.get().status, stalled.get().attempts) == ("failed", 2)
    assert (endpoint.enabled, endpoint.disabled_automatically) == (False, True)
    assert endpoint.disabled_reason.startswith("no answer recorded within the lease")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "stored_url",
    [
        "https://0177.0.0.1/hooks",  # httpx: Invalid IPv4 address
        "https://999.1.1.1/hooks",  # httpx: Invalid IPv4 address
        "https://[v1.x]/hooks",  # httpx: Invalid IPv6 address
        "https://a\u200db.example.com/hooks",  # httpx: Invalid IDNA hostname
        "https://hooks.example.com\u00a0/hooks",  # httpx: Invalid IDNA hostname
        "https://xn--zz.example.com/hooks",  # idna.IDNAError, a UnicodeError
    ],
)
def test_a_url_the_client_cannot_build_fails_its_attempt_and_other_tenants_still_get_theirs(
    tenant_a, tenant_b, member_of, make_receiver, subscribe, stored_url
):
    """Registration refuses these URLs now; rows stored before it did still reach the worker.
    Such a URL used to raise out of deliver_due, so tenant B's event was never delivered and A's
    delivery stayed ``sending`` to crash the next round too."""
    broken = subscribe(tenant_a, make_receiver(), types=["draft.rejected"])
    AgentEventEndpoint.objects.filter(pk=broken.pk).update(url=stored_url)
    healthy = make_receiver()
    subscribe(tenant_b, healthy, types=["draft.rejected"])
    reject_drafts(tenant_a, member_of(tenant_a, "approver").user, 1)
    [b_draft] = reject_drafts(tenant_b, member_of(tenant_b, "approver").user, 1)

    attempts = deliver_due()

    failed = AgentEventDelivery.objects.get(endpoint=broken)
    assert attempts == 2
    assert [e["data"]["draft"]["id"] for e in healthy.accepted] == [b_draft]
    assert (failed.status, failed.attempts, failed.last_status_code) == ("pending", 1, None)
    assert failed.last_error.startswith("url_invalid: ")


@pytest.mark.django_db(transaction=True)
def test_an_unexpected_error_in_one_attempt_fails_it_and_the_round_goes_on(
    tenant_a, tenant_b, member_of, make_receiver, subscribe, monkeypatch
):
    """An error no handler expects (here from the socket layer, the process edge) costs its
    delivery one attempt; it neither ends the round nor leaves the delivery ``sending``."""
    crashing, healthy = make_receiver(), make_receiver()
    broken = subscribe(tenant_a, crashing, types=["draft.rejected"])
    subscribe(tenant_b, healthy, types=["draft.rejected"])
    crash_port = crashing.server.server_address[1]
    real = socket.create_connection

    def connect(address, *args, **kwargs):
        if address[1] == crash_port:
            raise RuntimeError("not an OSError: httpcore does not map it")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", connect)
    reject_drafts(tenant_a, member_of(tenant_a, "approver").user, 1)
    [b_draft] = reject_drafts(tenant_b, member_of(tenant_b, "approver").user, 1)

    attempts = deliver_due()

    failed = AgentEventDelivery.objects.get(endpoint=broken)
    assert attempts == 2
    assert [e["data"]["draft"]["id"] for e in healthy.accepted] == [b_draft]
    assert (failed.status, failed.attempts, failed.lease_token) == ("pending", 1, None)
    assert failed.last_error == "internal error: RuntimeError"


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.django_db(transaction=True)
def test_receivers_holding_every_request_do_not_hold_back_another_tenants_delivery(
    tenant_a, tenant_b, member_of, make_receiver, subscribe, settings
):
    """Tenant A's two endpoints (registered first) keep each request open until the deadline;
    tenant B's event goes out meanwhile. One after the other, B waited for both: 40 s here."""
    settings.AGENT_EVENTS_READ_TIMEOUT = 20.0
    settings.AGENT_EVENTS_TOTAL_TIMEOUT = 20.0
    held = threading.Event()
    stalling = [make_receiver(), make_receiver()]
    for receiver in stalling:
        receiver.hold = held
        subscribe(tenant_a, receiver, types=["draft.rejected"])
    healthy = make_receiver()
    subscribe(tenant_b, healthy, types=["draft.rejected"])
    reject_drafts(tenant_a, member_of(tenant_a, "approver").user, 1)
    [b_draft] = reject_drafts(tenant_b, member_of(tenant_b, "approver").user, 1)
    done: list[int] = []

    def work():
        done.append(deliver_due())
        connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    b_in_while_a_held = wait_for(
        lambda: healthy.accepted and [r.in_flight for r in stalling] == [1, 1], 8.0
    )
    held.set()
    worker.join()

    assert b_in_while_a_held
    assert [e["data"]["draft"]["id"] for e in healthy.accepted] == [b_draft]
    assert done == [3]
    assert set(AgentEventDelivery.objects.values_list("status", flat=True)) == {"delivered"}


@pytest.mark.django_db(transaction=True)
def test_a_run_starts_no_attempt_that_could_outlast_the_tasks_time_limit(
    tenant_a, member_of, receiver, subscribe, settings
):
    """Attempts begin only while they can end inside 90 % of Q_TIMEOUT (here 1.8 s, less a 1 s
    attempt: 0.8 s); the rest wait for the next task. A run that went on was killed at the
    limit with its attempts in flight, left ``sending`` to count as failed at the lease."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 2}
    settings.AGENT_EVENTS_TOTAL_TIMEOUT = 1.0
    receiver.delay = 0.5
    subscribe(tenant_a, receiver, types=["draft.rejected"])
    reject_drafts(tenant_a, member_of(tenant_a, "approver").user, 6)

    attempts = deliver_due()

    statuses = list(AgentEventDelivery.objects.order_by("id").values_list("status", flat=True))
    assert 1 <= attempts <= 3
    assert statuses == ["delivered"] * attempts + ["pending"] * (6 - attempts)
