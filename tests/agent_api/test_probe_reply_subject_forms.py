"""Outsider probe (a sloppy agent): the customer's mail client wrote "Café" decomposed (e and a
combining acute accent, as macOS file names and some clients do), and AgentMail passes the subject
on as written. The agent writes the reply's subject out as it reads it, composed ("é", as JSON
libraries and models often return text): the same characters to every reader. It was refused
as another subject ('send exactly that: "Re: Café"', which it had), and the agent could not see
what differed. A subject that differs only so is taken, and the draft keeps the subject AgentMail
will send: the customer's own form."""

from __future__ import annotations

import unicodedata

import pytest
from django.utils import timezone

from tests.agent_api.conftest import draft_body
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db

DECOMPOSED = unicodedata.normalize("NFD", "Café order 77")


def test_a_reply_subject_written_in_another_unicode_form_is_the_derived_one(
    api, token_a, mailbox_a
):
    InboundMessage.objects.create(
        tenant=mailbox_a.tenant,
        mailbox=mailbox_a,
        thread_id="thr-cafe",
        message_id="<cafe@example.com>",
        sender="customer@example.com",
        subject=DECOMPOSED,
        received_at=timezone.now(),
    )
    composed = unicodedata.normalize("NFC", f"Re: {DECOMPOSED}")
    assert composed != f"Re: {DECOMPOSED}"
    body = draft_body(mailbox_a, subject=composed, in_reply_to="<cafe@example.com>")

    created = api.post("/drafts", body, token=token_a, key="cafe-1")

    assert created.status_code == 201, created.content
    assert created.json()["current_version"]["subject"] == f"Re: {DECOMPOSED}"


def test_a_reply_subject_with_other_words_is_still_refused(api, token_a, mailbox_a):
    InboundMessage.objects.create(
        tenant=mailbox_a.tenant,
        mailbox=mailbox_a,
        thread_id="thr-cafe",
        message_id="<cafe@example.com>",
        sender="customer@example.com",
        subject=DECOMPOSED,
        received_at=timezone.now(),
    )
    body = draft_body(mailbox_a, subject="Re: Cafe order 77", in_reply_to="<cafe@example.com>")

    refused = api.post("/drafts", body, token=token_a, key="cafe-2")

    assert refused.status_code == 422
    assert refused.json()["code"] == "subject_not_reply_subject"
