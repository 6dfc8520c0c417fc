"""A draft or broadcast id in the path, and a page's ``limit``, are read as ASCII digits only.

Found by an outside probe (ids and numbers spelt as other strings): the path's id was read by
pydantic's lax integer parsing, so ``/drafts/1_0`` read (and ``POST /drafts/1_0/withdraw``
withdrew) draft 10, and ``+1``, ``1.0`` or `` 1`` were draft 1; ``?limit=1_0`` was a page of
10. An agent that mangled an id acted on another draft, told nothing; and one draft under two
paths is two requests to the Idempotency-Key store. The JSON body already takes integers only
(strict), and the MCP tools too.
"""

from __future__ import annotations

import pytest

from intents.models import Draft, IntentEvent
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db

# Other spellings of the id ``n`` (of two digits or more), each of which was read as ``n``.
SPELLINGS = {
    "underscore": lambda n: f"{n // 10}_{n % 10}",
    "plus": lambda n: f"+{n}",
    "fraction": lambda n: f"{n}.0",
    "space before": lambda n: f"%20{n}",
    "space after": lambda n: f"{n}%20",
    "leading zero": lambda n: f"0{n}",
}


@pytest.fixture
def ten_drafts(api, token_a, mailbox_a):
    return [
        api.post("/drafts", draft_body(mailbox_a), token=token_a, key=f"d-{n}").json()["id"]
        for n in range(10)
    ]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_draft_id_spelt_otherwise_than_in_digits_reads_no_draft(
    api, token_a, ten_drafts, spelling
):
    read = api.get(f"/drafts/{SPELLINGS[spelling](ten_drafts[-1])}", token=token_a)

    assert read.status_code == 422
    assert read.json()["code"] == "validation_failed"
    assert [e["field"] for e in read.json()["errors"]] == ["draft_id"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_withdrawal_of_an_id_spelt_otherwise_withdraws_nothing(
    api, token_a, ten_drafts, spelling
):
    events = IntentEvent.objects.count()

    refused = api.post(f"/drafts/{SPELLINGS[spelling](ten_drafts[-1])}/withdraw", token=token_a)

    assert refused.status_code == 422
    assert [e["field"] for e in refused.json()["errors"]] == ["draft_id"]
    assert set(Draft.objects.values_list("status", flat=True)) == {Draft.Status.PENDING}
    assert IntentEvent.objects.count() == events


@pytest.mark.parametrize("path", ["/drafts", "/broadcasts"])
@pytest.mark.parametrize("limit", ["1_0", "+5", "5.0", " 5"])
def test_a_limit_spelt_otherwise_than_in_digits_is_refused(api, token_a, path, limit):
    listed = api.get(path, token=token_a, params={"limit": limit})

    assert listed.status_code == 422
    assert [e["field"] for e in listed.json()["errors"]] == ["limit"]


def test_ids_and_limits_in_digits_still_read(api, token_a, ten_drafts):
    assert api.get(f"/drafts/{ten_drafts[-1]}", token=token_a).json()["id"] == ten_drafts[-1]
    assert len(api.get("/drafts", token=token_a, params={"limit": "3"}).json()["items"]) == 3
    assert api.get("/drafts/99999999999999999999", token=token_a).status_code == 404
