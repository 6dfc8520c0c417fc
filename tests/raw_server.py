"""A loopback server that answers badly on purpose: a raw socket per connection, handed to the
test's ``behave(server, conn)`` (agent event receivers in tests/intents/events, an AgentMail
that reads a request slowly in tests/mailboxes/test_call_deadline.py)."""

from __future__ import annotations

import socket
import threading


class RawReceiver:
    """Accepts connections on 127.0.0.1 and hands each to ``behave(conn)``; counts the bytes it
    managed to write (``sent``) and the connections (``connections``)."""

    def __init__(self, behave):
        self.behave = behave
        self.sent = 0
        self.connections = 0
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/hooks"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.behave(self, conn)
            except OSError:  # the client went away: what a bounded attempt does
                return

    def write(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
