"""Cells of CSV exports (the console's, a broadcast's recipients), safe to open in a spreadsheet."""

from __future__ import annotations


def csv_safe(value: str) -> str:
    """A cell starting with = + - @ (or a tab or CR before one) is a formula in spreadsheet apps
    (CSV injection, OWASP): prefix it with a quote so it stays text."""
    if value and value[0] in "=+-@\t\r":
        return "'" + value
    return value
