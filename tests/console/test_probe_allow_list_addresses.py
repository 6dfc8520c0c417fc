"""An outside probe of a mailbox's allow-lists as an admin types them (console's mailbox page).

Found: an entry refused for a character no one sees (a zero-width space or joiner, a
right-to-left override) was named as it was written, "Not an email address: ana@example.com",
which reads as a valid address; the refusal now names the character too. Held: the same address
or domain written in Unicode and in punycode, or in two cases, is one entry."""

import pytest
from django.urls import reverse

from tests.pages import based_on

pytestmark = pytest.mark.django_db


def _save(client, tenant, mailbox, **fields):
    page = reverse("mailbox_detail", args=[tenant.slug, mailbox.pk])
    return client.post(
        reverse("mailbox_policy", args=[tenant.slug, mailbox.pk]),
        {"policy_mode": "restricted", "based_on": based_on(client, page), **fields},
    )


@pytest.fixture
def admin_client(tenant_a, member_of, signed_in):
    return signed_in(member_of(tenant_a, "admin").user)


INVISIBLE = {
    "zero-width space in an address": (
        "allowed_addresses",
        "an\u200ba@example.com",
        "U+200B ZERO WIDTH SPACE",
    ),
    "right-to-left override in an address": (
        "allowed_addresses",
        "\u202eana@example.com",
        "U+202E RIGHT-TO-LEFT OVERRIDE",
    ),
    "zero-width joiner in a domain": (
        "allowed_domains",
        "exa\u200dmple.com",
        "U+200D ZERO WIDTH JOINER",
    ),
}


@pytest.mark.parametrize(("field", "typed", "named"), INVISIBLE.values(), ids=INVISIBLE.keys())
def test_an_entry_refused_for_an_invisible_character_names_it(
    tenant_a, admin_client, mailbox_factory, field, typed, named
):
    mailbox = mailbox_factory(tenant_a)

    response = _save(admin_client, tenant_a, mailbox, **{field: f"ok.example.com\n{typed}"})

    mailbox.refresh_from_db()
    assert response.status_code == 400
    assert named in response.content.decode()
    assert (mailbox.allowed_domains, mailbox.allowed_addresses) == ([], [])


def test_one_address_or_domain_written_two_ways_is_one_entry(
    tenant_a, admin_client, mailbox_factory
):
    mailbox = mailbox_factory(tenant_a)

    response = _save(
        admin_client,
        tenant_a,
        mailbox,
        allowed_domains="B\u00fccher.de\nxn--bcher-kva.de",
        allowed_addresses="Ana@b\u00fccher.de, ana@XN--BCHER-KVA.DE",
    )

    mailbox.refresh_from_db()
    assert response.status_code == 302, response.content.decode()[:2000]
    assert (mailbox.allowed_domains, mailbox.allowed_addresses) == (
        ["xn--bcher-kva.de"],
        ["ana@xn--bcher-kva.de"],
    )
