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
(name lookup, headers or body). The lookup has no socket to shut: it runs on a pool of threads
and the request stops waiting for it at the deadline (the resolver's own timeouts, 5 s a try and
name server by default, would otherwise hold the worker; the thread finishes on its own).

Refused: private (with the deprecated site-local ``fec0::/10``) unless ``allow_private``;
loopback (127.0.0.0/8, ``::1``, any spelling of them below, and the names ``localhost`` and
``*.localhost`` when typed, RFC 6761) unless ``allow_loopback``, a decision of its own
(``EGRESS_ALLOW_LOOPBACK``): loopback is the deployment host itself (its metrics, redis,
pgbouncer, PostgreSQL), which a deployment that reaches receivers on its own network has no
reason to open to whatever a tenant admin types; link-local (which holds the cloud metadata
address 169.254.169.254), the metadata services that live elsewhere (AWS's ``fd00:ec2::254`` in fc00::/7, Alibaba Cloud's
``100.100.100.200`` in 100.64/10), multicast, reserved, unspecified and the other non-global
ranges of ``ipaddress`` always. An IPv6 address
that only spells an IPv4 address is judged as that IPv4 address: IPv4-mapped
(``::ffff:10.0.0.1``), NAT64 (``64:ff9b::/96``, RFC 6052), SIIT IPv4-translated
(``::ffff:0:0:0/96``, RFC 2765) and IPv4-compatible (``::/96``), which a translator on the path
delivers to that IPv4 address. A tunnel address (6to4 ``2002::/16``, Teredo ``2001::/32``) is
refused if an IPv4 end it names is, and is then judged as the IPv6 address it is.

A name refused for what it resolved to is reported by its name only: the resolver's answer is
logged, never put in the error, which tenant admins read (it would map the internal network by
name). A URL is refused at registration if the HTTP client could not build a request for it
(``validate_url``), so the worker never meets one it cannot send.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
import threading
import time
import unicodedata
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as LookupTimedOut
from urllib.parse import urlsplit

import httpx
from django.utils.translation import gettext as _

from common.text import control_in

log = logging.getLogger("common.egress")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class EgressRefused(Exception):
    """The destination is not one we may connect to; ``code`` is a stable slug."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# Site-local, deprecated by RFC 3879 for fc00::/7: private by nature, but ipaddress calls it global.
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")
_PRIVATE_OK = (
    ipaddress.ip_network("10.0.0.0/8"),
    ipaddress.ip_network("172.16.0.0/12"),
    ipaddress.ip_network("192.168.0.0/16"),
    ipaddress.ip_network("100.64.0.0/10"),
    ipaddress.ip_network("fc00::/7"),
    _SITE_LOCAL,
)

# The setting that allows loopback, named in the refusal: tenant admins read it, and it tells them
# (and the operator they ask) that loopback is refused on purpose, and what would allow it.
LOOPBACK_SETTING = "EGRESS_ALLOW_LOOPBACK"

# Cloud metadata services outside link-local, where private networks may be allowed: AWS's
# instance metadata, DNS and time services over IPv6 (Nitro instances; the IPv4 ones are
# 169.254.169.254, .253 and .123), in the unique-local fc00::/7
# (https://docs.aws.amazon.com/whitepapers/latest/ipv6-on-aws/supporting-amazon-vpc-services.html),
# and Alibaba Cloud's instance metadata, in the shared 100.64/10
# (https://www.alibabacloud.com/help/en/ecs/user-guide/view-instance-metadata).
_CLOUD_METADATA = (
    ipaddress.ip_network("fd00:ec2::254/128"),
    ipaddress.ip_network("fd00:ec2::253/128"),
    ipaddress.ip_network("fd00:ec2::123/128"),
    ipaddress.ip_network("100.100.100.200/32"),
)

# IPv6 prefixes whose last 32 bits are an IPv4 address the packet goes to (IPv4-mapped, handled
# by ``ipv4_mapped``, is the fourth).
_IPV4_SPELLINGS = (
    ipaddress.ip_network("64:ff9b::/96"),  # NAT64 well-known prefix (RFC 6052)
    ipaddress.ip_network("::ffff:0:0:0/96"),  # SIIT IPv4-translated (RFC 2765)
    ipaddress.ip_network("::/96"),  # IPv4-compatible (RFC 4291, deprecated)
)


def _spelled_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address ``ip`` is only another spelling of, or None."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.is_loopback or ip.is_unspecified:  # ::1 and :: lie in ::/96 but are IPv6's own
        return None
    if any(ip in net for net in _IPV4_SPELLINGS):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _tunnel_ends(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses a 6to4 or Teredo (server, client) address names."""
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        return ip.teredo
    return ()


