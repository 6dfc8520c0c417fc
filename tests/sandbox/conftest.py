import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@pytest.fixture
def sandbox(sandbox_server):
    """The session's sandbox (tests/conftest.py), reset: a module-scoped one here started and
    stopped a sandbox process for each of these six files on each worker that ran one of its
    tests, beside the one the rest of the suite shares."""
    sandbox_server.reset()
    yield sandbox_server
    sandbox_server.clear_faults()


class Receiver:
    """A loopback webhook endpoint that records every delivery.

    `fail_first` makes the first delivery of each svix-id answer 500, to exercise retries.
    """

    def __init__(self, *, fail_first: bool = False, always_fail: bool = False):
        self.fail_first = fail_first
        self.always_fail = always_fail
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver.lock:
                    seen = any(h["svix-id"] == headers["svix-id"] for h, _ in receiver.received)
                    receiver.received.append((headers, body))
                failing = receiver.always_fail or (receiver.fail_first and not seen)
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self, event_type=None):
        with self.lock:
            items = list(self.received)
        return [
            (headers, body)
            for headers, body in items
            if event_type is None or json.loads(body)["event_type"] == event_type
        ]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(**kwargs):
        made.append(Receiver(**kwargs))
        return made[-1]

    yield make
    for item in made:
        item.close()
