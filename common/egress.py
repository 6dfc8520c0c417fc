"""Outbound HTTP to addresses people typed in (agent event endpoints): the SSRF guard.

A URL's host is resolved once (``socket.getaddrinfo``, the process edge), every answer is checked,
and the connection goes to the checked address itself: ``PinnedTransport`` rewrites the request to
that IP and keeps the name in the ``Host`` header and as the TLS server name (SNI and certificate
check), so a DNS answer that changes between the check and the connect (rebinding) cannot send us
elsewhere. Redirects are never followed (the client is built with ``follow_redirects=False``; a 3xx
is an answer like any other).

Each request also has a hard deadline (``PinnedTransport(deadline=...)``): httpx's timeouts are
per socket operation, so a server answering one byte at a time, each within the read timeout,
would hold the request for as long as it liked. When the deadline passes, the connection's
socket is shut down and the request fails with ``DeadlinePassed`` (an ``httpx.ReadTimeout``), whatever phase it is in
(headers or body).

Refused always: loopback and private only unless ``allow_private``; link-local (which holds the
cloud metadata address 169.254.169.254), multicast, reserved, unspecified and the other
non-global ranges of ``ipaddress`` always. IPv4-mapped IPv6 (``::ffff:10.0.0.1``) is judged as
the IPv4 address it carries.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
from django.utils.translation import gettext as _

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class EgressRefused(Exception):
    """The destination is not one we may connect to; ``code`` is a stable slug."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


_PRIVATE_OK = (
    ipaddress.ip_network("10.0.0.0/8"),
    ipaddress.ip_network("172.16.0.0/12"),
    ipaddress.ip_network("192.168.0.0/16"),
    ipaddress.ip_network("100.64.0.0/10"),
    ipaddress.ip_network("127.0.0.0/8"),
    ipaddress.ip_network("fc00::/7"),
    ipaddress.ip_network("::1/128"),
)


def check_address(ip: IPAddress, *, allow_private: bool) -> None:
    """Refuse an address we must not connect to (``EgressRefused``)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_unspecified or ip.is_multicast or ip.is_link_local:
        raise EgressRefused(
            "address_forbidden", _("%(ip)s is never a delivery address.") % {"ip": ip}
        )
    if ip.is_global:
        return
    # Before is_reserved: ::1 lies in the reserved ::/8.
    if allow_private and any(ip in net for net in _PRIVATE_OK):
        return
    if ip.is_reserved:
        raise EgressRefused(
            "address_forbidden", _("%(ip)s is never a delivery address.") % {"ip": ip}
        )
    if ip.is_loopback:
        raise EgressRefused("address_loopback", _("%(ip)s is a loopback address.") % {"ip": ip})
    raise EgressRefused("address_private", _("%(ip)s is not a public address.") % {"ip": ip})


def literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def resolve(host: str, port: int, *, allow_private: bool) -> IPAddress:
    """The first address of ``host`` after every answer passed ``check_address``: one bad answer
    refuses the host (an attacker's name may answer a public and a private address)."""
    literal = literal_address(host)
    if literal is not None:
        check_address(literal, allow_private=allow_private)
        return literal
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise EgressRefused(
            "dns_failed", _("%(host)s does not resolve.") % {"host": host}
        ) from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in answers]
    if not addresses:
        raise EgressRefused("dns_failed", _("%(host)s does not resolve.") % {"host": host})
    for ip in addresses:
        check_address(ip, allow_private=allow_private)
    return addresses[0]


class DeadlinePassed(httpx.ReadTimeout):
    """The request's hard deadline passed (``PinnedTransport(deadline=...)``)."""


