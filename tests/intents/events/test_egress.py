"""The SSRF guard (common/egress.py) through the real delivery worker, with production settings
(private networks refused): loopback, 10.x, the metadata address and a name whose resolver answer
is faked (the process edge) to a private address are refused before any connection is opened,
and the error names the host, never the address it resolved to; a redirect is not followed; an
international name is resolved as the name the request carries. Registration refuses a URL the
HTTP client cannot build, and IPv6 forms that carry an IPv4 address are judged by that address.
Every connection any test here opens goes to loopback."""

from __future__ import annotations

import ipaddress
import uuid

import pytest

from common.egress import EgressRefused, check_address, validate_url
from intents import services as intent_services
from intents.events.delivery import deliver_due
from intents.models import AgentEventDelivery, AgentEventEndpoint
from intents.services.event_endpoints import endpoint_create
from tenants.services import AdminError
from tests.factories import make_local_mailbox


def an_event_to(tenant, url, member_of, settings, receiver=None) -> AgentEventEndpoint:
    """Register ``url`` (as a self-hosted deployment may), then turn production's guard on
    (neither private networks nor loopback) and cause one event (a rejection)."""
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = True
    settings.EGRESS_ALLOW_LOOPBACK = True
    admin = member_of(tenant, "admin").user
    approver = member_of(tenant, "approver").user
    endpoint, secret = endpoint_create(
        tenant=tenant, url=url, event_types=["draft.rejected"], actor=admin
    )
    if receiver is not None:
        receiver.secret = secret
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = False
    settings.EGRESS_ALLOW_LOOPBACK = False
    draft = intent_services.draft_create(
        tenant=tenant,
        mailbox=make_local_mailbox(tenant, username=f"support-{uuid.uuid4().hex[:6]}"),
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
    intent_services.draft_reject(tenant=tenant, draft_id=draft.pk, reason="No", actor=approver)
    return endpoint


def last_error(endpoint) -> tuple:
    delivery = AgentEventDelivery.objects.filter(endpoint=endpoint).order_by("id").first()
    return delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error


@pytest.mark.django_db(transaction=True)
def test_loopback_is_refused_before_connecting(tenant_a, member_of, settings, receiver, connects):
    endpoint = an_event_to(tenant_a, receiver.url, member_of, settings)

    deliver_due()

    status, attempts, code, error = last_error(endpoint)
    assert (status, attempts, code) == ("pending", 1, None)
    assert error.startswith("address_loopback:")
    assert (receiver.connections, connects) == (0, [])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("url", "answer", "code"),
    [
        ("http://10.1.2.3:8080/hooks", None, "address_private"),
        ("http://[::ffff:10.0.0.1]/hooks", None, "address_private"),
        ("http://[fd00:ec2::1]/", None, "address_private"),
        ("http://imds6.example.test/latest/meta-data/", "fd00:ec2::254", "address_forbidden"),
        ("http://metadata.example.test/latest/meta-data/", "169.254.169.254", "address_forbidden"),
        ("http://zero.example.test:8080/", "0.0.0.0", "address_forbidden"),
    ],
)
def test_private_and_metadata_addresses_are_refused_before_connecting(
    tenant_a, member_of, settings, resolver, connects, url, answer, code
):
    """Literal private addresses, and names answering the metadata or the unspecified address
    (which registration refuses when typed as literals)."""
    resolver({f"{name}.example.test": answer for name in ("metadata", "zero", "imds6")})
    endpoint = an_event_to(tenant_a, url, member_of, settings)

    deliver_due()

    assert last_error(endpoint)[3].startswith(f"{code}:")
    assert connects == []


@pytest.mark.django_db(transaction=True)
def test_a_name_that_resolves_to_a_private_address_is_refused_before_connecting(
    tenant_a, member_of, settings, receiver, resolver, connects
):
    port = receiver.server.server_address[1]
    resolver({"hooks.example.test": "10.0.0.5", "rebind.example.test": "127.0.0.1"})
    private = an_event_to(tenant_a, "https://hooks.example.test/in", member_of, settings)
    loopback = an_event_to(tenant_a, f"http://rebind.example.test:{port}/in", member_of, settings)

    deliver_due()

    assert last_error(private)[3].startswith("address_private:")
    assert last_error(loopback)[3].startswith("address_loopback:")
    assert (receiver.connections, connects) == (0, [])


