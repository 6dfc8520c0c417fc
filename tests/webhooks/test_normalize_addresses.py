"""``address_of``'s fast path for a bare address gives exactly what ``parseaddr`` gives, in the
form approved recipients are stored in (``common.addresses.normalize_address``: an IDN domain as
its A-label, since the IDN recipients' fix)."""

from __future__ import annotations

from email.utils import parseaddr

from hypothesis import given, settings
from hypothesis import strategies as st

from common.addresses import normalize_address
from tests.sizes import size
from webhooks.normalize import _BARE_ADDRESS, address_of


def by_parseaddr(value: str) -> str:
    written = parseaddr(value)[1].strip()
    try:
        address = normalize_address(written)
    except ValueError:
        address = written.lower()
    return address if "@" in address else ""


ATOM = st.text(alphabet="aZ09!#$%&'*+/=?^_`{|}~-", min_size=1, max_size=8)
LABEL = st.text(alphabet="aZ09-", min_size=1, max_size=8)
BARE = st.builds(
    lambda local, domain: ".".join(local) + "@" + ".".join(domain),
    st.lists(ATOM, min_size=1, max_size=3),
    st.lists(LABEL, min_size=1, max_size=3),
)


@settings(max_examples=size(500, 20000), deadline=None)
@given(BARE)
def test_every_bare_address_is_what_parseaddr_makes_of_it(value):
    assert _BARE_ADDRESS.fullmatch(value)
    assert address_of(value) == by_parseaddr(value) == value.lower()


@settings(max_examples=size(1000, 20000), deadline=None)
@given(st.text(alphabet=st.sampled_from('aZ0.@-+"<> ,;:()[]\\\t\n\x00é'), max_size=40))
def test_anything_else_still_goes_through_parseaddr(value):
    assert address_of(value) == by_parseaddr(value)


def test_an_idn_domain_found_by_parseaddr_is_in_its_stored_form():
    """The example Hypothesis found on CI (the oracle still lower-cased only)."""
    assert address_of("0@0.\u00e9") == by_parseaddr("0@0.\u00e9") == "0@0.xn--9ca"


def test_the_forms_agentmail_sends():
    assert address_of("Jane.Doe@Customer.TEST") == "jane.doe@customer.test"
    assert address_of("Jane <jane@customer.test>") == "jane@customer.test"
    assert address_of({"address": "ops@customer.test"}) == "ops@customer.test"
    assert address_of("not an address") == ""
