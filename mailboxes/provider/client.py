"""Client set-up: our own ``httpx.Client`` per thread (granular timeouts, no cookies, no
redirects) under a fresh SDK facade per call, bound to the caller's key."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import quote

import agentmail.inboxes.messages.client  # noqa: F401  (see below)
import httpx
from agentmail import AgentMail, AgentMailEnvironment
from django.conf import settings

from config.perprocess import PerProcess, PerThread

from .deadline import begin as begin_deadline
from .deadline import install as install_deadline
from .deadline import overall

NO_RETRIES: dict[str, Any] = {"max_retries": 0}

# The SDK imports ``client.inboxes.messages`` lazily, on first use: about 0.3 s of CPU that would
# otherwise land on a worker's first send, in every forked worker process. Imported above, with
# this module, so a worker pays it once at start, before it forks.


class _NoCookies(httpx.Cookies):
    """A cookie store that stays empty: a client serves every tenant's key in turn, so nothing a
    response sets may ride on the next request. Refusing them here, rather than through a cookie
    policy, also spares each response the parse of a cookie jar (9 % of a send's client CPU)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None

    def set(self, name: str, value: str, domain: str = "", path: str = "/") -> None:
        return None

    def __bool__(self) -> bool:
        return False


class _Client(httpx.Client):
    """``httpx.Client`` whose ``cookies`` is always the empty store above."""

    _no_cookies = _NoCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._no_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        return None


@functools.lru_cache(maxsize=8)
def _timeout_values(connect: float, read: float, pool: float) -> dict[str, float | None]:
    return httpx.Timeout(connect=connect, read=read, write=read, pool=pool).as_dict()


def _timeouts() -> httpx.Timeout:
    return httpx.Timeout(**_current_timeouts())


def _current_timeouts() -> dict[str, float | None]:
    return _timeout_values(
        settings.AGENTMAIL_CONNECT_TIMEOUT,
        settings.AGENTMAIL_READ_TIMEOUT,
        settings.AGENTMAIL_POOL_TIMEOUT,
    )


def _enforce_timeouts(request: httpx.Request) -> None:
    # The SDK passes one float as every request's timeout, which would flatten our connect/read/
    # pool split (reference/agentmail-api.md §6); put the granular values back on the request
    # (read from settings on every request, so a change applies to clients already built).
    request.extensions["timeout"] = _current_timeouts()
    # And the whole call, however the other end answers, ends within connect + read (deadline.py).
    begin_deadline(call_seconds())


def call_seconds() -> float:
    """The longest any AgentMail call may take, from its first socket operation to its last."""
    return float(settings.AGENTMAIL_CONNECT_TIMEOUT) + float(settings.AGENTMAIL_READ_TIMEOUT)


def calls_within(seconds: float):
    """A block whose AgentMail calls end within ``seconds`` altogether (``deadline.overall``)."""
    return overall(seconds)


# Building a TLS context reads the CA bundle (about 15 ms); one per process serves every client.
_tls_context = PerProcess(httpx.create_ssl_context)


def _new_http_client() -> httpx.Client:
    client = _Client(
        timeout=_timeouts(),
        verify=_tls_context.get(),
        # A sync client runs one request at a time on its thread: one kept-alive connection is
        # used, a second covers a server closing the first.
        limits=httpx.Limits(max_connections=4, max_keepalive_connections=2),
        event_hooks={"request": [_enforce_timeouts]},
        follow_redirects=False,
    )
    return install_deadline(client)


_http_clients = PerThread(_new_http_client)


def http_client() -> httpx.Client:
    """The calling thread's client, with its own kept-alive connection.

    One client per thread rather than one shared pool: the worker's call threads send
    concurrently, and a shared httpcore pool serialises them on its lock and probes every idle
    connection (a poll() each) on every request; measured, 7 % of the client CPU per send with
    8 threads. Worker processes fork, and a client must not cross a fork: ``PerThread`` rebuilds
    in a child."""
    return _http_clients.get()


def sdk(api_key: str) -> AgentMail:
    base = settings.AGENTMAIL_BASE_URL.rstrip("/")
    ws = base.replace("https://", "wss://").replace("http://", "ws://")
    return AgentMail(
        api_key=api_key,
        environment=AgentMailEnvironment(http=base, websockets=ws),
        httpx_client=http_client(),
        timeout=settings.AGENTMAIL_READ_TIMEOUT,
    )


def encode_path_segment(value: str) -> str:
    """An id for one segment of an API path. Message ids carry ``<``/``>`` and may carry
    ``/?#``; httpx leaves the last three alone, which would break the path: pre-encode them
    (httpx keeps existing %XX escapes). A whole segment of ``.`` or ``..`` is encoded too: httpx
    would resolve it, and the request would name another path of the API. Every id an agent or
    a customer chose (message and attachment ids) goes through this."""
    encoded = quote(value, safe="@")
    return encoded.replace(".", "%2E") if encoded in {".", ".."} else encoded
