"""Cells of CSV exports (the console's, a broadcast's recipients), safe to open in a spreadsheet."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator


def csv_safe(value: str) -> str:
    """A cell starting with = + - @ (or a tab or CR before one) is a formula in spreadsheet apps
    (CSV injection, OWASP): prefix it with a quote so it stays text."""
    if value and value[0] in "=+-@\t\r":
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
