"""The organisation's own domains (the policies page) in the form recipients' addresses are
compared in: a draft's recipients are stored with their domain as its lower-case A-label
(common.addresses.normalize_address), so a domain kept in any other form never matched them."""

import pytest
from django.urls import reverse

from intents.policy import normalize_address
from review.queries import is_external
from tenants.policies import own_domains_parse
from tenants.services import AdminError
from tests.pages import based_on

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("Bücher.test", "xn--bcher-kva.test"),
        ("xn--bcher-kva.test", "xn--bcher-kva.test"),
        ("\uff41cme.test", "acme.test"),
        ("Acme.test", "acme.test"),
    ],
)
def test_an_own_domain_is_kept_as_recipients_addresses_hold_it(typed, stored):
    """Found by this probe: an organisation at bücher.test could not name its domain (refused as
    'not a domain name'), and a colleague there was called external on every draft."""
    domains = own_domains_parse(typed)

    assert domains == [stored]
    assert not is_external(normalize_address("ana@bücher.test"), own_domains_parse("bücher.test"))


def test_an_xn_label_that_is_no_idna_is_refused():
    """It was kept, and matched no recipient's address ever."""
    with pytest.raises(AdminError) as refused:
        own_domains_parse("xn--zz.test")

    assert refused.value.code == "invalid_domain"


def test_one_domain_typed_two_ways_is_kept_once():
    assert own_domains_parse("bücher.test, xn--bcher-kva.test") == ["xn--bcher-kva.test"]


def test_the_policies_page_saves_an_idn_domain(tenant_a, admin_a, signed_in):
    client = signed_in(admin_a.user)
    url = reverse("admin_own_domains", args=[tenant_a.slug])
    base = based_on(client, reverse("admin_policies", args=[tenant_a.slug]), "domains_form")

    saved = client.post(url, {"own_domains": "bücher.test", "based_on": base})
    tenant_a.refresh_from_db()

    assert saved.status_code == 302
    assert tenant_a.own_domains == ["xn--bcher-kva.test"]
