"""Agent event receivers that answer badly on purpose, as a tenant admin's endpoint may: an endless
body (fast, or one byte a second), endless headers, a connection accepted and never read, an
answer that comes only after the attempt's time is up. Each is a raw socket server on loopback;
each attempt ends within the attempt's deadline, is recorded with a specific reason, and holds
no worker. (Trickled headers, a name that hangs: test_deadline; redirects, names resolving to a
private address at delivery: test_egress.)"""

from __future__ import annotations

import socket
import time

import pytest

from intents.events.delivery import deliver_due
from intents.models import AgentEventDelivery
from intents.services.event_endpoints import endpoint_create
from tests.intents.events.conftest import RawReceiver
from tests.intents.events.test_delivery import reject_drafts


@pytest.fixture
def endpoint_at(tenant_a, member_of, settings):
    """endpoint_at(url): an endpoint of tenant A at ``url`` with one event (a rejection) due."""
    settings.AGENT_EVENTS_CONNECT_TIMEOUT = 1.0
    settings.AGENT_EVENTS_READ_TIMEOUT = 1.0
    settings.AGENT_EVENTS_TOTAL_TIMEOUT = 2.0

    def make(url: str):
        admin = member_of(tenant_a, "admin").user
        endpoint, _ = endpoint_create(
            tenant=tenant_a, url=url, event_types=["draft.rejected"], actor=admin
        )
        reject_drafts(tenant_a, member_of(tenant_a, "approver").user, 1)
        return endpoint

    return make


def attempt() -> tuple[float, tuple]:
    started = time.monotonic()
    assert deliver_due() == 1
    took = time.monotonic() - started
    delivery = AgentEventDelivery.objects.get()
    return took, (
        delivery.status,
        delivery.attempts,
        delivery.last_status_code,
        delivery.last_error,
    )


def _read_request(conn: socket.socket) -> None:
    conn.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)


def endless_body(server: RawReceiver, conn: socket.socket) -> None:
    _read_request(conn)
    server.write(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 2147483648\r\n\r\n")
    chunk = b"x" * 65536
    while not server.stop.is_set():
        server.write(conn, chunk)


def endless_chunked_body(server: RawReceiver, conn: socket.socket) -> None:
    _read_request(conn)
    server.write(conn, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + b"x" * 65536 + b"\r\n"
    while not server.stop.is_set():
        server.write(conn, chunk)


def dripping_body(server: RawReceiver, conn: socket.socket) -> None:
    _read_request(conn)
    server.write(conn, b"HTTP/1.1 200 OK\r\n\r\n")
    while not server.stop.wait(1.0):
        server.write(conn, b"x")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "behave", [endless_body, endless_chunked_body, dripping_body], ids=["2GB", "chunked", "drip"]
)
def test_an_endless_answer_body_is_never_read(raw_receiver, endpoint_at, behave):
    """The status line is the answer: the body is not read, so 2 GB (or a body that never ends,
    or one dripped a byte a second) costs one buffer, and the attempt ends at once."""
    server = raw_receiver(behave)
    endpoint_at(server.url)

    took, outcome = attempt()

    assert outcome == ("delivered", 1, 200, "")
    assert took < 2.0
    assert server.sent < 2**31 // 100  # it stopped writing when the socket was closed


def endless_headers(server: RawReceiver, conn: socket.socket) -> None:
    _read_request(conn)
    server.write(conn, b"HTTP/1.1 200 OK\r\n")
    while not server.stop.is_set():
        server.write(conn, b"X-Padding: " + b"a" * 1000 + b"\r\n")


@pytest.mark.django_db(transaction=True)
def test_endless_headers_fail_the_attempt_at_the_header_limit(raw_receiver, endpoint_at):
    server = raw_receiver(endless_headers)
    endpoint_at(server.url)

    took, outcome = attempt()

    assert outcome == ("pending", 1, None, "connection: RemoteProtocolError")
    assert took < 2.0


def never_reads(server: RawReceiver, conn: socket.socket) -> None:
    server.stop.wait(30)


@pytest.mark.django_db(transaction=True)
def test_a_connection_accepted_and_never_read_fails_at_the_read_timeout(raw_receiver, endpoint_at):
    server = raw_receiver(never_reads)
    endpoint_at(server.url)

    took, outcome = attempt()

    assert outcome == ("pending", 1, None, "timeout: ReadTimeout")
    assert took < 2.0
    assert server.connections == 1


def late_answer(server: RawReceiver, conn: socket.socket) -> None:
    _read_request(conn)
    if not server.stop.wait(4.0):  # 30 s in production; the deadline here is 2 s
        server.write(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")


@pytest.mark.django_db(transaction=True)
def test_an_answer_after_the_deadline_is_a_failed_attempt(raw_receiver, endpoint_at, settings):
    """The read timeout above the deadline: the deadline decides."""
    settings.AGENT_EVENTS_READ_TIMEOUT = 10.0
    server = raw_receiver(late_answer)
    endpoint_at(server.url)

    took, outcome = attempt()

    assert outcome == ("pending", 1, None, "timeout: no complete answer within 2 s")
    assert 1.8 < took < 3.5