@pytest.mark.django_db(transaction=True)
def test_a_refused_name_is_reported_by_its_name_never_by_its_resolved_address(
    tenant_a, member_of, settings, resolver, connects
):
    """The error is shown to tenant admins: the resolver's answer for an internal name would
    let them map the deployment's network by name."""
    resolver({"billing-db.internal.test": "10.23.45.67", "cache.internal.test": "127.0.0.9"})
    private = an_event_to(tenant_a, "https://billing-db.internal.test/", member_of, settings)
    loopback = an_event_to(tenant_a, "https://cache.internal.test/", member_of, settings)

    deliver_due()

    assert last_error(private)[3] == (
        "address_private: billing-db.internal.test resolves to an address that is not public."
    )
    assert last_error(loopback)[3] == (
        "address_loopback: cache.internal.test resolves to a loopback address (this server "
        "itself): it is reached only with EGRESS_ALLOW_LOOPBACK on."
    )
    assert connects == []


@pytest.mark.django_db(transaction=True)
def test_an_international_name_is_resolved_as_the_name_the_request_carries(
    tenant_a, member_of, settings, receiver, resolver, connects
):
    """IDNA 2008 (httpx) writes "faß" as xn--fa-hia; Python's IDNA 2003 codec, which the
    resolver and the TLS layer use on a Unicode name, as "fass": another domain."""
    port = receiver.server.server_address[1]
    resolver({"xn--fa-hia.example.test": "127.0.0.1", "fass.example.test": "10.9.9.9"})
    an_event_to(tenant_a, f"http://faß.example.test:{port}/in", member_of, settings, receiver)
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = True
    settings.EGRESS_ALLOW_LOOPBACK = True

    deliver_due()

    assert receiver.types == ["draft.rejected"]
    assert receiver.headers[0]["Host"] == f"xn--fa-hia.example.test:{port}"
    assert connects == [("127.0.0.1", port)]


@pytest.mark.django_db(transaction=True)
def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(
    tenant_a, member_of, settings, receiver, resolver, connects
):
    """Self-hosted (private networks and loopback allowed): the name is resolved once, the
    connection goes to that address, and the request still names the host it was sent to."""
    port = receiver.server.server_address[1]
    resolver({"hooks.internal.test": "127.0.0.1"})
    an_event_to(tenant_a, f"http://hooks.internal.test:{port}/in", member_of, settings, receiver)
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = True
    settings.EGRESS_ALLOW_LOOPBACK = True

    deliver_due()

    assert receiver.types == ["draft.rejected"]
    assert receiver.headers[0]["Host"] == f"hooks.internal.test:{port}"
    assert connects == [("127.0.0.1", port)]


@pytest.mark.django_db(transaction=True)
def test_a_redirect_is_not_followed(tenant_a, member_of, settings, make_receiver, connects):
    first, second = make_receiver(), make_receiver()
    first.redirect_to = second.url
    endpoint = an_event_to(tenant_a, first.url, member_of, settings)
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = True
    settings.EGRESS_ALLOW_LOOPBACK = True

    deliver_due(limit=1)

    status, attempts, code, error = last_error(endpoint)
    assert (status, attempts, code, error) == ("pending", 1, 302, "HTTP 302")
    assert (first.connections, second.connections) == (1, 0)
    assert len(connects) == 1


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("ftp://hooks.example.com/", "url_scheme"),
        ("http://hooks.example.com/", "url_https"),
        ("https://user:pw@hooks.example.com/", "url_userinfo"),
        ("https:///path", "url_host"),
        ("https://hooks.example.com/#x", "url_fragment"),
        ("https://hooks.example.com/a b", "url_whitespace"),
        ("https://hooks.example.com/\x00", "url_whitespace"),
        ("https://hooks.example.com\u00a0/hooks", "url_whitespace"),  # NBSP pasted from a doc
        ("https://a\u200db.example.com/", "url_whitespace"),  # zero-width joiner (Cf)
        ("https://hooks.example.com/a\u202eb", "url_whitespace"),  # right-to-left override
        ("https://hooks.example.com/a\u0085b", "url_whitespace"),  # C1 control (NEL)
        ("https://hooks.example.com/a\u2028b", "url_whitespace"),  # line separator (Zl)
        ("https://hooks.example.com/a\u3000b", "url_whitespace"),  # ideographic space (Zs)
        ("https://999.1.1.1/", "url_host_invalid"),
        ("https://0177.0.0.1/", "url_host_invalid"),
        ("https://[v1.x]/", "url_host_invalid"),
        ("https://xn--zz.example.com/", "url_host_invalid"),
        # A percent escape in a host: httpx sends it as written, which no name server resolves
        # (a browser would read 127.0.0.1); accepted, every delivery failed "does not resolve".
        ("https://127%2E0%2E0%2E1/", "url_host_invalid"),
        ("https://%68ooks.example.com/", "url_host_invalid"),
        ("https://hooks.example.com:99999/", "url_invalid"),
        ("https://127.0.0.1/", "address_loopback"),
        ("https://[::1]/", "address_loopback"),  # not "never a delivery address" (::/8)
        ("https://10.0.0.1/", "address_private"),
        ("https://169.254.169.254/", "address_forbidden"),
        ("https://[::ffff:192.168.1.1]/", "address_private"),
        # IPv4 written as a number: refused when typed, not only at the first delivery.
        ("https://2130706433/", "address_loopback"),
        ("https://0x7f000001/", "address_loopback"),
        ("https://127.1/", "address_loopback"),
        ("https://10.1/", "address_private"),
    ],
)
def test_registration_refuses_urls_with_a_precise_reason(url, code):
    with pytest.raises(EgressRefused) as refused:
        validate_url(url, allow_private=False, allow_loopback=False, require_https=True)
    assert refused.value.code == code


