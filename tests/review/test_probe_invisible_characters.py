"""Outsider probe: characters nobody sees, in what is approved. A right-to-left override
(U+202E) in the subject shows "$\u202e001" as "$100" on the page and in a client that honours it,
and as "$001" where a client, a notification or a text-only reader drops or ignores it; a
zero-width space (U+200B) splits "555\u200b0100" so that nothing a reader sees says so, and
breaks a search or a copy of the number; tag characters (U+E0041...) carry text no screen shows
to whatever model reads the reply next. The page showed the text as drawn and named none of
them (it names an address's letters outside ASCII), and the queue approved it in bulk."""

from __future__ import annotations

import pytest
from django.urls import reverse

from common.text import invisible_characters
from intents.models import SendIntent
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import (
    agent_drafts_to_ana,
    approved_on_its_page_and_sent,
    page_and_bulk_approval,
)

SUBJECT = "Your refund of $\u202e001"
TEXT = "Call us at 555\u200b0100."
HTML = "<p>Call us at 555 0100.</p><p>&#xE0041;&#xE0042;</p>"


@pytest.mark.django_db(transaction=True)
def test_characters_nobody_sees_are_named_by_field_and_kept_out_of_a_list(
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
        client, tenant_a, mailbox, admin, "invisible", subject=SUBJECT, text=TEXT, html=HTML
    )
    page, queue, from_list = page_and_bulk_approval(client, tenant_a, draft["id"])

    warning = page.split('data-body-warning="invisible_characters"')[1].split("</div>")[0]
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in warning.split('data-invisible-in="subject"')[1]
    assert "U+200B ZERO WIDTH SPACE" in warning.split('data-invisible-in="text"')[1]
    assert "U+E0041 TAG LATIN CAPITAL LETTER A" in warning.split('data-invisible-in="html"')[1]
    assert "Your refund of $[U+202E]001" in warning
    assert "data-invisible-to-check" in page.split("data-approve-form")[1]
    assert "data-invisible-characters" in queue
    assert f"Draft {draft['id']} was not approved" in from_list
    assert "U+202E" in from_list
    assert not SendIntent.objects.filter(draft_id=draft["id"]).exists()

    sent = approved_on_its_page_and_sent(client, tenant_a, draft["id"], sandbox, mailbox)
    assert (sent["subject"], sent["text"], sent["html"]) == (SUBJECT, TEXT, HTML)


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("a\u202eb", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("a\u2066b\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE, U+2069 POP DIRECTIONAL ISOLATE"),
        ("a\u200bb\u200b", "U+200B ZERO WIDTH SPACE"),
        ("a\u2060b", "U+2060 WORD JOINER"),
        ("a\ufeffb", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
        ("\U000e0041", "U+E0041 TAG LATIN CAPITAL LETTER A"),
        ("a\u3164b", "U+3164 HANGUL FILLER"),
    ],
)
def test_characters_nobody_sees_are_named(value, named):
    assert invisible_characters(value) == named


@pytest.mark.parametrize(
    "value",
    [
        "Plain text, caf\u00e9, \u00a0non-breaking space, \u00adsoft hyphen",
        "Family \U0001f468\u200d\U0001f469\u200d\U0001f467 and \u05e9\u05dc\u05d5\u05dd",
        "\u0645\u0631\u062d\u0628\u0627 \u200f(RLM) \u200c",
    ],
)
def test_characters_people_write_are_not_named(value):
    assert invisible_characters(value) == ""


@pytest.mark.django_db
def test_the_queue_marks_a_row_whose_text_alone_holds_them(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The text is not read for the queue: PostgreSQL's regular expression finds them."""
    marked = make_draft(mailbox_a, text="Pay \U000e0041 now")
    plain = make_draft(mailbox_a, text="Pay now")
    queue = signed_in(admin_a.user).get(reverse("tenant_home", args=[tenant_a.slug]))
    rows = {
        row.split('href="')[1].split('"')[0]: row
        for row in queue.content.decode().split("<article")[1:]
    }

    assert "data-invisible-characters" in rows[reverse("draft", args=[tenant_a.slug, marked.pk])]
    assert "data-invisible-characters" not in rows[reverse("draft", args=[tenant_a.slug, plain.pk])]
