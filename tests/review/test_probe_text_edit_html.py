"""Outsider probe of the edit path: a draft with a text and an HTML body, whose text a person
(or the agent) then changes and whose HTML stays as it was. Most mail clients show the customer
the HTML part, not the text: the draft page's "What changed" showed the corrected text, and the
list approved a message whose HTML still carried the words that were corrected."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from intents import services
from intents.models import DraftVersion, SendIntent
from intents.selectors.drafts import html_unchanged_while_text_changed
from review.forms import EditForm
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import (
    agent_drafts_to_ana,
    approved_on_its_page_and_sent,
    page_and_bulk_approval,
)

pytestmark = pytest.mark.django_db

OLD_HTML = "<p>Please pay to IBAN XX00 1111.</p>"


@pytest.mark.django_db(transaction=True)
def test_a_text_corrected_under_an_html_left_as_it_was_is_said_and_kept_out_of_a_list(
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
        "iban",
        subject="Your invoice",
        text="Please pay to IBAN XX00 1111.",
        html=OLD_HTML,
    )
    first = DraftVersion.objects.get(draft_id=draft["id"])
    saved = client.post(
        reverse("draft_edit", args=[tenant_a.slug, draft["id"]]),
        {**EditForm.of_version(first).initial, "text": "Please pay to IBAN XX00 2222."},
    )
    page, _queue, from_list = page_and_bulk_approval(client, tenant_a, draft["id"])

    assert saved.status_code == 302
    assert 'data-body-warning="html_unchanged"' in page
    assert "data-html-unchanged-to-check" in page
    assert "since version 1" in page
    assert f"Draft {draft['id']} was not approved" in from_list
    assert "most mail clients show the HTML" in from_list
    assert not SendIntent.objects.filter(draft_id=draft["id"]).exists()

    sent = approved_on_its_page_and_sent(client, tenant_a, draft["id"], sandbox, mailbox)
    assert (sent["text"], sent["html"]) == ("Please pay to IBAN XX00 2222.", OLD_HTML)


@pytest.mark.parametrize(
    ("versions", "since"),
    [
        ([("a", "<p>a</p>"), ("b", "<p>a</p>")], 1),
        ([("a", "<p>a</p>"), ("b", "<p>a</p>"), ("b", "<p>a</p>")], 1),
        ([("a", "<p>a</p>"), ("b", "<p>b</p>"), ("c", "<p>b</p>")], 2),
        ([("a", "<p>a</p>"), ("c", "<p>c</p>")], None),
        ([("a", "<p>a</p>"), ("a", "<p>b</p>")], None),
        ([("a", "<p>a</p>")], None),
        ([("a", ""), ("b", "")], None),
        ([("a", "<p>a</p>"), ("", "<p>a</p>")], 1),
    ],
)
def test_the_version_since_which_the_html_stayed_while_the_text_changed(
    tenant_a, mailbox_a, make_draft, admin_a, versions, since
):
    (text, html), *later = versions
    draft = make_draft(mailbox_a, text=text or "x", html=html)
    if not text:
        DraftVersion.objects.filter(draft=draft).update(text="")
    for text, html in later:
        current = DraftVersion.objects.get(draft=draft, number=draft.current_version)
        services.draft_add_version(
            tenant=tenant_a,
            draft_id=draft.pk,
            base_version=current.number,
            actor_user=admin_a.user,
            to=list(current.to),
            cc=[],
            bcc=[],
            subject=current.subject,
            text=text,
            html=html,
        )
        draft.refresh_from_db()

    assert html_unchanged_while_text_changed(tenant=tenant_a, draft_id=draft.pk) == since


def test_the_queue_marks_a_draft_whose_text_changed_under_an_unchanged_html(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    """Bulk approval leaves such a draft to its page; the queue's row said nothing of it, as it
    does for every other draft bulk approval leaves out. One query for the page's rows."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    edited = make_draft(mailbox_a, text="Pay to IBAN XX00 1111.", html=OLD_HTML)
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=edited.pk,
        base_version=1,
        actor_user=admin_a.user,
        to=list(DraftVersion.objects.get(draft=edited).to),
        cc=[],
        bcc=[],
        subject="Your invoice",
        text="Pay to IBAN XX00 2222.",
        html=OLD_HTML,
    )
    untouched = make_draft(mailbox_a, text="Pay to IBAN XX00 3333.", html="<p>3333</p>")
    reviewer = signed_in(member_of(tenant_a, "approver").user)

    with CaptureQueriesContext(connection) as queries:
        page = reviewer.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()

    rows = {
        int(re.search(r"/drafts/(\d+)/", row)[1]): row
        for row in page.split('<article class="qrow')[1:]
    }
    assert "data-html-unchanged" in rows[edited.pk]
    assert "data-html-unchanged" not in rows[untouched.pk]
    assert sum("sha256" in q["sql"] for q in queries.captured_queries) == 1
