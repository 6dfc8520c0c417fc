"""Found by an outside probe: a broadcast's page named a look-alike domain and a link leading
elsewhere than it shows only in the sample recipient's message (448536b, 1268b90). Another row
of the upload with "b\u0430nk.example" (a Cyrillic a) in a value, or whose value is the address
a link with a fixed text leads to, went out unnamed to its recipient. The page counts them over
every row, names the first rows, and says so before Approve, as it does for the characters
nobody sees in values (91c450d): notes, not refusals."""

from __future__ import annotations

import pytest

from intents.services.broadcasts import broadcast_create
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def _page(tenant, signed_in, member_of, *, html, recipients, text="Hello {{ n }}"):
    broadcast = broadcast_create(
        tenant=tenant,
        mailbox=make_local_mailbox(tenant),
        subject="Order {{ n }}",
        text=text,
        html=html,
        recipients=recipients,
    )
    client = signed_in(member_of(tenant, "approver").user)
    return client.get(f"/t/{tenant.slug}/broadcasts/{broadcast.pk}/").content.decode()


def _before_approve(page: str) -> str:
    return page.split("data-approve-form")[1].split("</form>")[0]


def test_other_recipients_values_with_a_lookalike_domain_are_counted_and_named(
    tenant_a, signed_in, member_of
):
    page = _page(
        tenant_a,
        signed_in,
        member_of,
        html="",
        text="Hello {{ n }}, pay at {{ site }}",
        recipients=[
            {"address": "a@example.com", "variables": {"n": "Ana", "site": "bank.example"}},
            {"address": "b@example.com", "variables": {"n": "Bo", "site": "b\u0430nk.example"}},
            {"address": "c@example.com", "variables": {"n": "M\u00fcller", "site": "x.example"}},
            {
                "address": "d@example.com",
                "variables": {"n": "Di", "site": "see https://xn--bnk-6cd.example/pay"},
            },
        ],
    )

    section = page.split("data-values-lookalike-hosts")[1].split("</section>")[0]
    assert 'class="count">2<' in section
    assert 'data-value-lookalike-host="2"' in section and "xn--bnk-6cd.example" in section
    assert 'data-value-lookalike-host="4"' in section
    assert 'data-value-lookalike-host="1"' not in section
    assert 'data-value-lookalike-host="3"' not in section
    assert "data-values-lookalike-hosts-to-check" in _before_approve(page)


def test_a_link_leading_elsewhere_for_other_recipients_only_is_counted_and_named(
    tenant_a, signed_in, member_of
):
    page = _page(
        tenant_a,
        signed_in,
        member_of,
        html='<p>{{ n }}: <a href="{{ url }}">https://bank.example/pay</a></p>',
        recipients=[
            {"address": "a@example.com", "variables": {"n": "1", "url": "https://bank.example/p"}},
            {"address": "b@example.com", "variables": {"n": "2", "url": "https://evil.test/pay"}},
            {
                "address": "c@example.com",
                "variables": {"n": "3", "url": "https://www.bank.example/x"},
            },
        ],
    )

    assert 'data-body-warning="misleading_links"' not in page
    section = page.split("data-values-misleading-links")[1].split("</section>")[0]
    assert 'class="count">1<' in section
    assert 'data-value-misleading-link="2"' in section and "https://evil.test/pay" in section
    assert "data-values-misleading-links-to-check" in _before_approve(page)


def test_plain_values_name_no_row(tenant_a, signed_in, member_of):
    page = _page(
        tenant_a,
        signed_in,
        member_of,
        html='<p>{{ n }}: <a href="{{ url }}">Pay</a></p>',
        recipients=[
            {
                "address": "a@example.com",
                "variables": {"n": "M\u00fcller", "url": "https://a.example/"},
            },
            {
                "address": "b@example.com",
                "variables": {"n": "caf\u00e9.example", "url": "https://b.example/"},
            },
        ],
    )

    assert "data-values-lookalike-hosts" not in page
    assert "data-values-misleading-links" not in page


@pytest.mark.parametrize("name", ["u__rl", "__url", "url__0"])
def test_a_link_leading_elsewhere_is_counted_whatever_its_placeholder_is_named(
    tenant_a, signed_in, member_of, name
):
    """Found by an outside probe: the rows' values were read by a JSON path built from the
    placeholder's name, which Django splits at "__": a link's value named {{ u__rl }} was read
    as variables -> u -> rl, empty in every row. Every row was named as leading nowhere, the
    sample's honest link too, and the site the other rows' links lead to was named in none."""
    page = _page(
        tenant_a,
        signed_in,
        member_of,
        html=f'<p>{{{{ n }}}}: <a href="{{{{ {name} }}}}">https://bank.example/pay</a></p>',
        recipients=[
            {"address": "a@example.com", "variables": {"n": "1", name: "https://bank.example/p"}},
            {"address": "b@example.com", "variables": {"n": "2", name: "https://evil.test/pay"}},
        ],
    )

    section = page.split("data-values-misleading-links")[1].split("</section>")[0]
    assert 'class="count">1<' in section
    assert 'data-value-misleading-link="2"' in section and "https://evil.test/pay" in section
    assert "data-values-misleading-links-to-check" in _before_approve(page)
