"""A receiver of agent events on loopback: a tiny http.server thread that verifies each delivery
with the ``standardwebhooks`` library (not our code), records what it accepted and what it
refused, can answer 500 (or another status, with headers) or a redirect for a while, or hold each request until released, and counts
the connections it accepted."""

from __future__ import annotations

import http.server
import threading
import time
from dataclasses import dataclass, field

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from intents.models import EventType
from intents.services.event_endpoints import endpoint_create
from tests.nodelay import NoDelay


@dataclass
class Receiver:
    server: http.server.ThreadingHTTPServer
    secret: str = ""
    accepted: list[dict] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    fail_next: int = 0
    # The answer while failing, and its headers (a 410 Gone, a 429 with Retry-After).
    fail_status: int = 500
    fail_headers: dict = field(default_factory=dict)
    redirect_to: str = ""
    connections: int = 0
    # Seconds each request takes, and the most requests it was ever handling at once.
    delay: float = 0.0
    # While set to an unset Event, each request waits for it (at most 30 s) before its answer.
    hold: threading.Event | None = None
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hooks"

    @property
    def types(self) -> list[str]:
        return [event["type"] for event in self.accepted]


def _handler(receiver: Receiver):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with receiver.lock:
                receiver.in_flight += 1
                receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
            time.sleep(receiver.delay)
            if receiver.hold is not None:
                receiver.hold.wait(30)
            try:
                self._handle(body)
            finally:
                with receiver.lock:
                    receiver.in_flight -= 1

        def _handle(self, body: bytes):
            with receiver.lock:
                if receiver.redirect_to:
                    self._answer(302, {"Location": receiver.redirect_to})
                    return
                if receiver.fail_next > 0:
                    receiver.fail_next -= 1
                    self._answer(receiver.fail_status, receiver.fail_headers)
                    return
                try:
                    event = Webhook(receiver.secret).verify(body, dict(self.headers.items()))
                except WebhookVerificationError as exc:
                    receiver.refused.append(str(exc))
                    self._answer(401)
                    return
                receiver.accepted.append(event)
                receiver.raw.append(body)
                receiver.headers.append(dict(self.headers.items()))
            self._answer(204)

        def _answer(self, code: int, headers: dict | None = None):
            self.send_response(code)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    return Handler


class _CountingServer(NoDelay, http.server.ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver

    def get_request(self):
        request = super().get_request()
        with self.receiver.lock:
            self.receiver.connections += 1
        return request


@pytest.fixture
def make_receiver():
    """make_receiver() -> a running Receiver on 127.0.0.1 (stopped after the test)."""
    started: list[Receiver] = []

    def make() -> Receiver:
        server = _CountingServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
        receiver = Receiver(server=server)
        server.receiver = receiver
        server.RequestHandlerClass = _handler(receiver)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        receiver.server.shutdown()
        receiver.server.server_close()


@pytest.fixture
def receiver(make_receiver):
    return make_receiver()


@pytest.fixture
def subscribe(member_of):
    """subscribe(tenant, receiver, types=all, mailbox=None) -> the endpoint, registered through
    the real service; the receiver learns the secret shown once."""

    def make(tenant, receiver: Receiver, types=None, mailbox=None):
        admin = member_of(tenant, "admin").user
        endpoint, secret = endpoint_create(
            tenant=tenant,
            url=receiver.url,
            event_types=types or EventType.values,
            mailbox_id=mailbox.pk if mailbox else None,
            actor=admin,
        )
        receiver.secret = secret
        return endpoint

    return make
