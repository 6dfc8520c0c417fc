"""Outsider probe: a subject holding an RFC 2047 encoded word. The reviewer reads
"Your refund =?utf-8?B?...?=" and approves those characters; a mail client decodes an encoded
word wherever it stands in a Subject header, and so does Python's email package when a sender
sets the header from text: the customer reads "Your refund Pay to IBAN XX00 9999". Through the
agent API and through the reviewer's edit form, such a subject is refused, naming the word."""

from __future__ import annotations

import json
from email.message import EmailMessage

import pytest
from django.urls import reverse

from intents.models import Draft
from review.forms import EditForm
from tests.review.threads import agent_token

ENCODED = "=?utf-8?B?UGF5IHRvIElCQU4gWFgwMCA5OTk5?="
SUBJECT = f"Your refund {ENCODED}"


def test_a_mail_client_reads_the_encoded_word_as_other_text():
    message = EmailMessage()
    message["Subject"] = SUBJECT

    assert str(message["Subject"]) == "Your refund Pay to IBAN XX00 9999"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "subject",
    [SUBJECT, "=?UTF-8?q?Pay_now?=", "x =?iso-8859-1*en?Q?a?= y", "=?utf-8?b??="],
)
def test_the_agent_api_refuses_a_subject_with_an_encoded_word(
    tenant_a, mailbox_a, admin_a, client, subject
):
    token = agent_token(tenant_a, admin_a.user)
    response = client.post(
        "/api/v1/drafts",
        data=json.dumps(
            {
                "mailbox": mailbox_a.address,
                "to": ["ana@customer.test"],
                "subject": subject,
                "text": "Hello",
            }
        ),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "encoded-word"},
    )

    assert response.status_code == 422, response.content
    assert "encoded word" in response.content.decode()
    assert not Draft.objects.exists()


@pytest.mark.django_db
def test_the_edit_form_refuses_a_subject_with_an_encoded_word(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    version = draft.versions.get()
    response = signed_in(admin_a.user).post(
        reverse("draft_edit", args=[tenant_a.slug, draft.pk]),
        {**EditForm.of_version(version).initial, "subject": SUBJECT},
    )

    assert response.status_code == 400
    assert "encoded word" in response.content.decode()
    assert draft.versions.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("subject", ["Price =? or not ?=", "a=?b", "=?utf-8?x?abc?="])
def test_a_subject_that_only_looks_a_little_like_one_is_kept(mailbox_a, make_draft, subject):
    assert make_draft(mailbox_a, subject=subject).versions.get().subject == subject
