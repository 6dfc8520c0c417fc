"""Outsider probe: an agent's HTML with Outlook's conditional comments. A browser reads
``<!--[if mso]>...<![endif]-->`` as a comment and shows nothing of it; Outlook for Windows
renders what it holds (and hides what ``<!--[if !mso]><!-->...<!--<![endif]-->`` holds). The
draft page's frame is a browser: the reviewer approved a sentence they never saw, and the
provider sent it as written."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from intents.models import SendIntent
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import agent_drafts_to_ana, approved_on_its_page_and_sent

OUTLOOK_ONLY = "<p>Outlook users: pay the handling fee to IBAN XX00 9999 first.</p>"
HTML = (
    "<p>Your refund is on its way.</p>"
    f"<!--[if mso]>{OUTLOOK_ONLY}<![endif]-->"
    "<!--[if !mso]><!--><p>Nothing to do on your side.</p><!--<![endif]-->"
)


@pytest.mark.django_db(transaction=True)
def test_outlooks_conditional_comments_are_named_shown_as_source_and_kept_out_of_a_list(
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
        "outlook",
        subject="Your refund",
        text="Your refund is on its way.",
        html=HTML,
    )
    page_url = reverse("draft", args=[tenant_a.slug, draft["id"]])
    page = client.get(page_url).content.decode()
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    items = re.findall(r'name="item" value="([^"]+)"', queue)

    from_list = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": items}, follow=True
    ).content.decode()

    assert 'data-body-warning="reader_looks"' in page
    assert "Outlook for Windows" in page
    assert 'data-look-note="outlook_windows"' in page
    shown = page.split("data-conditional-comments")[1].split("</pre>")[0]
    assert escape(OUTLOOK_ONLY) in shown
    assert "<!--[if" not in page
    assert f"Draft {draft['id']} was not approved" in from_list
    assert "Outlook for Windows" in from_list
    assert not SendIntent.objects.filter(draft_id=draft["id"]).exists()

    sent = approved_on_its_page_and_sent(client, tenant_a, draft["id"], sandbox, mailbox)
    assert (sent["text"], sent["html"]) == ("Your refund is on its way.", HTML)
