"""The bad-input matrix: every malformed request gets a specific 4xx and writes nothing."""

from __future__ import annotations

import json

import pytest

from intents.models import ApiIdempotencyKey, Draft, DraftVersion, IntentEvent
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db


def _case(mailbox, /, **overrides):
    return json.dumps(draft_body(mailbox, **overrides))


CASES = {
    # name: (body builder, content type, status, code, field of the first error)
    "malformed json": (
        lambda m: '{"mailbox": "x", "to": [',
        "application/json",
        400,
        "malformed_json",
        None,
    ),
    "json array": (lambda m: "[1, 2]", "application/json", 422, "validation_failed", None),
    "empty body": (lambda m: "", "application/json", 422, "validation_failed", None),
    "to is a string": (
        lambda m: _case(m, to="customer@example.com"),
        "application/json",
        422,
        "validation_failed",
        "to",
    ),
    "subject is a number": (
        lambda m: _case(m, subject=123),
        "application/json",
        422,
        "validation_failed",
        "subject",
    ),
    "priority is a string": (
        lambda m: _case(m, priority="5"),
        "application/json",
        422,
        "validation_failed",
        "priority",
    ),
    "mailbox is null": (
        lambda m: _case(m, mailbox=None),
        "application/json",
        422,
        "validation_failed",
        "mailbox",
    ),
    # Above the body limit, which leaves room for a draft's attachments in base64.
    "6 MB subject": (
        lambda m: _case(m, subject="x" * 6_000_000),
        "application/json",
        413,
        "body_too_large",
        None,
    ),
    "subject over 998 characters": (
        lambda m: _case(m, subject="x" * 999),
        "application/json",
        422,
        "validation_failed",
        "subject",
    ),
    "10,000 recipients": (
        lambda m: _case(m, to=[f"c{i}@example.com" for i in range(10_000)]),
        "application/json",
        422,
        "validation_failed",
        "to",
    ),
    "51 recipients across to and cc": (
        lambda m: _case(
            m,
            to=[f"t{i}@example.com" for i in range(30)],
            cc=[f"c{i}@example.com" for i in range(21)],
        ),
        "application/json",
        422,
        "too_many_recipients",
        "to",
    ),
    "invalid address": (
        lambda m: _case(m, to=["customer@example.com", "not an address"]),
        "application/json",
        422,
        "validation_failed",
        "to[1]",
    ),
    "address with a header break": (
        lambda m: _case(m, to=["customer@example.com\r\nBcc: evil@example.org"]),
        "application/json",
        422,
        "validation_failed",
        "to[0]",
    ),
    # Found by a probe: white space other than a space around an address was stripped without
    # a word (str.strip), so a recipient the agent wrote with a CR, an LF or a no-break space
    # became another string than it sent. A plain space around one is still let pass.
    "address with a trailing CRLF": (
        lambda m: _case(m, to=["customer@example.com\r\n"]),
        "application/json",
        422,
        "validation_failed",
        "to[0]",
    ),
    "no-break space before an address": (
        lambda m: _case(m, cc=["\u00a0ana@example.com"]),
        "application/json",
        422,
        "validation_failed",
        "cc[0]",
    ),
    "line separator after an address": (
        lambda m: _case(m, bcc=["ok@example.com", "ana@example.com\u2028"]),
        "application/json",
        422,
        "validation_failed",
        "bcc[1]",
    ),
    "tab before an address": (
        lambda m: _case(m, to=["\tcustomer@example.com"]),
        "application/json",
        422,
        "validation_failed",
        "to[0]",
    ),
    "unknown field": (
        lambda m: _case(m, send_now=True),
        "application/json",
        422,
        "validation_failed",
        "send_now",
    ),
    "misspelt bcc": (
        lambda m: _case(m, bbc=["hidden@example.com"]),
        "application/json",
        422,
        "validation_failed",
        "bbc",
    ),
    "CRLF header injection in subject": (
        lambda m: _case(m, subject="Hello\r\nBcc: evil@example.org"),
        "application/json",
        422,
        "validation_failed",
        "subject",
    ),
    "LF in subject": (
        lambda m: _case(m, subject="Hello\nX-Injected: 1"),
        "application/json",
        422,
        "validation_failed",
        "subject",
    ),
    "CRLF in in_reply_to": (
        lambda m: _case(m, in_reply_to="<a@b>\r\nBcc: evil@example.org"),
        "application/json",
        422,
        "validation_failed",
        "in_reply_to",
    ),
    "blank subject": (
        lambda m: _case(m, subject="   "),
        "application/json",
        422,
        "validation_failed",
        "subject",
    ),
    "no body text": (
        lambda m: _case(m, text=""),
        "application/json",
        422,
        "body_required",
        "text",
    ),
    "naive not_after": (
        lambda m: _case(m, not_after="2030-01-01T10:00:00"),
        "application/json",
        422,
        "validation_failed",
        "not_after",
    ),
    "priority out of range": (
        lambda m: _case(m, priority=1000),
        "application/json",
        422,
        "validation_failed",
        "priority",
    ),
    "mailbox id beyond bigint": (
        lambda m: _case(m, mailbox=10**30),
        "application/json",
        404,
        "mailbox_not_found",
        "mailbox",
    ),
    "NUL character in subject": (
        lambda m: _case(m, subject="Hello\x00"),
        "application/json",
        422,
        "unstorable_value",
        "subject",
    ),
    "NUL character deep in provenance": (
        lambda m: _case(m, provenance={"sources": ["ok", "a\x00b"]}),
        "application/json",
        422,
        "unstorable_value",
        "provenance.sources[1]",
    ),
    "unpaired surrogate in text": (
        lambda m: _case(m, text="broken \ud800 text"),
        "application/json",
        422,
        "unstorable_value",
        "text",
    ),
    "NUL character in the mailbox address": (
        lambda m: _case(m, mailbox="support\x00@agentmail.to"),
        "application/json",
        422,
        "unstorable_value",
        "mailbox",
    ),
    "NaN in provenance": (
        lambda m: _case(m).replace('"text"', '"provenance": {"score": NaN}, "text"'),
        "application/json",
        400,
        "malformed_json",
        None,
    ),
    "number overflowing to infinity": (
        lambda m: _case(m).replace('"text"', '"provenance": {"score": 1e400}, "text"'),
        "application/json",
        422,
        "unstorable_value",
        "provenance.score",
    ),
    # One reading of the body for the schema, the idempotency fingerprint and the stored draft:
    # Python's json kept the last of two equal keys (another reader keeps the first).
    "key given twice": (
        lambda m: _case(m, text="first").replace('"text": "first"', '"text": "a", "text": "b"'),
        "application/json",
        422,
        "duplicate_key",
        "text",
    ),
    "key given twice deep in provenance": (
        lambda m: _case(m).replace('"text"', '"provenance": {"m": [{"k": 1, "k": 2}]}, "text"'),
        "application/json",
        422,
        "duplicate_key",
        "provenance.m[0].k",
    ),
    "integer of 5000 digits": (
        lambda m: _case(m).replace('"text"', '"provenance": {"n": ' + "9" * 5000 + '}, "text"'),
        "application/json",
        422,
        "number_too_long",
        "provenance.n",
    ),
    # A refusal names the key's path, and an unpaired surrogate cannot be written in a UTF-8
    # answer: both were a 500 HTML page (an outside probe). It is named by its JSON escape.
    "key holding an unpaired surrogate given twice": (
        lambda m: _case(m).replace(
            '"text"', '"provenance": {"\\ud800x": 1, "\\ud800x": 2}, "text"'
        ),
        "application/json",
        422,
        "duplicate_key",
        "provenance.\\ud800x",
    ),
    "number beyond a float under a key holding an unpaired surrogate": (
        lambda m: _case(m).replace('"text"', '"provenance": {"\\udfff": 1e400}, "text"'),
        "application/json",
        422,
        "unstorable_value",
        "provenance.\\udfff",
    ),
    # The refusal names a key, never the megabytes of one: cut after 100 characters.
    "key of 100,000 characters given twice": (
        lambda m: _case(m).replace(
            '"text"',
            '"provenance": {"' + "k" * 100_000 + '": 1, "' + "k" * 100_000 + '": 2}, "text"',
        ),
        "application/json",
        422,
        "duplicate_key",
        "provenance." + "k" * 100 + "…",
    ),
    "10,000 levels of nesting": (
        lambda m: _case(m).replace(
            '"text"', '"provenance": ' + "[" * 10_000 + "]" * 10_000 + ', "text"'
        ),
        "application/json",
        422,
        "too_deeply_nested",
        None,
    ),
    # Past the API's limit (512) but within what Python's json reads (about 1,000).
    "600 levels of nesting": (
        lambda m: _case(m).replace('"text"', '"provenance": ' + "[" * 600 + "]" * 600 + ', "text"'),
        "application/json",
        422,
        "too_deeply_nested",
        None,
    ),
    # Found by a probe: 4.5 MB of tiny values took 1.2 s of CPU each, 120 of them a minute.
    "200,000 values": (
        lambda m: _case(m).replace('"text"', '"provenance": [' + "0," * 199_999 + '0], "text"'),
        "application/json",
        413,
        "too_many_values",
        None,
    ),
    "byte order mark": (
        lambda m: b"\xef\xbb\xbf" + _case(m).encode(),
        "application/json",
        400,
        "malformed_json",
        None,
    ),
    "UTF-16 body": (
        lambda m: _case(m).encode("utf-16"),
        "application/json",
        400,
        "malformed_json",
        None,
    ),
    # Read as UTF-8 whatever it said: Latin-1 "Ã©" (C3 A9) was stored as "é".
    "charset other than UTF-8": (
        lambda m: _case(m, text="Caf@").replace("@", "\u00c3\u00a9").encode("latin-1"),
        "application/json; charset=iso-8859-1",
        415,
        "unsupported_media_type",
        None,
    ),
    "form-encoded body": (
        lambda m: "mailbox=x&to=y",
        "application/x-www-form-urlencoded",
        415,
        "unsupported_media_type",
        None,
    ),
    "text/plain JSON": (
        lambda m: _case(m),
        "text/plain",
        415,
        "unsupported_media_type",
        None,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_gets_a_specific_4xx_and_writes_nothing(api, token_a, mailbox_a, name):
    build, content_type, status, code, field = CASES[name]

    response = api.post(
        "/drafts", raw=build(mailbox_a), content_type=content_type, token=token_a, key="bad-1"
    )

    problem = response.json()
    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    assert problem["status"] == status
    assert problem["code"] == code
    assert problem["type"] == f"urn:countersign:problem:{code}"
    assert problem["title"]
    assert problem["detail"]
    assert (problem["errors"][0]["field"] if problem["errors"] else None) == field
    assert Draft.objects.count() == 0
    assert DraftVersion.objects.count() == 0
    assert IntentEvent.objects.count() == 0
    assert ApiIdempotencyKey.objects.count() == 0


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        ("", "the request needs a JSON object body; none was sent"),
        ("[1, 2]", "the body must be a JSON object ({...}) with the route's fields"),
        ("null", "the body must be a JSON object ({...}) with the route's fields"),
    ],
)
def test_a_body_that_is_no_json_object_says_so(api, token_a, raw, detail):
    """It answered "Field required" or "Input should be a valid dictionary or object to
    extract fields from", naming no field: nothing a developer could act on."""
    response = api.post("/drafts", raw=raw, token=token_a, key="no-object")

    assert (response.status_code, response.json()["detail"]) == (422, detail)


