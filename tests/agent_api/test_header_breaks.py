"""The agent API refuses every kind of line break in values that become headers, as a 422 that
names the field, and writes nothing."""

from __future__ import annotations

import pytest

from intents.models import ApiIdempotencyKey, Draft
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db

LINE_BREAKS = ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
IDS = [f"U+{ord(c):04X}" for c in LINE_BREAKS]


@pytest.mark.parametrize("brk", LINE_BREAKS, ids=IDS)
def test_subject_with_any_line_break_is_a_422_naming_subject(api, token_a, mailbox_a, brk):
    body = draft_body(mailbox_a, subject=f"Hello{brk}Bcc: evil@example.org")

    response = api.post("/drafts", body, token=token_a, key="brk-1")

    problem = response.json()
    assert response.status_code == 422
    assert response["Content-Type"] == "application/problem+json"
    assert [e["field"] for e in problem["errors"]] == ["subject"]
    assert f"U+{ord(brk):04X}" in problem["errors"][0]["message"]
    assert Draft.objects.count() == 0
    assert ApiIdempotencyKey.objects.count() == 0


@pytest.mark.parametrize("brk", ["\x85", "\u2028", "\u2029", "\v", "\f"], ids=str.__repr__)
def test_in_reply_to_with_a_unicode_line_break_is_a_422_naming_it(api, token_a, mailbox_a, brk):
    body = draft_body(mailbox_a, in_reply_to=f"<a@b>{brk}Bcc: evil@example.org")

    response = api.post("/drafts", body, token=token_a, key="brk-2")

    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["in_reply_to"]
    assert Draft.objects.count() == 0


@pytest.mark.parametrize("control", ["\x1b", "\x07", "\x7f", "\x9b"], ids=str.__repr__)
def test_subject_with_a_control_character_is_a_422_naming_it(api, token_a, mailbox_a, control):
    """ESC, BEL, DEL and C1 controls were stored and sent: none can be written in a header as it
    is, and a terminal or mail client reading them may act on them."""
    body = draft_body(mailbox_a, subject=f"Refund{control}[31m approved")

    response = api.post("/drafts", body, token=token_a, key="ctl-1")

    problem = response.json()
    assert response.status_code == 422
    assert [e["field"] for e in problem["errors"]] == ["subject"]
    assert f"U+{ord(control):04X}" in problem["errors"][0]["message"]
    assert Draft.objects.count() == 0


def test_a_tab_in_a_subject_is_kept(api, token_a, mailbox_a):
    response = api.post(
        "/drafts", draft_body(mailbox_a, subject="Order\t1042"), token=token_a, key="tab"
    )

    assert response.status_code == 201
    assert response.json()["current_version"]["subject"] == "Order\t1042"


@pytest.mark.parametrize(
    "subject",
    ["\ufeff", "\u202e\u200b", "\u200b \u2060", "\u3164", "\U000e0041\U000e0042", "\ufe0f"],
    ids=ascii,
)
def test_a_subject_of_only_characters_nobody_sees_is_a_422_naming_them(
    api, token_a, mailbox_a, subject
):
    """Found by probe 4 (an agent): a subject of a byte order mark, bidi controls or zero-width
    spaces passed as written, and the reviewer approved a message whose subject shows nothing."""
    response = api.post("/drafts", draft_body(mailbox_a, subject=subject), token=token_a, key="in")

    problem = response.json()
    assert response.status_code == 422
    assert (problem["code"], [e["field"] for e in problem["errors"]]) == (
        "subject_required",
        ["subject"],
    )
    assert f"U+{ord(subject[0]):04X}" in problem["errors"][0]["message"]
    assert Draft.objects.count() == 0
    assert ApiIdempotencyKey.objects.count() == 0


@pytest.mark.parametrize("text", ["\ufeff", "\u200b\n\u2060\n", "\u202e \u3164"], ids=ascii)
def test_a_text_body_of_only_characters_nobody_sees_is_a_422_naming_them(
    api, token_a, mailbox_a, text
):
    """As a subject: a body of zero-width spaces and bidi controls passed the blank check
    (``strip()`` keeps them), and the customer would receive a message that shows nothing."""
    response = api.post("/drafts", draft_body(mailbox_a, text=text), token=token_a, key="in")

    problem = response.json()
    assert response.status_code == 422
    assert (problem["code"], [e["field"] for e in problem["errors"]]) == (
        "body_required",
        ["text"],
    )
    assert f"U+{ord(text[0]):04X}" in problem["errors"][0]["message"]
    assert Draft.objects.count() == 0


def test_an_invisible_text_beside_an_html_body_is_kept(api, token_a, mailbox_a):
    response = api.post(
        "/drafts",
        draft_body(mailbox_a, text="\u200b", html="<p>It shipped.</p>"),
        token=token_a,
        key="html",
    )

    assert response.status_code == 201


def test_a_subject_with_a_word_beside_an_invisible_character_is_kept(api, token_a, mailbox_a):
    response = api.post(
        "/drafts", draft_body(mailbox_a, subject="\ufeffOrder 1042"), token=token_a, key="word"
    )

    assert response.status_code == 201
