"""Odd not_after values through the agent API (leap seconds, offsets past ±14 h, dates alone,
numbers, infinities): a clear 4xx or the exact instant, never a 500 nor a silently moved time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from agent_api.mcp_tools import call_tool
from config.clock import db_now
from intents.models import ApiIdempotencyKey, Draft, DraftVersion, IntentEvent
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db


def _soon(hours=5):
    return datetime.now(UTC) + timedelta(hours=hours)


ODD = [
    "{y}-12-31T23:59:60Z",  # leap second
    "{y}-06-30T23:59:60+00:00",
    "{d}",  # date only
    "{d}T10:00:00",  # naive
    "{d}T10:00:00+14:00",
    "{d}T10:00:00-12:00",
    "{d}T10:00:00+24:00",
    "{d}T10:00:00+23:59",
    "{d}T10:00:00.123456789Z",
    "{d}T24:00:00Z",
    "{d}t10:00:00z",
    "{d} 10:00:00Z",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59.999999-23:59",
    1900000000,
    1900000000000,
    -1,
    "1900000000",
    "inf",
    "nan",
    True,
    "P1D",
    "now",
    "",
]


@pytest.mark.parametrize("raw", ODD, ids=[str(v) for v in ODD])
def test_odd_not_after_is_4xx_or_exact(api, token_a, mailbox_a, raw):
    soon = _soon(30)
    value = raw.format(y=soon.year, d=soon.date().isoformat()) if isinstance(raw, str) else raw
    response = api.post("/drafts", draft_body(mailbox_a, not_after=value), token=token_a, key="k1")
    assert response.status_code in (201, 200, 400, 422), (value, response.status_code)
    if response.status_code in (200, 201):
        draft = Draft.objects.get()
        assert draft.not_after is not None
        assert draft.not_after > datetime.now(UTC), (value, draft.not_after)
        if isinstance(value, str) and value[:4].isdigit() and "T" in value.upper():
            parsed = datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
            assert parsed.tzinfo is not None, (value, draft.not_after)
            assert draft.not_after == parsed, (value, draft.not_after)
    else:
        assert Draft.objects.count() == 0


# Not date-time strings: pydantic's lax mode read a number as a Unix time (5 became 1970, "in the
# past"; 1e12 became 2001) and a string of digits too, and took what RFC 3339 is not (no seconds,
# a space for the "T", a comma before the fraction, an offset without its colon).
NOT_A_DATE_TIME = [5, 1e12, 1900000000, -1, 0.5, True, False, [], {}, "1900000000"]
NOT_A_DATE_TIME += ["{d}T10:00Z", "{d} 10:00:00Z", "{d}T10:00:00,5Z", "{d}T10:00:00+0100"]
NOT_A_DATE_TIME += ["{d}T10:00:00", "{d}", "{y}-12-31T23:59:60Z"]


@pytest.mark.parametrize("raw", NOT_A_DATE_TIME, ids=[repr(v) for v in NOT_A_DATE_TIME])
def test_not_after_that_is_no_rfc3339_date_time_string_is_refused_as_such(
    api, token_a, mailbox_a, raw
):
    soon = _soon(30)
    value = raw.format(y=soon.year, d=soon.date().isoformat()) if isinstance(raw, str) else raw

    refused = api.post("/drafts", draft_body(mailbox_a, not_after=value), token=token_a, key="na")

    problem = refused.json()
    assert refused.status_code == 422
    assert problem["code"] == "validation_failed"
    assert [e["field"] for e in problem["errors"]] == ["not_after"]
    assert "RFC 3339 date-time string" in problem["errors"][0]["message"]
    assert Draft.objects.count() == 0
    assert DraftVersion.objects.count() == 0
    assert IntentEvent.objects.count() == 0
    assert ApiIdempotencyKey.objects.count() == 0

    corrected = draft_body(mailbox_a, not_after=soon.isoformat())
    assert api.post("/drafts", corrected, token=token_a, key="na").status_code == 201


@pytest.mark.parametrize(
    "written",
    [
        "{d}T10:00:00Z",
        "{d}t10:00:00z",
        "{d}T10:00:00.5+02:00",
        "{d}T10:00:00-00:00",
        "{d}T10:00:00.123456+05:30",
    ],
)
def test_not_after_in_rfc3339_is_the_exact_instant(api, token_a, mailbox_a, written):
    value = written.format(d=_soon(30).date().isoformat())

    created = api.post("/drafts", draft_body(mailbox_a, not_after=value), token=token_a, key="ok")

    assert created.status_code == 201
    expected = datetime.fromisoformat(value.upper())
    assert Draft.objects.get().not_after == expected
    assert datetime.fromisoformat(created.json()["not_after"]) == expected


def test_not_after_beyond_microseconds_is_cut_to_an_earlier_instant_never_a_later_one(
    api, token_a, mailbox_a
):
    """RFC 3339 allows any number of fraction digits (Go's RFC3339Nano writes nine); PostgreSQL
    keeps microseconds. Cut, the latest moment to send moves earlier, never later."""
    day = _soon(30).date().isoformat()

    created = api.post(
        "/drafts",
        draft_body(mailbox_a, not_after=f"{day}T10:00:00.999999999Z"),
        token=token_a,
        key="ns",
    )

    assert created.status_code == 201
    assert Draft.objects.get().not_after == datetime.fromisoformat(f"{day}T10:00:00.999999Z")


def test_the_mcp_tool_refuses_a_number_for_not_after_and_keeps_the_key(token_a, mailbox_a):
    arguments = draft_body(mailbox_a, not_after=5, idempotency_key="mcp-na")

    refused = call_tool(raw_token=token_a, name="create_draft", arguments=arguments)

    assert refused.is_error
    assert (refused.document["status"], refused.document["code"]) == (422, "validation_failed")
    assert [e["field"] for e in refused.document["errors"]] == ["not_after"]
    assert "not a number" in refused.document["errors"][0]["message"]
    assert ApiIdempotencyKey.objects.count() == 0
    corrected = {**arguments, "not_after": _soon().isoformat()}
    assert not call_tool(raw_token=token_a, name="create_draft", arguments=corrected).is_error
    assert Draft.objects.count() == 1


# The web host's clock against the database's: the sweep expires a draft, and approval refuses
# it, when not_after passes by the database clock (Now()); the check at creation read the web
# host's clock, so a host two minutes ahead refused a send-by time one minute away as "in the
# past", and one two minutes behind accepted, with a 201, a draft already dead.
SKEW = timedelta(minutes=2)


def test_not_after_a_minute_ahead_by_the_database_clock_is_accepted_on_a_host_ahead(
    api, token_a, mailbox_a
):
    not_after = db_now() + timedelta(minutes=1)

    with time_machine.travel(datetime.now(UTC) + SKEW):
        created = api.post(
            "/drafts",
            draft_body(mailbox_a, not_after=not_after.isoformat()),
            token=token_a,
            key="a",
        )

    assert created.status_code == 201, created.json()
    assert Draft.objects.get().not_after == not_after


def test_not_after_passed_by_the_database_clock_is_refused_on_a_host_behind(
    api, token_a, mailbox_a
):
    not_after = db_now() - timedelta(seconds=30)

    with time_machine.travel(datetime.now(UTC) - SKEW):
        refused = api.post(
            "/drafts",
            draft_body(mailbox_a, not_after=not_after.isoformat()),
            token=token_a,
            key="b",
        )

    assert refused.status_code == 422
    assert refused.json()["code"] == "not_after_past"
    assert Draft.objects.count() == 0
