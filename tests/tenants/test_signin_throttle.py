"""A client's budget of failed sign-ins across addresses (tenants.signin_throttle): found by an
outside probe, a stranger who typed a new address on every try was never locked by axes (it locks
an address and client together), and every try cost the server a password hash."""

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.hashers import MD5PasswordHasher
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