def test_registration_accepts_a_public_https_url_without_resolving_it():
    assert (
        validate_url(
            "https://hooks.example.com:8443/in?x=1",
            allow_private=False,
            allow_loopback=False,
            require_https=True,
        )
        == "https://hooks.example.com:8443/in?x=1"
    )


@pytest.mark.parametrize(
    ("ip", "allowed_private", "allowed_public"),
    [
        ("8.8.8.8", True, True),
        ("2606:4700::1111", True, True),
        ("127.0.0.1", False, False),  # loopback is allow_loopback's (test_egress_loopback)
        ("10.9.8.7", True, False),
        ("192.168.0.1", True, False),
        ("100.64.0.1", True, False),
        ("::1", False, False),
        ("169.254.169.254", False, False),
        ("fe80::1", False, False),
        ("224.0.0.1", False, False),
        ("0.0.0.0", False, False),
        ("240.0.0.1", False, False),
        ("::ffff:127.0.0.1", False, False),
        ("64:ff9b::808:808", True, True),  # NAT64 of 8.8.8.8
        ("64:ff9b::a00:1", True, False),  # NAT64 of 10.0.0.1
        ("64:ff9b::7f00:1", False, False),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", False, False),  # NAT64 of the metadata address
        ("::ffff:0:a00:1", True, False),  # SIIT IPv4-translated 10.0.0.1
        ("::ffff:0:a9fe:a9fe", False, False),  # SIIT IPv4-translated metadata address
        ("::a9fe:a9fe", False, False),  # IPv4-compatible metadata address
        ("::a00:1", True, False),  # IPv4-compatible 10.0.0.1
        ("fec0::1", True, False),  # site-local, deprecated (RFC 3879)
        ("2002:a9fe:a9fe::1", False, False),  # 6to4 of the metadata address
        ("2002:a00:1::1", False, False),  # 6to4 of 10.0.0.1: a tunnel is not a private network
        ("2001:0:4136:e378::5601:5601", False, False),  # Teredo, client 169.254.169.254
    ],
)
def test_address_rules(ip, allowed_private, allowed_public):
    def allowed(allow_private: bool) -> bool:
        try:
            check_address(
                ipaddress.ip_address(ip), allow_private=allow_private, allow_loopback=False
            )
        except EgressRefused:
            return False
        return True

    assert (allowed(True), allowed(False)) == (allowed_private, allowed_public)


@pytest.mark.django_db
def test_the_registration_form_error_names_the_field(tenant_a, member_of, settings):
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = False
    admin = member_of(tenant_a, "admin").user
    with pytest.raises(AdminError) as refused:
        endpoint_create(
            tenant=tenant_a,
            url="http://hooks.example.com/",
            event_types=["draft.rejected"],
            actor=admin,
        )
    assert (refused.value.code, refused.value.field) == ("url_https", "url")
    assert AgentEventEndpoint.objects.count() == 0
