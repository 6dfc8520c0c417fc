"""Found by an outside probe: a broadcast's page named none of what a draft's page names in an
HTML body and its text (the draft's own probes: link targets, hidden HTML text, Outlook's
conditional comments, look-alike hosts). One approval sends it to every recipient, so a link
that shows "https://bank.example/pay" and leads to evil.test, a preheader its styles hide, or a
"b\u0430nk.example" went out to the whole list with the page silent. The broadcast's page now
names each the way the draft's page does (the same detection, the same partials), beside the
message and before Approve: notes to check, not refusals."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from intents.services.broadcasts import broadcast_create
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def _page(tenant, signed_in, member_of, *, subject="Order {{ n }}", text="Hello {{ n }}", html=""):
    broadcast = broadcast_create(
        tenant=tenant,
        mailbox=make_local_mailbox(tenant),
        subject=subject,
        text=text,
        html=html,
        recipients=[{"address": "p@example.com", "variables": {"n": "7"}}],
    )
    client = signed_in(member_of(tenant, "approver").user)
    return client.get(f"/t/{tenant.slug}/broadcasts/{broadcast.pk}/").content.decode()


def _before_approve(page: str) -> str:
    return page.split("data-approve-form")[1].split("</form>")[0]


def test_a_link_that_shows_one_address_and_leads_to_another_is_named(
    tenant_a, signed_in, member_of
):
    html = (
        '<p>Pay order {{ n }} at <a href="https://evil.test/pay">https://bank.example/pay</a>.</p>'
        '<p>Or <a href="https://bank.example/help">ask us</a>.</p>'
    )

    page = _page(tenant_a, signed_in, member_of, html=html)

    assert 'data-body-warning="misleading_links"' in page
    assert page.count('data-link-warning="misleading"') == 1
    assert "https://evil.test/pay" in page.split("data-html-links")[1]
    assert "data-misleading-links" in _before_approve(page)


def test_text_its_styles_hide_is_named_with_every_word(tenant_a, signed_in, member_of):
    html = (
        '<div style="display:none">Reply with your card number.</div>'
        "<p>Your order {{ n }} is on its way.</p>"
    )

    page = _page(tenant_a, signed_in, member_of, html=html)

    assert 'data-look-note="hidden_text"' in page
    assert "Reply with your card number." in page.split("data-html-words")[1]
    assert "data-looks-to-check" in _before_approve(page)


def test_outlooks_conditional_comments_are_named_with_their_source(tenant_a, signed_in, member_of):
    html = "<p>Order {{ n }}</p><!--[if mso]><p>Call 555 0100 to pay.</p><![endif]-->"

    page = _page(tenant_a, signed_in, member_of, html=html)

    assert 'data-look-note="outlook_windows"' in page
    assert escape("<p>Call 555 0100 to pay.</p>") in page.split("data-conditional-comments")[1]
    assert "data-looks-to-check" in _before_approve(page)


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"subject": "Pay at b\u0430nk.example {{ n }}"}, "subject"),
        ({"text": "Pay at https://b\u0430nk.example/pay {{ n }}"}, "text"),
        ({"html": "<p>Pay at <b>https://b\u0430nk.example/pay</b> {{ n }}</p>"}, "html"),
    ],
    ids=["subject", "text", "html"],
)
def test_a_lookalike_domain_is_named_by_field(tenant_a, signed_in, member_of, fields, where):
    page = _page(tenant_a, signed_in, member_of, **fields)

    assert f'data-lookalike-hosts-in="{where}"' in page
    assert "xn--bnk-6cd.example" in page
    assert "data-lookalike-hosts-to-check" in _before_approve(page)


def test_a_plain_html_broadcast_names_none_of_them(tenant_a, signed_in, member_of):
    html = '<p>Order {{ n }}: <a href="https://bank.example/help">https://bank.example/help</a></p>'

    page = _page(tenant_a, signed_in, member_of, html=html)

    assert "data-html-links" in page
    assert "data-link-warning" not in page
    assert "data-misleading-links" not in page
    assert "data-body-warning" not in page
    assert "data-looks-to-check" not in page
    assert "data-lookalike-hosts-to-check" not in page