def test_data_after_the_json_value_is_named_with_its_place(api, token_a, mailbox_a):
    """It said only "could not be parsed as JSON", for a body whose JSON was whole."""
    body = json.dumps(draft_body(mailbox_a))

    response = api.post("/drafts", raw=body + "\n{}", token=token_a, key="trailing")

    assert response.status_code == 400
    assert response.json()["detail"] == (
        "The request body is not valid JSON: Extra data at line 2 column 1."
    )
    assert Draft.objects.count() == 0


def test_validation_errors_list_every_field(api, token_a, mailbox_a):
    body = draft_body(mailbox_a, to=["bad"], subject="a\r\nb", unknown=1)

    response = api.post("/drafts", body, token=token_a, key="many")

    fields = sorted(e["field"] for e in response.json()["errors"])
    assert response.status_code == 422
    assert fields == ["subject", "to[0]", "unknown"]


def test_bad_revision_writes_no_version(api, token_a, mailbox_a):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="ok").json()["id"]

    response = api.post(
        f"/drafts/{draft_id}/versions",
        {"to": ["a@example.com"], "subject": "x\r\nBcc: evil@example.org", "text": "t"},
        token=token_a,
    )

    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "subject"
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 1


def test_a_revision_whose_recipient_ends_in_a_line_feed_is_refused_naming_it(
    api, token_a, mailbox_a
):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="ok").json()["id"]

    response = api.post(
        f"/drafts/{draft_id}/versions",
        {"to": ["a@example.com"], "cc": ["b@example.com\n"], "subject": "x", "text": "t"},
        token=token_a,
    )

    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "cc[0]"
    assert response.json()["detail"] == (
        "cc[0]: holds U+000A LINE FEED: an address may hold no line break, control character "
        "or white space other than a space"
    )
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 1