class _Deadline:
    """Shuts a request's socket down at a fixed time. It learns the socket from httpcore's
    ``trace`` extension (the connection's ``connect_tcp`` event); a deadline that passes before
    the connection exists shuts it as soon as it does."""

    def __init__(self, seconds: float, chained=None):
        self.seconds = seconds
        self.fired = False
        self._chained = chained
        self._socket: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def start(self) -> None:
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()

    def trace(self, event_name: str, info: dict) -> None:
        if event_name == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            with self._lock:
                self._socket = stream.get_extra_info("socket") if stream is not None else None
                if self.fired:
                    self._shut()
        if self._chained is not None:
            self._chained(event_name, info)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            self._shut()

    def _shut(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):  # already closed
                self._socket.shutdown(socket.SHUT_RDWR)

    def timeout(self, request: httpx.Request) -> DeadlinePassed:
        return DeadlinePassed(f"no complete answer within {self.seconds:g} s", request=request)


class _DeadlineStream(httpx.SyncByteStream):
    """The response body, read under the request's deadline, which ends when it is closed."""

    def __init__(self, inner: httpx.SyncByteStream, deadline: _Deadline, request: httpx.Request):
        self._inner = inner
        self._deadline = deadline
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._inner
        except httpx.HTTPError as exc:
            if self._deadline.fired:
                raise self._deadline.timeout(self._request) from exc
            raise

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._deadline.cancel()


class PinnedTransport(httpx.BaseTransport):
    """An httpx transport that resolves and checks each request's host, then connects to that
    address only, with the original name as Host and TLS server name; ``deadline``: seconds the
    whole request may take, from the connection to the last byte of the answer."""

    def __init__(self, *, allow_private: bool, deadline: float | None = None, **transport_options):
        self.allow_private = allow_private
        self.deadline = deadline
        if deadline is not None:
            # The deadline learns a request's socket when it connects: one connection each.
            transport_options.setdefault("limits", httpx.Limits(max_keepalive_connections=0))
        self._inner = httpx.HTTPTransport(**transport_options)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.deadline is None:
            return self._pinned(request)
        deadline = _Deadline(self.deadline, chained=request.extensions.get("trace"))
        request.extensions = {**request.extensions, "trace": deadline.trace}
        deadline.start()
        try:
            response = self._pinned(request)
        except httpx.HTTPError as exc:
            deadline.cancel()
            if deadline.fired:
                raise deadline.timeout(request) from exc
            raise
        except BaseException:
            deadline.cancel()
            raise
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _DeadlineStream(response.stream, deadline, request)
        return response

    def _pinned(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        host = url.host
        port = url.port or (443 if url.scheme == "https" else 80)
        ip = resolve(host, port, allow_private=self.allow_private)
        ip_host = f"[{ip}]" if ip.version == 6 else str(ip)
        request.url = url.copy_with(host=ip_host.strip("[]"))
        request.headers["Host"] = url.netloc.decode("ascii")
        if url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": host}
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def validate_url(raw: str, *, allow_private: bool, require_https: bool) -> str:
    """Refuse a URL we will not deliver to (``EgressRefused`` with a reason for a form).

    Names are resolved only when delivering (their answers may change); a literal address is
    checked here too, so an obviously internal URL is refused when it is typed.
    """
    if any(ord(ch) < 33 or ord(ch) == 127 for ch in raw):
        raise EgressRefused(
            "url_whitespace", _("The URL may not contain spaces or control characters.")
        )
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError:
        raise EgressRefused("url_invalid", _("This is not a valid URL.")) from None
    if parts.scheme not in {"http", "https"}:
        raise EgressRefused("url_scheme", _("The URL must start with https:// (or http://)."))
    if require_https and parts.scheme != "https":
        raise EgressRefused("url_https", _("The URL must use https://."))
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise EgressRefused("url_userinfo", _("The URL may not contain a user name or password."))
    if not parts.hostname:
        raise EgressRefused("url_host", _("The URL has no host name."))
    if parts.fragment:
        raise EgressRefused("url_fragment", _("The URL may not contain a #fragment."))
    if port == 0:
        raise EgressRefused("url_port", _("The URL's port is not valid."))
    literal = literal_address(parts.hostname)
    if literal is not None:
        check_address(literal, allow_private=allow_private)
    return raw
