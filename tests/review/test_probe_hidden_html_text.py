"""Outsider probe: an agent's HTML whose own styles hide text from the draft page's frame, or add
text to it. The frame applies the email's CSS as a browser does, so a ``display:none`` preheader,
a ``hidden`` paragraph, a ``<template>``, a closed ``<details>`` showed the reviewer nothing;
yet the recipient gets them: an inbox list shows the hidden preheader as the message's preview
line, Outlook for Windows ignores ``display:none`` without ``mso-hide``, a client that drops
``<style>`` or the ``hidden`` attribute shows them in the body, a screen reader reads them. And a
``::after { content: ... }`` wrote the reviewer words that a client without pseudo-elements
(Gmail, Outlook) never shows. The page named none of it, and the queue approved it in bulk."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from intents.html_styles import css_added_text, html_words, reader_looks
from intents.models import SendIntent
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import (
    agent_drafts_to_ana,
    approved_on_its_page_and_sent,
    page_and_bulk_approval,
)

PREHEADER = "Your account is locked: call +1 555 0100 now"
HTML = (
    "<style>.iban::after{content:'XX00 1234'}</style>"
    f'<div style="display:none;max-height:0;overflow:hidden">{PREHEADER}</div>'
    "<p>Your refund is on its way.</p>"
    "<p hidden>Reply with your card number.</p>"
    "<p>Our IBAN: <span class=iban></span></p>"
)


@pytest.mark.django_db(transaction=True)
def test_text_hidden_or_added_by_the_htmls_styles_is_named_shown_and_kept_out_of_a_list(
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
        "hidden-text",
        subject="Your refund",
        text="Your refund is on its way.",
        html=HTML,
    )
    page, queue, from_list = page_and_bulk_approval(client, tenant_a, draft["id"])

    assert 'data-look-note="hidden_text"' in page
    shown = page.split("data-html-words")[1].split("</pre>")[0]
    assert escape(PREHEADER) in shown
    assert "Reply with your card number." in shown
    added = page.split("data-css-added")[1].split("</pre>")[0]
    assert escape("content:'XX00 1234'") in added
    assert "data-reader-looks" in queue
    assert f"Draft {draft['id']} was not approved" in from_list
    assert not SendIntent.objects.filter(draft_id=draft["id"]).exists()

    sent = approved_on_its_page_and_sent(client, tenant_a, draft["id"], sandbox, mailbox)
    assert sent["html"] == HTML


@pytest.mark.parametrize(
    "html",
    [
        f'<div style="display:none">{PREHEADER}</div><p>Hi</p>',
        f"<div style='DISPLAY : NONE !important'>{PREHEADER}</div>",
        f'<div style="display:&#110;one">{PREHEADER}</div>',
        f"<style>.p{{display:none}}</style><div class=p>{PREHEADER}</div>",
        f"<div style=visibility:hidden>{PREHEADER}</div>",
        f'<div style="opacity:0">{PREHEADER}</div>',
        f'<div style="font-size:0">{PREHEADER}</div>',
        f'<div style="font-size:1px;line-height:1px">{PREHEADER}</div>',
        f'<div style="max-height:0;overflow:hidden">{PREHEADER}</div>',
        f'<div style="mso-hide:all">{PREHEADER}</div>',
        f'<div style="position:absolute;left:-9999px">{PREHEADER}</div>',
        f'<div style="text-indent:-9999px">{PREHEADER}</div>',
        f'<div style="clip:rect(0 0 0 0)">{PREHEADER}</div>',
        f'<div style="transform:scale(0)">{PREHEADER}</div>',
        f'<div style="color:transparent">{PREHEADER}</div>',
        f"<p hidden>{PREHEADER}</p>",
        f"<p HIDDEN='hidden'>{PREHEADER}</p>",
        f"<template><p>{PREHEADER}</p></template>",
        f"<details><summary>More</summary><p>{PREHEADER}</p></details>",
        "<style>p::before{content:'Pay to XX00 1234'}</style><p></p>",
    ],
)
def test_styles_and_markup_that_hide_or_add_text_are_named(html):
    assert "hidden_text" in reader_looks(html)


@pytest.mark.parametrize(
    "html",
    [
        "<p style='color:#333;font-size:14px;display:block'>Hi</p>",
        "<p>The content: hidden fees are none; display: none of them.</p>",
        "<table style='width:100%;height:40px'><tr><td style='padding:0'>Hi</td></tr></table>",
    ],
)
def test_styles_that_hide_nothing_are_not_named(html):
    assert "hidden_text" not in reader_looks(html)


def test_the_words_of_the_html_are_every_text_it_holds_and_the_text_its_css_adds():
    words = html_words(
        "<html><head><title>T</title><style>a::after{content:'x'}</style></head><body>"
        "<div style=display:none>Hidden one</div><p>Seen <b>bold</b></p>"
        "<template><p>In a template</p></template><!-- a comment --><script>s()</script>"
    )

    assert words.splitlines() == [
        "Hidden one",
        "Seen bold",
        "In a template",
    ]


@pytest.mark.parametrize(
    ("html", "shown"),
    [
        ("<style>.iban::after{content:'IBAN XX00 1234'}</style>", "content:'IBAN XX00 1234'"),
        ("<p STYLE=\"CONTENT: 'Ref AbC'\">x</p>", "CONTENT: 'Ref AbC'"),
        ("<STYLE>b::before{Content:'Pay to IE29 AIBK'}</STYLE>", "Content:'Pay to IE29 AIBK'"),
    ],
)
def test_the_text_css_writes_is_shown_in_its_own_letters(html, shown):
    """A reviewer checks an IBAN or a reference letter by letter: the note showed what CSS
    writes in lower case ("content:'iban xx00 1234'"), since the body was read lower-cased to
    find it. It is found in any case and shown as written."""
    assert css_added_text(html) == [shown]


# The page names hidden text and shows "every word it holds" for the reviewer to find it: words
# in an attribute a screen reader reads (a hidden image's alt, a tooltip, a label, a field's
# value), in an <iframe>'s srcdoc (a document of its own) and in an <svg>'s <title> warned,
# and were not among the words shown, so the reviewer was told of words they could not find.
@pytest.mark.parametrize(
    ("html", "line"),
    [
        (
            "<p>Hi</p><img alt='Pay to IBAN XX00' src=cid:x style='display:none'>",
            "Pay to IBAN XX00",
        ),
        (
            "<p>Hi</p><span title='Pay to IBAN XX00' style='display:none'></span>",
            "Pay to IBAN XX00",
        ),
        ("<p>Hi</p><input value='Pay to IBAN XX00' style='display:none'>", "Pay to IBAN XX00"),
        (
            "<p>Hi</p><div aria-label='Pay to IBAN XX00' style='font-size:0'></div>",
            "Pay to IBAN XX00",
        ),
        (
            "<p>Hi</p><iframe srcdoc='&lt;p&gt;Pay to &lt;b&gt;IBAN&lt;/b&gt; XX00&lt;/p&gt;'></iframe>",
            "Pay to IBAN XX00",
        ),
        ("<p>Hi</p><svg><title>Pay to IBAN XX00</title></svg>", "Pay to IBAN XX00"),
    ],
)
def test_every_word_that_warns_is_among_the_words_shown(html, line):
    assert "hidden_text" in reader_looks(html)
    assert any(line in shown for shown in html_words(html).splitlines())


def test_a_documents_title_and_an_attribute_without_words_are_not_shown():
    words = html_words(
        "<title>Order 1</title><p>Hi</p><img alt='' src=cid:x><span title='  '></span>"
    )
    assert words.splitlines() == ["Hi"]
