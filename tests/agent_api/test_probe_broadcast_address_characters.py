"""An outside probe of a broadcast's recipient addresses on the agent API: a line break, a tab, a
no-break space or a Unicode line separator around an address, in a JSON row or a CSV cell. A
draft's recipients refuse them (``common.addresses.stray_character_in``); a broadcast's rows
took them and stored another string than the agent sent, without a word (``normalize_address``
strips every kind of white space). Refused now, naming the row and the character, and nothing
is saved."""

from __future__ import annotations

import pytest

from intents.models import Broadcast
from tests.agent_api.test_broadcasts import body

pytestmark = pytest.mark.django_db

EDGES = {
    "CR LF after": ("c1@example.com\r\n", "U+000D CARRIAGE RETURN"),
    "LF before": ("\nc1@example.com", "U+000A LINE FEED"),
    "tab after": ("c1@example.com\t", "U+0009 CHARACTER TABULATION"),
    "no-break space before": ("\u00a0c1@example.com", "U+00A0 NO-BREAK SPACE"),
    "line separator after": ("c1@example.com\u2028", "U+2028 LINE SEPARATOR"),
    "next line after": ("c1@example.com\x85", "U+0085 NEXT LINE"),
    "ideographic space after": ("c1@example.com\u3000", "U+3000 IDEOGRAPHIC SPACE"),
}


@pytest.mark.parametrize(("written", "named"), EDGES.values(), ids=EDGES.keys())
def test_a_json_row_with_a_stray_character_around_its_address_is_refused_naming_it(
    api, token_a, mailbox_a, written, named
):
    rows = [
        {"address": "c0@example.com", "variables": {"name": "a", "order": 0}},
        {"address": written, "variables": {"name": "b", "order": 1}},
    ]
    response = api.post("/broadcasts", body(mailbox_a, recipients=rows), token=token_a, key="k1")

    problem = response.json()
    assert (response.status_code, problem["code"]) == (422, "recipients_invalid")
    [error] = problem["errors"]
    assert (error["field"], error["row"]) == ("recipients[1].address", 2)
    assert named in error["message"]
    assert not Broadcast.objects.exists()


@pytest.mark.parametrize(
    ("written", "named"),
    [EDGES["no-break space before"], EDGES["tab after"], EDGES["line separator after"]],
)
def test_a_csv_cell_with_a_stray_character_around_its_address_is_refused_naming_it(
    api, token_a, mailbox_a, written, named
):
    # A line break in a cell needs quotes; these need none.
    csv_text = f"address,name,order\nc0@example.com,a,0\n{written},b,1\n"
    response = api.post(
        "/broadcasts",
        body(mailbox_a, recipients=None, recipients_csv=csv_text),
        token=token_a,
        key="k2",
    )

    problem = response.json()
    assert (response.status_code, problem["code"]) == (422, "recipients_invalid")
    [error] = problem["errors"]
    assert (error["field"], error["row"]) == ("recipients_csv.address", 2)
    assert named in error["message"]
    assert not Broadcast.objects.exists()


def test_a_quoted_csv_cell_ending_in_a_line_break_is_refused_naming_it(api, token_a, mailbox_a):
    csv_text = 'address,name,order\nc0@example.com,a,0\n"c1@example.com\r\n",b,1\n'
    response = api.post(
        "/broadcasts",
        body(mailbox_a, recipients=None, recipients_csv=csv_text),
        token=token_a,
        key="k3",
    )

    problem = response.json()
    assert response.status_code == 422
    [error] = problem["errors"]
    assert (error["field"], error["row"]) == ("recipients_csv.address", 2)
    assert "U+000D CARRIAGE RETURN" in error["message"]
    assert not Broadcast.objects.exists()


def test_plain_spaces_around_an_address_still_pass_as_on_a_draft(api, token_a, mailbox_a):
    rows = [{"address": "  c0@example.com ", "variables": {"name": "a", "order": 0}}]
    response = api.post("/broadcasts", body(mailbox_a, recipients=rows), token=token_a, key="k4")

    assert response.status_code == 201, response.content
    assert Broadcast.objects.get().recipients.get().address == "c0@example.com"


def test_one_bad_cell_among_ten_thousand_rows_is_named_by_its_row_and_nothing_is_saved(
    api, token_a, mailbox_a, settings
):
    settings.BROADCAST_MAX_RECIPIENTS = 10_000
    lines = [f"c{i}@example.com,n{i},{i}" for i in range(10_000)]
    lines[7344] = "c7344@example.com\u00a0,n7344,7344"
    csv_text = "address,name,order\n" + "\n".join(lines) + "\n"
    response = api.post(
        "/broadcasts",
        body(mailbox_a, recipients=None, recipients_csv=csv_text),
        token=token_a,
        key="k5",
    )

    problem = response.json()
    assert (response.status_code, problem["code"]) == (422, "recipients_invalid")
    assert [(e["field"], e["row"]) for e in problem["errors"]] == [("recipients_csv.address", 7345)]
    assert "U+00A0 NO-BREAK SPACE" in problem["errors"][0]["message"]
    assert not Broadcast.objects.exists()
