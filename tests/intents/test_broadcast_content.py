"""A broadcast's recipient upload read from hostile input (intents/broadcast_content.py): every
row is stored as the uploader meant it or refused with a precise error, never silently changed
before the hash is taken. Found by an outside probe of broadcasts."""

from __future__ import annotations

import tracemalloc

import pytest

from intents import errors
from intents.broadcast_content import (
    MAX_VARIABLES,
    RecipientsInvalid,
    clean_recipients,
    parse_csv,
)
from intents.services.broadcasts import recipient_rows


def cleaned(rows):
    return clean_recipients(rows, used=set(), in_subject=set(), max_recipients=100)


def test_a_csv_row_with_an_unquoted_comma_is_refused_naming_it_not_stored_without_values():
    text = "address,name\r\nana@example.com,Ana\r\nbo@example.com,Smith, Bo\r\n"
    with pytest.raises(RecipientsInvalid) as caught:
        parse_csv(text)
    assert [(e.row, e.field) for e in caught.value.errors] == [(2, "columns")]
    assert "3 fields, the header 2" in caught.value.errors[0].message


def test_a_csv_header_naming_a_column_twice_is_refused():
    with pytest.raises(RecipientsInvalid) as caught:
        parse_csv("address,name,name\nana@example.com,Ana,Bo\n")
    assert "'name' twice" in caught.value.errors[0].message


def test_unnamed_empty_columns_a_spreadsheet_adds_are_ignored():
    """A spreadsheet's export often ends each line with commas: columns with no name and no
    value. They were refused on every row as "'' is not a variable name"."""
    rows = parse_csv("address,name,,\r\nana@example.com,Ana,,\r\nbo@example.com,Bo, ,\r\n")
    assert rows == [
        (1, "ana@example.com", {"name": "Ana"}),
        (2, "bo@example.com", {"name": "Bo"}),
    ]


def test_a_value_in_a_column_the_header_leaves_unnamed_is_refused_naming_row_and_column():
    with pytest.raises(RecipientsInvalid) as caught:
        parse_csv(",address,,name\n,ana@example.com,,Ana\n,bo@example.com,x,Bo\nc,c@example.com,,C")
    assert [(e.row, e.field) for e in caught.value.errors] == [(2, "columns"), (3, "columns")]
    assert "column 3" in caught.value.errors[0].message
    assert "column 1" in caught.value.errors[1].message


def test_an_address_with_a_full_width_letter_is_a_duplicate_of_the_plain_one():
    rows = [(1, "ana@example.com", {}), (2, "\uff21na@example.com", {})]
    with pytest.raises(RecipientsInvalid) as caught:
        cleaned(rows)
    assert [(e.row, e.field) for e in caught.value.errors] == [(2, "address")]
    assert "ana@example.com on row 1" in caught.value.errors[0].message


def test_a_duplicate_row_names_both_spellings_as_a_drafts_refusal_does():
    rows = [(1, "Ana@Example.com", {}), (2, "ana@example.com", {}), (3, " ana@EXAMPLE.com", {})]
    rows.append((4, "Ana@Example.com", {}))
    with pytest.raises(RecipientsInvalid) as caught:
        cleaned(rows)
    assert [(e.row, e.message) for e in caught.value.errors] == [
        (2, "ana@example.com is the same address as Ana@Example.com on row 1"),
        (3, "ana@EXAMPLE.com is the same address as Ana@Example.com on row 1"),
        (4, "Ana@Example.com is also on row 1"),
    ]


def test_a_list_and_a_csv_together_are_refused_not_one_of_them_dropped():
    with pytest.raises(errors.BroadcastRowsInvalid) as caught:
        recipient_rows(recipients=["ana@example.com"], recipients_csv="address\nbo@example.com\n")
    assert "not both" in caught.value.rows[0].message


def test_a_csv_header_with_more_columns_than_a_row_may_carry_is_refused_at_the_header():
    """A row holds at most MAX_VARIABLES variables besides its address, so such a header can
    never give a valid row: refused once, naming the count, not row by row."""
    names = ",".join(f"v{i}" for i in range(MAX_VARIABLES + 1))
    with pytest.raises(RecipientsInvalid) as caught:
        parse_csv(f"address,{names}\nana@example.com{',x' * (MAX_VARIABLES + 1)}\n")
    assert [(e.row, e.field) for e in caught.value.errors] == [(0, "recipients")]
    assert caught.value.errors[0].message == (
        f"the CSV header has {MAX_VARIABLES + 2} columns; at most {MAX_VARIABLES + 1} are "
        f"allowed (the address and {MAX_VARIABLES} variables)"
    )


