"""Odd not_after values through the agent API (leap seconds, offsets past ±14 h, dates alone,
numbers, infinities): a clear 4xx or the exact instant, never a 500 nor a silently moved time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from intents.models import Draft
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