def check_address(ip: IPAddress, *, allow_private: bool, allow_loopback: bool) -> None:
    """Refuse an address we must not connect to (``EgressRefused``)."""
    if isinstance(ip, ipaddress.IPv6Address):
        spelled = _spelled_ipv4(ip)
        if spelled is not None:
            ip = spelled
        else:
            for end in _tunnel_ends(ip):
                check_address(end, allow_private=allow_private, allow_loopback=allow_loopback)
    metadata = any(ip in net for net in _CLOUD_METADATA)
    if ip.is_unspecified or ip.is_multicast or ip.is_link_local or metadata:
        raise EgressRefused(
            "address_forbidden", _("%(ip)s is never a delivery address.") % {"ip": ip}
        )
    if ip.is_global and ip not in _SITE_LOCAL:
        return
    # Before is_reserved: ::1 lies in the reserved ::/8, and "never a delivery address" is not
    # why it is refused (it is this machine).
    if ip.is_loopback:
        if allow_loopback:
            return
        raise EgressRefused(
            "address_loopback",
            _(
                "%(ip)s is a loopback address (this server itself): it is reached only with "
                "%(setting)s on."
            )
            % {"ip": ip, "setting": LOOPBACK_SETTING},
        )
    if allow_private and any(ip in net for net in _PRIVATE_OK):
        return
    if ip.is_reserved:
        raise EgressRefused(
            "address_forbidden", _("%(ip)s is never a delivery address.") % {"ip": ip}
        )
    raise EgressRefused("address_private", _("%(ip)s is not a public address.") % {"ip": ip})


def literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


# Name lookups with a deadline run on this pool, one per process: a pool inherited through fork
# has no threads, but thinks it has. A lookup given up at its request's deadline keeps its thread
# until the resolver answers, and a lookup queued behind such threads waits for one until its own
# deadline: with 8 threads, the 8 attempts of one round at one tenant's names that hang (an
# attacker's name server that never answers) held them all, and every other tenant's next
# attempts failed ("did not resolve"), counted towards disabling their endpoints. The pool is
# sized for the lookups given up but still running: each attempt in flight starts one per
# deadline, and the resolver gives up after 30 s at most by default (5 s a try, 2 tries, 3 name
# servers), so with the agent events' 30 s deadline at most 2 per attempt in flight: 16 at their
# default concurrency, 128 at their largest. Threads are started only when none is idle.
LOOKUP_THREADS = 256
_LOOKUPS: dict[int, ThreadPoolExecutor] = {}
_LOOKUPS_LOCK = threading.Lock()


def _lookup_pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    with _LOOKUPS_LOCK:
        if pid not in _LOOKUPS:
            _LOOKUPS.clear()
            _LOOKUPS[pid] = ThreadPoolExecutor(
                max_workers=LOOKUP_THREADS, thread_name_prefix="egress-lookup"
            )
        return _LOOKUPS[pid]


class LookupTooSlow(Exception):
    """The name did not resolve before the request's deadline."""


def _getaddrinfo(host: str, port: int, within: float | None) -> list:
    if within is None:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    lookup = _lookup_pool().submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        return lookup.result(timeout=max(within, 0.0))
    except LookupTimedOut:
        lookup.cancel()  # if it never started; a running lookup ends on its own
        raise LookupTooSlow(host) from None


def _name_is_loopback(host: str) -> EgressRefused:
    return EgressRefused(
        "address_loopback",
        _(
            "%(host)s resolves to a loopback address (this server itself): it is reached only "
            "with %(setting)s on."
        )
        % {"host": host, "setting": LOOPBACK_SETTING},
    )


