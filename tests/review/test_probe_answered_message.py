"""Outsider probe: the customer's message a reply answers is on its draft's page, however many
messages the thread holds after it. The page showed the thread's ten newest (and those written
after the draft): a reply to the first of twelve messages was approved from a page that showed
neither that message nor which one the reply answers, and the editor put the thread's newest
under "The customer wrote"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.review.wrote_again import customer_wrote

pytestmark = pytest.mark.django_db


def _reply_to_the_first_of_twelve(tenant, mailbox, make_draft):
    start = timezone.now() - timedelta(hours=2)
    first, *_ = [
        customer_wrote(tenant, mailbox, "thr-long", n, start + timedelta(minutes=n))
        for n in range(1, 13)
    ]
    draft = make_draft(
        mailbox,
        thread_id="thr-long",
        in_reply_to=first.message_id,
        to=["c@example.com"],
        subject=None,
    )
    return first, draft


def test_the_draft_page_shows_the_message_the_reply_answers(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    first, draft = _reply_to_the_first_of_twelve(tenant_a, mailbox_a, make_draft)

    page = signed_in(admin_a.user).get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    assert first in page.context["inbound"]
    assert "Message 1<" in page.content.decode()
    assert "this draft answers it" in page.content.decode()
    assert first not in page.context["newer_inbound"]


def test_the_editor_shows_the_message_the_reply_answers(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    first, draft = _reply_to_the_first_of_twelve(tenant_a, mailbox_a, make_draft)

    page = signed_in(admin_a.user).get(reverse("draft_edit", args=[tenant_a.slug, draft.pk]))

    assert page.context["answered"] == first
    assert page.context["answered_exactly"] is True
