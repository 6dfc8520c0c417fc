"""Every outbound call to an address people typed (agent event endpoints, identity providers) has
a hard deadline: httpx's timeouts are per read, so a server answering one byte at a time, each
inside the read timeout, could hold a worker for as long as it liked. Loopback servers only."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import httpx
import pytest

from common.egress import PinnedTransport
from intents import services as intent_services
from intents.events.delivery import deliver_due
from intents.models import AgentEventDelivery
from tests.factories import make_local_mailbox


@pytest.fixture
def trickler(raw_receiver):
    """trickler(head, slow, pace): a loopback server that reads the request, then answers
    ``head`` at once and ``slow`` one byte every ``pace`` seconds; ``sent`` counts the slow bytes
    it managed to write."""

    def make(head: bytes, slow: bytes, pace: float = 0.2):
        def behave(server, conn: socket.socket) -> None:
            conn.settimeout(5)
            conn.recv(65536)
            conn.sendall(head)
            for byte in slow:
                if server.stop.wait(pace):
                    return
                server.write(conn, bytes([byte]))

        return raw_receiver(behave)

    return make


def test_an_answer_body_trickled_past_the_deadline_is_a_read_timeout(trickler):
    server = trickler(
        b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\nContent-Type: text/plain\r\n\r\n", b"x" * 200
    )
    client = httpx.Client(
        timeout=httpx.Timeout(1.0),
        transport=PinnedTransport(allow_private=True, allow_loopback=True, deadline=1.0),
    )

    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout, match="no complete answer within 1 s"):
        client.get(server.url)
    took = time.monotonic() - started

    assert 0.9 < took < 3.0
    assert server.sent < 20  # about five bytes a second, for one second


def test_a_quick_answer_is_untouched_by_the_deadline(trickler):
    server = trickler(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", b"hello", pace=0.01)
    client = httpx.Client(
        transport=PinnedTransport(allow_private=True, allow_loopback=True, deadline=2.0)
    )

    response = client.get(server.url)

    assert (response.status_code, response.text) == (200, "hello")
    # The answer was read whole: the deadline's timer was cancelled, not left to fire later.
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    assert all(t.finished.is_set() for t in timers)
    assert client.get(server.url).text == "hello"


@pytest.mark.django_db(transaction=True)
def test_an_agent_event_receiver_trickling_its_headers_fails_the_attempt_at_the_deadline(
    tenant_a, member_of, settings, trickler, subscribe
):
    """Each byte arrives well inside the read timeout; without a deadline this attempt lasted
    the whole trickle (about 12 s here, or for ever)."""
    settings.AGENT_EVENTS_READ_TIMEOUT = 1.0
    settings.AGENT_EVENTS_TOTAL_TIMEOUT = 1.5
    server = trickler(b"", b"HTTP/1.1 204 No Content\r\nX-Padding: " + b"a" * 40 + b"\r\n\r\n")
    approver = member_of(tenant_a, "approver").user
    subscribe(tenant_a, server, types=["draft.rejected"])
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a, username=f"s-{uuid.uuid4().hex[:6]}"),
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
    intent_services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="no", actor=approver)

    started = time.monotonic()
    delivered = deliver_due()
    took = time.monotonic() - started

    delivery = AgentEventDelivery.objects.get()
    assert delivered == 1  # one attempt made
    assert took < 4.0
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert delivery.last_error == "timeout: no complete answer within 1.5 s"


def test_a_name_that_does_not_resolve_in_time_fails_at_the_deadline(trickler, monkeypatch):
    """The deadline covers the name lookup too: a resolver that hangs (5 s a try and name server
    by default) held the request until it answered, whatever the deadline said."""
    server = trickler(b"HTTP/1.1 204 No Content\r\n\r\n", b"")
    port = server.listener.getsockname()[1]
    real = socket.getaddrinfo
    released = threading.Event()

    def hanging(host, *args, **kwargs):
        if host == "slow-dns.example.test":
            released.wait(10)
            return real("127.0.0.1", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    client = httpx.Client(
        transport=PinnedTransport(allow_private=True, allow_loopback=True, deadline=0.5)
    )

    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout, match=r"slow-dns\.example\.test did not resolve within"):
        client.get(f"http://slow-dns.example.test:{port}/hooks")
    took = time.monotonic() - started
    released.set()

    assert took < 3.0  # the lookup was let go at the deadline, not waited for (10 s)
    # A name that resolves at once is untouched by the pool.
    assert client.get(f"http://localhost:{port}/hooks").status_code == 204
