"""Outside probe of the SSRF guard (common/egress.py) for a self-hosted deployment, which allows
private networks (``AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS``): the cloud metadata services are
refused always, also where they live outside link-local: AWS's IPv6 instance metadata, DNS and
time services (``fd00:ec2::254``, ``::253``, ``::123``, in the unique-local fc00::/7) and
Alibaba Cloud's metadata (``100.100.100.200``, in the shared 100.64/10), however the address is
spelled. Every connection a test here lets through goes to loopback."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from common.egress import EgressRefused, check_address, validate_url
from intents.events.delivery import deliver_due
from tests.intents.events.test_egress import an_event_to, last_error

METADATA = [
    "fd00:ec2::254",  # AWS instance metadata (IMDS) over IPv6, Nitro instances
    "fd00:ec2::253",  # AWS VPC DNS resolver over IPv6
    "fd00:ec2::123",  # Amazon Time Sync over IPv6
    "fd00:ec2::254%1",  # with a zone index
    "100.100.100.200",  # Alibaba Cloud ECS metadata
    "::ffff:100.100.100.200",  # IPv4-mapped
    "64:ff9b::6464:64c8",  # NAT64 of 100.100.100.200
]


@pytest.fixture
def loopback_only(monkeypatch):
    """Every outgoing TCP connection; one to anything but loopback is refused here, so a guard
    that lets a metadata address through never reaches out of this machine."""
    seen: list[tuple] = []
    real = socket.create_connection

    def spy(address, *args, **kwargs):
        seen.append(address)
        if not ipaddress.ip_address(address[0].split("%")[0]).is_loopback:
            raise ConnectionRefusedError(f"test: no connection to {address[0]}")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", spy)
    return seen


@pytest.mark.parametrize("ip", METADATA)
@pytest.mark.parametrize("allow_private", [True, False])
def test_cloud_metadata_addresses_are_never_delivery_addresses(ip, allow_private):
    with pytest.raises(EgressRefused) as refused:
        check_address(ipaddress.ip_address(ip), allow_private=allow_private, allow_loopback=True)
    assert refused.value.code == "address_forbidden"


@pytest.mark.parametrize(
    "url", ["http://[fd00:ec2::254]/latest/meta-data/", "http://100.100.100.200/latest/meta-data/"]
)
def test_registration_refuses_a_metadata_address_on_a_self_hosted_deployment(url):
    with pytest.raises(EgressRefused) as refused:
        validate_url(url, allow_private=True, allow_loopback=True, require_https=False)
    assert refused.value.code == "address_forbidden"


def test_a_private_unique_local_or_shared_address_stays_allowed_on_a_self_hosted_deployment():
    for ip in ("fd00:ec2::1", "fd12:3456::254", "100.100.100.201", "100.64.0.1"):
        check_address(ipaddress.ip_address(ip), allow_private=True, allow_loopback=False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("answer", ["fd00:ec2::254", "100.100.100.200"])
def test_a_name_answering_a_metadata_address_is_refused_on_a_self_hosted_deployment(
    tenant_a, member_of, settings, loopback_only, monkeypatch, answer
):
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        if host == "hooks.internal.test":
            family = socket.AF_INET6 if ":" in answer else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (answer, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    endpoint = an_event_to(tenant_a, "http://hooks.internal.test/in", member_of, settings)
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = True

    deliver_due()

    assert last_error(endpoint)[3] == (
        "address_forbidden: hooks.internal.test resolves to an address that is not public."
    )
    assert loopback_only == []