def test_a_csv_whose_quoted_header_follows_a_byte_order_mark_is_read():
    """Spreadsheet exports as UTF-8 start with U+FEFF; before a quoted first column it was kept
    in the name (U+FEFF and both quotes), and the upload was refused as having no address
    column."""
    rows = parse_csv('\ufeff"address","name"\r\n"ana@example.com","Ana"\r\n')
    assert rows == [(1, "ana@example.com", {"name": "Ana"})]


def test_a_csv_quote_left_open_is_refused_naming_its_row_not_read_as_the_rest_of_the_file():
    """Read leniently, the quote opened on row 2 ran to the end of the file: rows 3 and 4 became
    the text of row 2's value, and the broadcast went to two recipients of four without a word."""
    text = 'address,note\nana@example.com,ok\nbo@example.com,"VIP\ncy@example.com,x\ndi@example.com,y\n'
    with pytest.raises(RecipientsInvalid) as caught:
        parse_csv(text)
    assert [(e.row, e.field) for e in caught.value.errors] == [(2, "columns")]
    assert "unreadable CSV" in caught.value.errors[0].message


def test_a_csv_value_with_text_after_its_closing_quote_is_refused_not_read_without_the_quotes():
    text = 'address,name\nana@example.com,"Ana" Smith\nbo@example.com,Bo\n'
    with pytest.raises(RecipientsInvalid) as caught:
        parse_csv(text)
    assert [(e.row, e.field) for e in caught.value.errors] == [(1, "columns")]


@pytest.mark.parametrize(
    ("header", "named"),
    [
        ("Address,name,address", "'Address' and 'address'"),
        ("email,name,Address", "'email' and 'Address'"),
    ],
)
def test_a_csv_header_with_two_address_columns_is_refused_not_one_taken_and_one_a_variable(
    header, named
):
    """Either name in any case is the address column; with two of them the first was taken
    as the recipients and the other kept as a variable, whichever the uploader meant."""
    with pytest.raises(RecipientsInvalid) as caught:
        parse_csv(f"{header}\nana@example.com,Ana,bo@example.com\n")
    assert [(e.row, e.field) for e in caught.value.errors] == [(0, "recipients")]
    assert named in caught.value.errors[0].message


def test_a_recipient_object_with_a_field_other_than_address_and_variables_is_refused():
    """The rest of the request refuses what it does not know; a recipient's "cc" (or a
    misspelt "variabels") was dropped without a word and the broadcast posted without it."""
    recipients = [
        {"address": "ana@example.com", "variables": {"name": "Ana"}},
        {"address": "bo@example.com", "cc": "boss@example.com"},
        {"address": "cy@example.com", "variabels": {"name": "Cy"}},
    ]
    with pytest.raises(errors.BroadcastRowsInvalid) as caught:
        recipient_rows(recipients=recipients)
    assert [(r.row, r.field) for r in caught.value.rows] == [(2, "cc"), (3, "variabels")]
    assert caught.value.total == 2


def test_a_csv_of_more_rows_than_a_broadcast_may_have_is_refused_as_it_is_read(settings):
    """Found by an outside probe: every row of the 5 MB a CSV may carry was read into a row of
    variables before the count was checked, so 390,000 rows cost the web worker two seconds and
    over 100 MB to refuse (a list of the allowed 10,000 takes a tenth of that). Past the limit
    the rows are only counted: the refusal names the count as it did."""
    settings.BROADCAST_MAX_RECIPIENTS = 100
    header = "address," + ",".join(f"v{i}" for i in range(10))
    text = header + "\n" + "".join(f"p{i}@example.com" + ",x" * 10 + "\n" for i in range(60_000))
    tracemalloc.start()
    try:
        with pytest.raises(errors.BroadcastRowsInvalid) as caught:
            recipient_rows(recipients_csv=text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(r.row, r.field) for r in caught.value.rows] == [(0, "recipients")]
    assert caught.value.rows[0].message == "at most 100 recipients (60000 given)"
    assert caught.value.source == "recipients_csv"
    # The reader's copy of the text (9 MB); the rows of variables took 26 MB more.
    assert peak < 15_000_000