def test_plain_spaces_around_an_address_are_still_let_pass(api, token_a, mailbox_a):
    response = api.post(
        "/drafts", draft_body(mailbox_a, to=["  ana@example.com "]), token=token_a, key="sp"
    )

    assert response.status_code == 201, response.content
    assert response.json()["current_version"]["to"] == ["ana@example.com"]


def test_oversized_declared_length_is_413_before_reading(api, token_a, mailbox_a):
    response = api.post(
        "/drafts",
        raw=json.dumps(draft_body(mailbox_a)),
        token=token_a,
        key="big",
        headers={"Content-Length": str(10 * 1024 * 1024)},
    )

    assert response.status_code == 413
    assert Draft.objects.count() == 0


@pytest.mark.parametrize("digits", ["²", "①", "{arabic}"])
def test_a_mailbox_named_by_digits_that_are_not_ascii_is_no_mailbox(
    api, token_a, mailbox_a, digits
):
    """Found by an outside probe: the mailbox reference was read with ``str.isdigit()``, which is
    true of Arabic-Indic digits (int() then read them as the mailbox's id: a 201) and of ``²``
    and ``①`` (int() refuses those: a 500). An id is ASCII digits; anything else is looked up as
    an address, and there is no such mailbox."""
    arabic = "".join(chr(0x0660 + int(d)) for d in str(mailbox_a.pk))
    body = draft_body(mailbox_a, mailbox=digits.format(arabic=arabic))

    response = api.post("/drafts", body, token=token_a, key="digits-1")

    assert response.status_code == 404, response.content
    assert response.json()["code"] == "mailbox_not_found"
    assert Draft.objects.count() == 0
