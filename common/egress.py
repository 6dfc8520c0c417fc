"""Outbound HTTP to addresses people typed in (agent event endpoints): the SSRF guard.

A URL's host is resolved once (``socket.getaddrinfo``, the process edge), every answer is checked,
and the connection goes to the checked address itself: ``PinnedTransport`` rewrites the request to
that IP and keeps the name in the ``Host`` header and as the TLS server name (SNI and certificate
check), so a DNS answer that changes between the check and the connect (rebinding) cannot send us
elsewhere. Redirects are never followed (the client is built with ``follow_redirects=False``; a 3xx
is an answer like any other).

Refused always: loopback and private only unless ``allow_private``; link-local (which holds the
cloud metadata address 169.254.169.254), multicast, reserved, unspecified and the other
non-global ranges of ``ipaddress`` always. IPv4-mapped IPv6 (``::ffff:10.0.0.1``) is judged as
the IPv4 address it carries.
"""

from __future__ import annotations

import ipaddress
import socket
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


class PinnedTransport(httpx.BaseTransport):
    """An httpx transport that resolves and checks each request's host, then connects to that
    address only, with the original name as Host and TLS server name."""

    def __init__(self, *, allow_private: bool, **transport_options):
        self.allow_private = allow_private
        self._inner = httpx.HTTPTransport(**transport_options)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
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
