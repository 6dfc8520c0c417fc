"""Loopback is its own decision (common/egress.py, ``EGRESS_ALLOW_LOOPBACK``). A self-hosted
production deployment turns ``AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS`` on for receivers on its own
network; that let any tenant admin point agent events at the deployment host itself (the app's
/metrics, redis, pgbouncer, the embedded PostgreSQL): loopback was in the private ranges. It is
reached only with ``EGRESS_ALLOW_LOOPBACK`` on (development and tests, whose receivers run on
loopback), and the refusal says so, for every spelling of it and for a name that resolves to it.
Every connection a test here opens goes to loopback."""

from __future__ import annotations

import ipaddress

import pytest

from common.egress import EgressRefused, check_address, validate_url
from intents.events.delivery import deliver_due
from intents.models import AgentEventEndpoint
from intents.services.event_endpoints import endpoint_create
from tenants.services import AdminError
from tests.intents.events.test_egress import an_event_to, last_error

SAID = (
    "is a loopback address (this server itself): it is reached only with EGRESS_ALLOW_LOOPBACK on."
)


def self_hosted_production(settings, *, loopback: bool) -> None:
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = True
    settings.EGRESS_ALLOW_LOOPBACK = loopback


LOOPBACK_SPELLINGS = [
    ("127.0.0.1", "127.0.0.1"),
    ("127.0.0.9", "127.0.0.9"),
    ("::1", "::1"),
    ("::ffff:127.0.0.1", "127.0.0.1"),  # IPv4-mapped
    ("::7f00:1", "127.0.0.1"),  # IPv4-compatible
    ("64:ff9b::7f00:1", "127.0.0.1"),  # NAT64
]


@pytest.mark.parametrize(("ip", "judged"), LOOPBACK_SPELLINGS)
def test_with_private_networks_allowed_loopback_is_refused_saying_which_setting_allows_it(
    ip, judged
):
    with pytest.raises(EgressRefused) as refused:
        check_address(ipaddress.ip_address(ip), allow_private=True, allow_loopback=False)
    assert (refused.value.code, refused.value.message) == ("address_loopback", f"{judged} {SAID}")


@pytest.mark.parametrize(("ip", "judged"), LOOPBACK_SPELLINGS)
@pytest.mark.parametrize("allow_private", [True, False])
def test_with_loopback_allowed_every_spelling_of_it_is_allowed(ip, judged, allow_private):
    check_address(ipaddress.ip_address(ip), allow_private=allow_private, allow_loopback=True)


def test_loopback_allowed_opens_no_private_network():
    with pytest.raises(EgressRefused) as refused:
        check_address(ipaddress.ip_address("10.1.2.3"), allow_private=False, allow_loopback=True)
    assert refused.value.code == "address_private"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:9100/metrics", f"127.0.0.1 {SAID}"),
        ("http://[::1]:6379/", f"::1 {SAID}"),
        ("http://[::ffff:127.0.0.1]:6432/", f"127.0.0.1 {SAID}"),
        ("http://2130706433:5432/", f"127.0.0.1 {SAID}"),
        # RFC 6761: localhost and its subdomains are loopback by definition, refused as typed.
        ("http://localhost:9100/metrics", f"localhost {SAID.replace('is a', 'resolves to a')}"),
        ("http://db.localhost./", f"db.localhost {SAID.replace('is a', 'resolves to a')}"),
    ],
)
def test_a_self_hosted_production_refuses_to_register_a_loopback_url(
    tenant_a, member_of, settings, url, message
):
    self_hosted_production(settings, loopback=False)
    admin = member_of(tenant_a, "admin").user
    with pytest.raises(AdminError) as refused:
        endpoint_create(tenant=tenant_a, url=url, event_types=["draft.rejected"], actor=admin)
    assert (refused.value.code, refused.value.field) == ("address_loopback", "url")
    assert refused.value.message == message
    assert AgentEventEndpoint.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url", ["http://10.1.2.3:8080/hooks", "http://[fd12:3456::1]/hooks", "http://hooks.internal/"]
)
def test_a_self_hosted_production_still_registers_a_private_url(tenant_a, member_of, settings, url):
    self_hosted_production(settings, loopback=False)
    admin = member_of(tenant_a, "admin").user
    endpoint, _ = endpoint_create(
        tenant=tenant_a, url=url, event_types=["draft.rejected"], actor=admin
    )
    assert endpoint.url == url


def test_with_loopback_allowed_a_loopback_url_is_registered():
    for url in ("http://127.0.0.1:8080/in", "http://[::1]:8080/in", "http://localhost:8080/in"):
        assert validate_url(url, allow_private=True, allow_loopback=True, require_https=False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("answer", ["127.0.0.1", "127.0.0.9", "::1", "::ffff:127.0.0.1"])
def test_a_name_that_resolves_to_loopback_is_refused_before_connecting(
    tenant_a, member_of, settings, receiver, resolver, connects, answer
):
    """Registered while the rule allowed it (or a name whose answer changed since): refused at
    delivery, the name given, not the address."""
    port = receiver.server.server_address[1]
    resolver({"hooks.internal.test": answer})
    endpoint = an_event_to(tenant_a, f"http://hooks.internal.test:{port}/in", member_of, settings)
    self_hosted_production(settings, loopback=False)

    deliver_due()

    assert last_error(endpoint)[3] == (
        f"address_loopback: hooks.internal.test {SAID.replace('is a', 'resolves to a')}"
    )
    assert (receiver.connections, connects) == (0, [])


@pytest.mark.django_db(transaction=True)
def test_with_loopback_allowed_a_name_that_resolves_to_it_is_delivered_to(
    tenant_a, member_of, settings, receiver, resolver, connects
):
    port = receiver.server.server_address[1]
    resolver({"hooks.internal.test": "127.0.0.1"})
    an_event_to(tenant_a, f"http://hooks.internal.test:{port}/in", member_of, settings, receiver)
    self_hosted_production(settings, loopback=True)

    deliver_due()

    assert receiver.types == ["draft.rejected"]
    assert connects == [("127.0.0.1", port)]
