"""A hard deadline on every AgentMail call: no call outlives ``AGENTMAIL_CONNECT_TIMEOUT +
AGENTMAIL_READ_TIMEOUT``, whatever the other end does.

httpx's timeouts are per socket operation. A provider, or a box in front of it, that answers a
byte at a time, each byte inside the read timeout, would hold a call for as long as it liked: a
worker's call thread, and with it the batch it belongs to (the worker records a batch once all
its calls are back), and the lease arithmetic, which counts on a call ending within those two
timeouts (``intents.sending.lease.call_deadline``).

Here each request gets a deadline when it starts (``begin``, from the client's request hook), and
every socket operation of it (connect, TLS handshake, each read, each write) waits at most until
then. Past it, the operation fails as httpx's own timeout would: ``ConnectTimeout`` while
connecting (nothing was sent: the send is retried), ``WriteTimeout`` or ``ReadTimeout`` after
(the send may have been made: it is reconciled with the same key). httpcore closes the
connection that failed; kept-alive connections stay, and there is no timer thread per call.

The deadline is per thread: a client runs one request at a time on the thread that owns it
(``client.http_client``), and a streamed answer is read on that thread too. A write is made in
pieces of at most ``_WRITE_PIECE`` bytes, each waiting no longer than the time left, so a peer
that takes our bytes slowly is cut off within a piece of the deadline. The name lookup before a
new connection (the operating system's resolver) is outside it: AgentMail's name is looked up once
per kept-alive connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import httpcore
import httpx

# Bytes handed to one socket write: small enough that the kernel takes them in one go whenever
# the connection can take anything at all.
_WRITE_PIECE = 4096

_local = threading.local()


def begin(seconds: float) -> None:
    """The calling thread's next request must be over ``seconds`` from now (or by the end of
    the ``overall`` block it is made in, if that comes first)."""
    ends_at = time.monotonic() + seconds
    cap = getattr(_local, "cap", None)
    _local.ends_at = ends_at if cap is None else min(ends_at, cap)


@contextmanager
def overall(seconds: float) -> Iterator[None]:
    """The calls made in the block, on this thread, end within ``seconds`` from now together,
    each within its own deadline too: for work that makes several calls while someone waits
    for it (a draft that forwards a customer's files fetches two per file), which a web
    server's own timeout would otherwise cut without a word. A call begun after the time is up
    fails at once, as a connect timeout (nothing was sent)."""
    previous = getattr(_local, "cap", None)
    ends_at = time.monotonic() + seconds
    _local.cap = ends_at if previous is None else min(previous, ends_at)
    try:
        yield
    finally:
        _local.cap = previous


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    ends_at = getattr(_local, "ends_at", None)
    if ends_at is None:
        return timeout
    left = ends_at - time.monotonic()
    if left <= 0:
        raise error("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        for start in range(0, len(view), _WRITE_PIECE):
            piece = view[start : start + _WRITE_PIECE]
            self._inner.write(piece, _left(timeout, httpcore.WriteTimeout))  # type: ignore[arg-type]

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore.NetworkStream:
        return _Stream(
            self._inner.start_tls(
                ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)
            )
        )

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend):
        self._inner = inner

    def connect_tcp(
        self, host, port, timeout=None, local_address=None, socket_options=None
    ) -> httpcore.NetworkStream:
        return _Stream(
            self._inner.connect_tcp(
                host,
                port,
                _left(timeout, httpcore.ConnectTimeout),
                local_address,
                socket_options,
            )
        )

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _Stream(
            self._inner.connect_unix_socket(
                path, _left(timeout, httpcore.ConnectTimeout), socket_options
            )
        )

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install(client: httpx.Client) -> httpx.Client:
    """Put the deadline under every transport of ``client`` (its own and any proxy's).

    httpx has no public way to give a transport a network backend, so this sets httpcore's
    ``ConnectionPool._network_backend`` (which proxies' pools share); if either library
    renames it, building a client fails here rather than sending without a deadline
    (``tests/mailboxes/test_call_deadline.py`` shows the deadline working)."""
    transports: Iterable = (client._transport, *client._mounts.values())
    for transport in transports:
        if transport is None:
            continue
        pool = transport._pool
        if not isinstance(pool._network_backend, _Backend):
            pool._network_backend = _Backend(pool._network_backend)
    return client
