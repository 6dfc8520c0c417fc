"""Cells of CSV exports (the console's, a broadcast's recipients), safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator

FORMULA_LEADS = "=+-@\t\r"
# Excel opens a .csv with the locale's list separator, a semicolon where the decimal mark is a
# comma (German, Spanish), and then takes a quote only at a column's start: a cell's ";" ends a
# column and its line break a row, whatever the quotes, and the next column starts with what
# follows them.
# Spaces and double quotes before the lead too: Excel evaluates a quoted "=..." once it takes the
# quotes off, and a reader that trims spaces (an import option in Calc and Sheets) finds the lead.
_BEFORE_LEAD = '[ "\u00a0]*[=+\\-@\t\r]'
_BREAK_THEN_FORMULA = re.compile(r"([;\r\n])(?=" + _BEFORE_LEAD + ")")
_FORMULA_START = re.compile(_BEFORE_LEAD)


def csv_safe(value: str) -> str:
    """A cell starting with = + - @ (or a tab or CR before one, or spaces or a double quote) is
    a formula in spreadsheet apps (CSV injection, OWASP): prefix it with a quote so it stays
    text; so is what follows a semicolon or a line break in the cell (a column or a row of its
    own in a semicolon locale)."""
    value = _BREAK_THEN_FORMULA.sub(r"\1'", value)
    if _FORMULA_START.match(value):
        return "'" + value
    return value


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_lines(header: list[str], rows: Iterable[Iterable[str]]) -> Iterator[str]:
    """The header and the rows as CSV lines, one at a time (for a StreamingHttpResponse), every
    row's cell spreadsheet-safe: outsiders' text reaches every export."""
    writer = csv.writer(_Echo())
    yield writer.writerow(header)
    for cells in rows:
        yield writer.writerow([csv_safe(cell) for cell in cells])
