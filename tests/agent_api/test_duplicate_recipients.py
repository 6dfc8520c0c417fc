"""One recipient named twice in a draft, in the same spelling or in two spellings of one address
(the case of its local part or its domain, the domain in Unicode and in punycode, white space
around it, a full-width letter), in one list or across to, cc and bcc: refused whole, 422
``duplicate_recipient`` naming the list it is repeated in and both spellings, on the JSON API and
the MCP tool alike. Keeping one of them silently changed the recipients the agent asked for
behind its back. Nothing is written, and the Idempotency-Key stays usable for the corrected
request."""

from __future__ import annotations

import pytest

from agent_api.mcp_tools import call_tool
from intents.models import ApiIdempotencyKey, Draft, DraftVersion, IntentEvent
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db

# (the recipient lists, the list the repeat is in, the spellings the refusal names)
DUPLICATES = {
    "one spelling twice in to": (
        {"to": ["ana@example.com", "ana@example.com"]},
        "to",
        ["ana@example.com"],
    ),
    "the local part's case": (
        {"to": ["ana@example.com", "Ana@example.com"]},
        "to",
        ["ana@example.com", "Ana@example.com"],
    ),
    "the domain's case, in to and cc": (
        {"to": ["ana@example.com"], "cc": ["ana@EXAMPLE.com"]},
        "cc",
        ["ana@example.com", "ana@EXAMPLE.com"],
    ),
    "white space around it, in bcc": (
        {"to": ["ana@example.com"], "bcc": ["  ana@example.com "]},
        "bcc",
        ["ana@example.com"],
    ),
    "the domain in Unicode and in punycode": (
        {"to": ["ana@b\u00fccher.de"], "cc": ["ana@xn--bcher-kva.de"]},
        "cc",
        ["ana@b\u00fccher.de", "ana@xn--bcher-kva.de"],
    ),
    "a full-width letter, as a broadcast's rows compare it": (
        {"to": ["ana@example.com"], "bcc": ["\uff41na@example.com"]},
        "bcc",
        ["ana@example.com", "\uff41na@example.com"],
    ),
    "in cc and bcc": (
        {"to": ["bo@example.com"], "cc": ["ana@example.com"], "bcc": ["ANA@example.com"]},
        "bcc",
        ["ana@example.com", "ANA@example.com"],
    ),
}


def _nothing_written() -> None:
    assert Draft.objects.count() == 0
    assert DraftVersion.objects.count() == 0
    assert IntentEvent.objects.count() == 0
    assert ApiIdempotencyKey.objects.count() == 0


@pytest.mark.parametrize("name", list(DUPLICATES))
def test_a_recipient_named_twice_is_refused_naming_both_spellings(api, token_a, mailbox_a, name):
    lists, field, spellings = DUPLICATES[name]

    refused = api.post("/drafts", draft_body(mailbox_a, **lists), token=token_a, key="dup-1")

    problem = refused.json()
    assert refused.status_code == 422
    assert refused["Content-Type"] == "application/problem+json"
    assert problem["code"] == "duplicate_recipient"
    assert problem["errors"] == [{"field": field, "message": problem["detail"]}]
    assert all(spelling.strip() in problem["detail"] for spelling in spellings), problem
    assert f" {field}" in problem["detail"]
    _nothing_written()

    corrected = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="dup-1")
    assert corrected.status_code == 201
    assert Draft.objects.count() == 1


def test_a_revision_naming_a_recipient_twice_adds_no_version(api, token_a, mailbox_a):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="dup-2").json()["id"]
    events = IntentEvent.objects.count()
    revision = {
        "to": ["customer@example.com"],
        "cc": ["Customer@Example.COM"],
        "subject": "Re: Where is my order?",
        "text": "It arrives tomorrow.",
    }

    refused = api.post(f"/drafts/{draft_id}/versions", revision, token=token_a, key="rev-1")

    problem = refused.json()
    assert (refused.status_code, problem["code"]) == (422, "duplicate_recipient")
    assert problem["errors"][0]["field"] == "cc"
    assert "Customer@Example.COM" in problem["detail"]
    assert "customer@example.com" in problem["detail"]
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 1
    assert IntentEvent.objects.count() == events
    assert not ApiIdempotencyKey.objects.filter(key="rev-1").exists()

    corrected = api.post(
        f"/drafts/{draft_id}/versions", {**revision, "cc": []}, token=token_a, key="rev-1"
    )
    assert corrected.status_code == 201
    assert corrected.json()["current_version"]["number"] == 2


def test_the_mcp_tool_refuses_a_recipient_named_twice_and_keeps_the_key(token_a, mailbox_a):
    arguments = draft_body(
        mailbox_a,
        to=["customer@example.com"],
        bcc=["CUSTOMER@example.com"],
        idempotency_key="mcp-dup-1",
    )

    refused = call_tool(raw_token=token_a, name="create_draft", arguments=arguments)

    assert refused.is_error
    assert (refused.document["status"], refused.document["code"]) == (422, "duplicate_recipient")
    assert refused.document["errors"][0]["field"] == "bcc"
    assert "CUSTOMER@example.com" in refused.document["detail"]
    _nothing_written()

    corrected = call_tool(
        raw_token=token_a, name="create_draft", arguments={**arguments, "bcc": []}
    )
    assert not corrected.is_error
    assert corrected.document["current_version"]["bcc"] == []
    assert Draft.objects.count() == 1
