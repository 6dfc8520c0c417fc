"""A client's budget of failed sign-ins across addresses (tenants.signin_throttle): found by an
outside probe, a stranger who typed a new address on every try was never locked by axes (it locks
an address and client together), and every try cost the server a password hash."""

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.hashers import MD5PasswordHasher
from django.test import Client
from django.urls import reverse
from django.utils import timezone

pytestmark = pytest.mark.django_db

STRANGER = "203.0.113.9"


class CountingHasher(MD5PasswordHasher):
    """The tests' hasher, counting the hashes it computes (argon2's in production)."""

    computed = 0

    def encode(self, password, salt):
        CountingHasher.computed += 1
        return super().encode(password, salt)


@pytest.fixture
def hashes(settings):
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    settings.SIGNIN_FAILED_ACCOUNTS_PER_MINUTE = 5
    CountingHasher.computed = 0
    return CountingHasher


def sign_in(client, email, password, address=STRANGER):
    return client.post(
        reverse("login"), {"username": email, "password": password}, REMOTE_ADDR=address
    )


def test_a_client_trying_address_after_address_is_refused_before_any_hash(
    client, hashes, member_of, tenant_a, password
):
    person = member_of(tenant_a).user
    start = timezone.now()
    before = hashes.computed

    with time_machine.travel(start, tick=False):
        tries = [
            sign_in(client, f"guess{n}@example.test", "Winter2026!").status_code for n in range(12)
        ]
        spent = hashes.computed - before
        own_password = sign_in(client, person.email, password).status_code
        elsewhere = sign_in(client, person.email, password, address="198.51.100.7").status_code
    with time_machine.travel(start + timedelta(minutes=1, seconds=1), tick=False):
        a_minute_later = sign_in(client, person.email, password).status_code

    assert tries == [200] * 5 + [429] * 7
    assert spent == 5
    assert own_password == 429
    assert elsewhere == 302
    assert a_minute_later == 302


def test_an_ipv6_client_is_counted_by_its_64_whatever_address_of_it_it_uses(
    client, hashes, member_of, tenant_a, password
):
    """An IPv6 client picks any of its /64's 2^64 addresses: one failure from each spent no
    budget when the count went by exact address."""
    person = member_of(tenant_a).user
    with time_machine.travel(timezone.now(), tick=False):
        tries = [
            sign_in(
                client, f"guess{n}@example.test", "Winter2026!", address=f"2001:db8:1:2::{n:x}"
            ).status_code
            for n in range(1, 8)
        ]
        same_64 = sign_in(client, person.email, password, address="2001:db8:1:2:ffff::1")
        next_64 = sign_in(client, person.email, password, address="2001:db8:1:3::1")

    assert tries == [200] * 5 + [429] * 2
    assert same_64.status_code == 429
    assert next_64.status_code == 302


def test_an_ipv4_client_is_counted_by_its_own_address_in_either_form(
    client, hashes, member_of, tenant_a, password
):
    """IPv4 stays exact (a /24 is often many people behind one provider); a dual-stack socket
    reports the same client as ``::ffff:a.b.c.d``, which is that client too, not the ``::/64``
    every IPv4 client's mapped form shares."""
    person = member_of(tenant_a).user
    with time_machine.travel(timezone.now(), tick=False):
        for n in range(5):
            address = STRANGER if n % 2 else f"::ffff:{STRANGER}"
            sign_in(client, f"guess{n}@example.test", "Winter2026!", address=address)
        mapped = sign_in(client, person.email, password, address=f"::ffff:{STRANGER}")
        neighbour = sign_in(client, person.email, password, address="203.0.113.10")

    assert mapped.status_code == 429
    assert neighbour.status_code == 302


def test_clients_the_server_gives_no_address_share_one_budget(
    client, hashes, member_of, tenant_a, password
):
    """gunicorn on a unix socket with no trusted proxy gives every client an empty REMOTE_ADDR;
    axes keeps their failures without an address. No address gave no block to count in, so such
    a client tried a new account on every request, a hash each, without end. They now share one
    budget (tenants.signin_throttle): spent, every one of them waits out the minute, and a client
    with an address keeps its own."""
    person = member_of(tenant_a).user
    before = hashes.computed
    with time_machine.travel(timezone.now(), tick=False):
        tries = [
            sign_in(client, f"guess{n}@example.test", "Winter2026!", address="") for n in range(8)
        ]
        spent = hashes.computed - before
        another_without_address = sign_in(Client(), person.email, password, address="")
        with_an_address = sign_in(Client(), person.email, password)

    assert [r.status_code for r in tries] == [200] * 5 + [429] * 3
    assert "tenants/locked_out.html" in [t.name for t in tries[-1].templates]
    # Not the account's cool-off: the page says it is the network's minute.
    assert "from your network in the last minute" in tries[-1].content.decode()
    assert "Sign-in for this account from your address" not in tries[-1].content.decode()
    assert spent == 5
    assert another_without_address.status_code == 429
    assert with_an_address.status_code == 302


def test_an_ipv6_client_gets_one_accounts_lock_out_whatever_address_of_its_64_it_uses(
    client, member_of, tenant_a, password, settings
):
    """axes locks an account for a client after AXES_FAILURE_LIMIT wrong passwords. It keyed
    the client by its exact address, so an IPv6 client moved to another address of its /64 and
    had a fresh AXES_FAILURE_LIMIT guesses at the same account, address after address: with the
    budget's 30 accounts a minute, 150 guesses a minute at one person, where an IPv4 client has
    5 per cool-off. The /64 is one client for the lock-out, as for the budget."""
    person = member_of(tenant_a).user
    with time_machine.travel(timezone.now(), tick=False):
        for n in range(settings.AXES_FAILURE_LIMIT):
            sign_in(client, person.email, f"Guess{n}-2026!", address="2001:db8:1:2::1")
        other_address = sign_in(client, person.email, password, address="2001:db8:1:2::abcd")
        next_64 = sign_in(client, person.email, password, address="2001:db8:1:3::1")

    assert other_address.status_code == 429
    assert "tenants/locked_out.html" in [t.name for t in other_address.templates]
    assert next_64.status_code == 302
