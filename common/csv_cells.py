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
# A tab too: a reader that splits on tabs (Calc's and Sheets' import offer it; a paste splits
# there) starts a column after it.
_BREAK_THEN_FORMULA = re.compile(r"([;\t\r\n])(?=" + _BEFORE_LEAD + ")")
_FORMULA_START = re.compile(_BEFORE_LEAD)


def csv_safe(value: str) -> str:
    """A cell starting with = + - @ (or a tab or CR before one, or spaces or a double quote) is
    a formula in spreadsheet apps (CSV injection, OWASP): prefix it with a quote so it stays
    text; so is what follows a semicolon, a tab or a line break in the cell (a column or a row
    of its own in a semicolon locale, or for a reader that splits on tabs)."""
    value = _BREAK_THEN_FORMULA.sub(r"\1'", value)
    if _FORMULA_START.match(value):
        return "'" + value
    return value


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_lines(header: list[str], rows: Iterable[Iterable[str]]) -> Iterator[str]:
    """The header and the rows as CSV lines, one at a time (for a StreamingHttpResponse), every
    row's cell spreadsheet-safe: outsiders' text reaches every export.

    A row with a tab in a cell is written with every cell quoted: the writer quotes only commas,
    quotes and line breaks, and a reader that splits on tabs cut such a cell in two. Only those
    rows, so the usual file stays as plain as it was (quoted or not, a CSV reader reads the same
    cells)."""
    writer = csv.writer(_Echo())
    quoted = csv.writer(_Echo(), quoting=csv.QUOTE_ALL)
    yield writer.writerow(header)
    for cells in rows:
        safe = [csv_safe(cell) for cell in cells]
        yield (quoted if any("\t" in cell for cell in safe) else writer).writerow(safe)
