"""The spreadsheet guard of every CSV export (audit log, analytics, a broadcast's recipients)."""

from __future__ import annotations

import csv
import io
import re

import pytest

from common.csv_cells import csv_lines, csv_safe

FORMULA = re.compile(r"""^[ "\u00a0]*[=+\-@\t\r]""")


@pytest.mark.parametrize(
    "value",
    [
        ' =HYPERLINK("http://evil.test")',
        '"=HYPERLINK(""http://evil.test"")"',
        '  "+1+cmd|" /C calc"!A0',
        "\u00a0@SUM(1)",
        "Support; =cmd|' /C calc'!A0",
        "Support;\"=cmd|' /C calc'!A0\"",
        "Mailbox full\n -2+3",
        'Mailbox full\r\n"@SUM(1)',
    ],
)
def test_a_formula_after_leading_spaces_or_a_quote_stays_text(value):
    """Found by an outside probe: the guard looked only at a column's first character, so a
    customer's subject or an agent's name of ' =HYPERLINK(...)' or '"=cmd|...', or the same
    after a ';' (a column of its own in German and Spanish Excel), passed as it was. Excel
    evaluates a quoted "=..." once it takes the quotes off, and a reader that trims spaces (an
    import option in Calc, Sheets) finds the '=' first."""
    line = "".join(csv_lines(["time", "actor"], [["2026-01-01", value]]))

    cell = next(csv.reader(io.StringIO(line.split("\r\n", 1)[1])))[1]
    columns = re.split(r"[;\r\n]", line)
    assert [c for c in columns if FORMULA.match(c.replace('""', '"'))] == []
    assert not FORMULA.match(cell)
    assert cell.replace("'", "") == value.replace("'", "")


@pytest.mark.parametrize("value", ["Re: order 42", "a - b", "x;y", "", "42", "Ana O'Neil"])
def test_text_without_a_formula_is_left_as_it_is(value):
    assert csv_safe(value) == value


@pytest.mark.parametrize(
    "value",
    ['Order 42\t=HYPERLINK("http://evil.test")', "a\t\t+1+1", 'x\t "@SUM(1)', "plain\ttext"],
)
def test_a_cell_holding_a_tab_is_quoted_and_what_follows_the_tab_stays_text(value):
    """A tab was neither quoted (the writer quotes only commas, quotes and line breaks) nor
    guarded when inside a cell: a reader that splits on tabs (Calc's and Sheets' import offer
    it, and a paste splits there) made '=HYPERLINK(...)' a column of its own, a formula."""
    line = "".join(csv_lines(["time", "actor"], [["2026-01-01", value]])).split("\r\n", 1)[1]

    cell = next(csv.reader(io.StringIO(line)))[1]
    columns = re.split(r"[;\t\r\n]", line)
    assert line.startswith('"2026-01-01","')
    assert [c for c in columns if FORMULA.match(c.replace('""', '"'))] == []
    assert cell.replace("'", "") == value.replace("'", "")
