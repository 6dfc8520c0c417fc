"""POST /drafts/{id}/versions: bodies are stored and hashed with LF line endings whatever the
client sent."""

from __future__ import annotations

import pytest

from intents.hashing import content_hash
from tests.api.conftest import draft_body

pytestmark = pytest.mark.django_db

REVISION = {"to": ["customer@example.com"], "subject": "Re: order", "text": "Arrives tomorrow."}


def test_crlf_and_lone_cr_in_bodies_are_stored_and_hashed_as_lf(api, token_a, mailbox_a):
    created = api.post(
        "/drafts",
        draft_body(mailbox_a, text="Hello,\r\n\r\nIt shipped.\rBye", html="<p>a</p>\r\n<p>b</p>"),
        token=token_a,
        key="crlf-1",
    ).json()
    revised = api.post(
        f"/drafts/{created['id']}/versions",
        {**REVISION, "text": "Line one\r\nLine two\r", "html": "<p>x</p>\r<p>y</p>"},
        token=token_a,
    ).json()

    first, second = created["current_version"], revised["current_version"]
    assert (first["text"], first["html"]) == ("Hello,\n\nIt shipped.\nBye", "<p>a</p>\n<p>b</p>")
    assert (second["text"], second["html"]) == ("Line one\nLine two\n", "<p>x</p>\n<p>y</p>")
    assert first["content_hash"] == content_hash(
        mailbox_id=mailbox_a.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Re: Where is my order?",
        text="Hello,\n\nIt shipped.\nBye",
        html="<p>a</p>\n<p>b</p>",
        in_reply_to="",
    )
