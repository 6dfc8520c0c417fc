"""Outsider probe: a domain that reads as another, written in a draft's text. Mail clients make
a link of "https://b\u0430nk.example/pay" written in a text body (and in an HTML's words), and
with a Cyrillic a it leads to xn--bnk-6cd.example, which reads as bank.example to the reviewer
and to the customer. The HTML link check (intents.html_links) marked such a link's text only in
an <a>; the text, the subject and the HTML's words were not read, and the queue approved them
in bulk. A name in one script ("\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444") is an
ordinary name and is not marked."""

from __future__ import annotations

import pytest
from django.urls import reverse

from intents.hostnames import lookalike_host  # p17tmp
from intents.html_links import html_links
from intents.models import SendIntent
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import (
    agent_drafts_to_ana,
    approved_on_its_page_and_sent,
    page_and_bulk_approval,
)

SUBJECT = "Your invoice from xn--bnk-6cd.example"
TEXT = "Pay your invoice at https://b\u0430nk.example/pay."
HTML = "<p>Pay your invoice at <b>https://b\u0430nk.example/pay</b>.</p>"


@pytest.mark.django_db(transaction=True)
def test_a_lookalike_domain_in_the_text_is_named_and_kept_out_of_a_list(
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
        client, tenant_a, mailbox, admin, "lookalike-hosts", subject=SUBJECT, text=TEXT, html=HTML
    )
    page, queue, from_list = page_and_bulk_approval(client, tenant_a, draft["id"])

    warning = page.split('data-body-warning="lookalike_hosts"')[1].split("</div>")[0]
    in_subject = warning.split('data-lookalike-hosts-in="subject"')[1].split("</ul>")[0]
    in_text = warning.split('data-lookalike-hosts-in="text"')[1].split("</ul>")[0]
    in_html = warning.split('data-lookalike-hosts-in="html"')[1].split("</ul>")[0]
    assert "xn--bnk-6cd.example" in in_subject and "b\u0430nk.example" in in_subject
    assert "xn--bnk-6cd.example" in in_text and "U+0430 CYRILLIC SMALL LETTER A" in in_text
    assert "xn--bnk-6cd.example" in in_html
    assert "data-lookalike-hosts-to-check" in page.split("data-approve-form")[1]
    assert "data-lookalike-hosts" in queue
    assert f"Draft {draft['id']} was not approved" in from_list
    assert "b\u0430nk.example" in from_list
    assert not SendIntent.objects.filter(draft_id=draft["id"]).exists()

    sent = approved_on_its_page_and_sent(client, tenant_a, draft["id"], sandbox, mailbox)
    assert (sent["subject"], sent["text"], sent["html"]) == (SUBJECT, TEXT, HTML)


@pytest.mark.django_db
def test_the_queue_marks_a_row_whose_text_alone_names_one(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    marked = make_draft(mailbox_a, text="Log in at p\u0430ypal.example today")
    punycode = make_draft(mailbox_a, text="Log in at https://xn--pypal-4ve.example/")
    plain = make_draft(
        mailbox_a, text="Our Moscow office: \u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444"
    )
    queue = signed_in(admin_a.user).get(reverse("tenant_home", args=[tenant_a.slug]))
    rows = {
        row.split('href="')[1].split('"')[0]: row
        for row in queue.content.decode().split("<article")[1:]
    }

    assert "data-lookalike-hosts" in rows[reverse("draft", args=[tenant_a.slug, marked.pk])]
    assert "data-lookalike-hosts" in rows[reverse("draft", args=[tenant_a.slug, punycode.pk])]
    assert "data-lookalike-hosts" not in rows[reverse("draft", args=[tenant_a.slug, plain.pk])]


@pytest.mark.parametrize(
    "name",
    [
        "b\u0430nk.example",  # a Cyrillic a among Latin letters
        "xn--bnk-6cd.example",  # the same, in Punycode
        "\u0440\u0430\u0443.example",  # all Cyrillic, each letter drawn as a Latin one: "pay"
        "B\u0391NK.example",  # a Greek capital alpha
        "paypa\u0131.example",  # a Latin dotless i
        "xn--zz.example",  # Punycode that stands for no name
        "xn--a-ecp.example",  # Punycode of "a" and a parenthesised digit one
        "secure.b\u0430nk.example",
    ],
)
def test_names_that_read_as_another_are_lookalikes(name):
    assert lookalike_host(name)


@pytest.mark.parametrize(
    "name",
    [
        "bank.example",
        "\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444",  # all Cyrillic
        "xn--e1afmkfd.xn--p1ai",  # the same, in Punycode
        "\u03c0\u03b1\u03c1\u03ac\u03b4\u03b5\u03b9\u03b3\u03bc\u03b1.\u03b5\u03bb",  # all Greek
        "caf\u00e9.example",  # Latin with a mark
        "xn--fa-hia.de",  # fa\u00df.de
        "\u0440\u0430\u0443.\u0440\u0444",  # Cyrillic that reads as Latin, under a Cyrillic name
        "\u4f8b\u3048.\u30c6\u30b9\u30c8",  # Japanese: Han with Hiragana and Katakana
    ],
)
def test_names_in_one_script_are_not_lookalikes(name):
    assert not lookalike_host(name)


@pytest.mark.parametrize(
    ("html", "misleading"),
    [
        # One definition with the text's: an ordinary name in one script leads where it shows,
        (
            '<a href="https://xn--e1afmkfd.xn--p1ai/">\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444</a>',
            False,
        ),
        # and Punycode in a link's text reads as the name it stands for.
        ('<a href="https://xn--bnk-6cd.example/">xn--bnk-6cd.example</a>', True),
    ],
)
def test_a_links_text_is_read_as_the_text_is(html, misleading):
    assert [link.misleading for link in html_links(html)] == [misleading]