def resolve(
    host: str,
    port: int,
    *,
    allow_private: bool,
    allow_loopback: bool,
    within: float | None = None,
) -> IPAddress:
    """The first address of ``host`` after every answer passed ``check_address``: one bad answer
    refuses the host (an attacker's name may answer a public and a private address).
    ``within``: seconds the lookup may take (``LookupTooSlow`` after them)."""
    literal = literal_address(host)
    if literal is not None:
        check_address(literal, allow_private=allow_private, allow_loopback=allow_loopback)
        return literal
    try:
        answers = _getaddrinfo(host, port, within)
    except (socket.gaierror, UnicodeError):
        raise EgressRefused(
            "dns_failed", _("%(host)s does not resolve.") % {"host": host}
        ) from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in answers]
    if not addresses:
        raise EgressRefused("dns_failed", _("%(host)s does not resolve.") % {"host": host})
    for ip in addresses:
        try:
            check_address(ip, allow_private=allow_private, allow_loopback=allow_loopback)
        except EgressRefused as refused:
            # The error reaches tenant admins: it names the host they typed, never the address
            # our resolver answered (which would let them map the internal network name by name).
            log.warning(
                "common.egress.name_refused",
                extra={"host": host, "address": str(ip), "code": refused.code},
            )
            if refused.code == "address_loopback":  # said as such: which setting allows it
                raise _name_is_loopback(host) from None
            raise EgressRefused(
                refused.code,
                _("%(host)s resolves to an address that is not public.") % {"host": host},
            ) from None
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
        self._ends_at: float | None = None

    def start(self) -> None:
        self._ends_at = time.monotonic() + self.seconds
        self._timer.start()

    def remaining(self) -> float:
        assert self._ends_at is not None, "started first"
        return self._ends_at - time.monotonic()

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

    def __init__(
        self,
        *,
        allow_private: bool,
        allow_loopback: bool,
        deadline: float | None = None,
        **transport_options,
    ):
        self.allow_private = allow_private
        self.allow_loopback = allow_loopback
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
            response = self._pinned(request, deadline)
        except LookupTooSlow as slow:
            deadline.cancel()
            raise DeadlinePassed(
                f"{slow} did not resolve within {deadline.seconds:g} s", request=request
            ) from None
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

    def _pinned(self, request: httpx.Request, deadline: _Deadline | None = None) -> httpx.Response:
        url = request.url
        # The A-label (IDNA 2008) form the request is addressed to: ``url.host`` is the Unicode
        # form, which the resolver and the TLS layer would encode again with Python's IDNA 2003
        # codec, so "faß.de" would be resolved and verified as another domain, "fass.de".
        host = url.raw_host.decode("ascii")
        port = url.port or (443 if url.scheme == "https" else 80)
        within = deadline.remaining() if deadline is not None else None
        ip = resolve(
            host,
            port,
            allow_private=self.allow_private,
            allow_loopback=self.allow_loopback,
            within=within,
        )
        ip_host = f"[{ip}]" if ip.version == 6 else str(ip)
        request.url = url.copy_with(host=ip_host.strip("[]"))
        request.headers["Host"] = url.netloc.decode("ascii")
        if url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": host}
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def validate_url(
    raw: str, *, allow_private: bool, allow_loopback: bool, require_https: bool
) -> str:
    """Refuse a URL we will not deliver to (``EgressRefused`` with a reason for a form).

    Names are resolved only when delivering (their answers may change); a literal address is
    checked here too, and ``localhost`` and its subdomains (loopback by definition, RFC 6761),
    so an obviously internal URL is refused when it is typed.
    """
    if char := _unsafe_in_url(raw):
        raise EgressRefused(
            "url_whitespace",
            _("The URL may not contain spaces, control or invisible characters (%(char)s).")
            % {"char": char},
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
    _check_buildable(raw, parts.scheme, parts.netloc)
    # The host as the client reaches it, not as ``urlsplit`` reads it: httpx takes an
    # ideographic full stop for a dot, and a trailing dot names the same address, so
    # "127。0。0。1" and "127.0.0.1." were accepted here and refused only at the first delivery.
    host = host_reached(parts.hostname)
    literal = literal_address(host) or _ipv4_written_as_a_number(host)
    if literal is not None:
        check_address(literal, allow_private=allow_private, allow_loopback=allow_loopback)
    elif is_localhost(host) and not allow_loopback:
        raise _name_is_loopback(host)
    return raw


def is_localhost(host: str) -> bool:
    """Whether ``host`` (as ``host_reached`` gives it) is ``localhost`` or a name under it, which
    resolvers answer with loopback (RFC 6761, 6.3)."""
    return host == "localhost" or host.endswith(".localhost")


def host_reached(host: str) -> str:
    """The one spelling of the host a URL's ``host`` (``urlsplit``'s ``hostname``) reaches: an
    IP address in its canonical form (an IPv6 address's zeros compressed, an IPv4 address
    written as one number, in hex or with a short last part, or mapped into IPv6, as the dotted
    quad it denotes), a name as the HTTP client sends it (its xn-- form, an ideographic full
    stop as a dot, lower case), without the root's trailing dot. For telling two URLs of one
    receiver apart from two receivers."""
    try:
        host = httpx.URL(scheme="https", host=host).raw_host.decode("ascii").lower()
    except (httpx.InvalidURL, UnicodeError):
        host = host.lower()
    host = host.rstrip(".")
    address = literal_address(host) or _ipv4_written_as_a_number(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return host if address is None else str(address)


def url_shown(url: str) -> str:
    """The URL as typed, followed by its host's xn-- form ("(xn--e1afmkfd.xn--p1ai)", as
    ``host_reached`` gives it) when the host holds characters beyond ASCII: a page shows the
    Unicode as drawn, and the name the events go to is the other one, for a reader to check."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return url
    return url if host.isascii() else f"{url} ({host_reached(host)})"


def _ipv4_written_as_a_number(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host spelled another way denotes to the system's resolver
    (``2130706433``, ``0x7f000001`` and ``127.1`` are all 127.0.0.1), or None: such a URL was
    accepted when typed and refused only at its first delivery."""
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _unsafe_in_url(raw: str) -> str | None:
    """The first character of ``raw`` a URL may not hold, as ``U+00A0``: a control character or
    lone surrogate (``control_in``), a space of any kind (Zs, Zl, Zp) or an invisible format
    character (Cf: zero-width joiner, bidirectional controls), which make a URL read as another."""
    if found := control_in(raw, tab=False):
        return found
    bad = next((c for c in raw if unicodedata.category(c) in {"Cf", "Zs", "Zl", "Zp"}), None)
    return None if bad is None else f"U+{ord(bad):04X}"


def _check_buildable(raw: str, scheme: str, netloc: str) -> None:
    """Refuse a URL the HTTP client cannot build a request for: the standard library's
    ``urlsplit`` accepts hosts that httpx (and the ``idna`` package) refuse, such as
    ``999.1.1.1``, ``0177.0.0.1``, ``[v1.x]`` or an invalid ``xn--`` label; and one httpx
    builds with a host no resolver can answer, a name holding a percent escape."""
    host = netloc[: netloc.index("]") + 1] if netloc.startswith("[") else netloc.split(":")[0]
    try:
        # A percent escape in a name ("127%2E0%2E0%2E1"): httpx sends it as written, which no
        # name server resolves, so every delivery failed. (An IPv6 zone, "%25eth0", is bracketed.)
        if "%" in host and not host.startswith("["):
            raise httpx.InvalidURL(host)
        httpx.Request("POST", f"{scheme}://{host}/")
    except (httpx.InvalidURL, UnicodeError):
        raise EgressRefused(
            "url_host_invalid",
            _("%(host)s is not a valid host name or IP address.") % {"host": host},
        ) from None
    try:
        httpx.Request("POST", raw)
    except (httpx.InvalidURL, UnicodeError):
        raise EgressRefused("url_invalid", _("This is not a valid URL.")) from None
