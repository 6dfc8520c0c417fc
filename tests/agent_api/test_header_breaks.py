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
