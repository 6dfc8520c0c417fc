"""Outsider probe: an agent's HTML whose link shows one address and leads to another. The frame
shows the link's text ("https://bank.example/pay"); where it leads ("https://evil.test/pay") is
in the href, which the reviewer saw only by hovering each link, and the page named no link. A
``javascript:`` or ``data:`` link, or a relative one (which a ``<base href>`` the frame ignores
sends elsewhere), was not named either, and the queue approved it all in bulk."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from intents.html_links import html_links
from intents.models import SendIntent
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import (
    agent_drafts_to_ana,
    approved_on_its_page_and_sent,
    page_and_bulk_approval,
)

HTML = (
    "<p>Pay your invoice at "
    '<a href="https://evil.test/pay">https://bank.example/pay</a>.</p>'
    '<p>Or <a href="https://bank.example/help">ask us</a>.</p>'
)


@pytest.mark.django_db(transaction=True)
def test_a_link_that_shows_one_address_and_leads_to_another_is_named_and_kept_out_of_a_list(
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    fast_send,  # noqa: F811
    client,
):
    mailbox = mailbox_factory(tenant_a)
    admin = member_of(tenant_a, "admin").user
    draft = agent_drafts_to_ana(
        client,
        tenant_a,
        mailbox,
        admin,
        "link-targets",
        subject="Your invoice",
        text="Pay your invoice at https://bank.example/pay.",
        html=HTML,
    )
    page, queue, from_list = page_and_bulk_approval(client, tenant_a, draft["id"])

    links = page.split("data-html-links")[1].split("</ul>")[0]
    assert "https://evil.test/pay" in links and "https://bank.example/help" in links
    misleading = links.split('data-link-warning="misleading"')
    assert len(misleading) == 2 and "https://evil.test/pay" in misleading[0].rsplit("<li", 1)[1]
    assert "data-misleading-links" in page.split("data-approve-form")[1]
    assert "data-misleading-links" in queue
    assert f"Draft {draft['id']} was not approved" in from_list
    assert escape("https://evil.test/pay") in from_list
    assert not SendIntent.objects.filter(draft_id=draft["id"]).exists()

    sent = approved_on_its_page_and_sent(client, tenant_a, draft["id"], sandbox, mailbox)
    assert sent["html"] == HTML


@pytest.mark.parametrize(
    ("html", "target"),
    [
        ('<a href="https://evil.test/">https://bank.example/</a>', "https://evil.test/"),
        ("<a href='https://evil.test'>www.bank.example</a>", "https://evil.test"),
        (
            '<a href="https://bank.example.evil.test/">bank.example</a>',
            "https://bank.example.evil.test/",
        ),
        ("<a HREF=https://evil.test>Log in at <b>bank.example</b></a>", "https://evil.test"),
        ('<a href="&#104;ttps://evil.test/">bank.example</a>', "https://evil.test/"),
        ('<a href="mailto:evil@evil.test">help@bank.example</a>', "mailto:evil@evil.test"),
        ('<a href="javascript:alert(1)">Open</a>', "javascript:alert(1)"),
        ('<a href=" JavaScript:alert(1)">Open</a>', "JavaScript:alert(1)"),
        ('<a href="data:text/html,hi">Open</a>', "data:text/html,hi"),
        ('<a href="/pay">bank.example/pay</a>', "/pay"),
        ('<a href="https://evil.test/">bank\u200b.example</a>', "https://evil.test/"),
        ('<a href="https://evil.test/">bank\uff0eexample</a>', "https://evil.test/"),
        ('<a href="https://xn--bnk-6cd.example/">bank.example</a>', "https://xn--bnk-6cd.example/"),
        (
            '<a href="https://xn--bnk-6cd.example/">b\u0430nk.example</a>',
            "https://xn--bnk-6cd.example/",
        ),
        ('<base href="https://evil.test/"><a href="pay">Pay</a>', "pay"),
        ('<area href="https://evil.test/" alt="bank.example">', "https://evil.test/"),
        # "</" and a letter not ASCII: a comment to its first ">", the rest is the link's text.
        ('<a href="https://evil.test/">Pay</\u00e9 x="> bank.example"></a>', "https://evil.test/"),
    ],
)
def test_links_that_lead_elsewhere_than_they_show_are_marked(html, target):
    assert [link.target for link in html_links(html) if link.misleading] == [target]


@pytest.mark.parametrize(
    "html",
    [
        '<a href="https://bank.example/pay">https://bank.example/pay</a>',
        '<a href="https://www.bank.example/pay">bank.example</a>',
        '<a href="https://bank.example/">www.bank.example</a>',
        '<a href="https://BANK.example/">Bank.Example</a>',
        '<a href="https://bank.example/help">Ask us</a>',
        '<a href="mailto:help@bank.example">help@bank.example</a>',
        '<a href="tel:+15550100">+1 555 0100</a>',
        '<a href="#top">Back to top</a>',
        "<a name=top></a><p>No link, bank.example</p>",
    ],
)
def test_links_that_lead_where_they_show_are_not_marked(html):
    assert not any(link.misleading for link in html_links(html))
