"""Test servers that answer without Nagle's delay.

Python's HTTP servers (Django's test server, ``http.server``) write a response's headers and its
body in two sends. With Nagle's algorithm on, the second waits until the client acknowledges the
first, and the client delays that acknowledgement: 40 ms on Linux, on every request. The live
server answered a 401 in 45 ms instead of 1.5 ms, and the schemathesis run spent 38 of its 52 s
waiting. Production does not have this delay: gunicorn sets ``TCP_NODELAY`` on its socket."""

from __future__ import annotations

import socket
import socketserver

from django.core.servers.basehttp import ThreadedWSGIServer


class NoDelay(socketserver.TCPServer):
    """Mixed in before a TCP server class: each accepted connection sends at once."""

    def get_request(self):
        sock, address = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, address


class NoDelayWSGIServer(NoDelay, ThreadedWSGIServer):
    """Django's live test server (``LiveServerThread.server_class``) without the delay."""
