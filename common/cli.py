"""Arguments of management commands, checked where argparse reads them, so a bad one is a usage
error naming the bound or the character (a CommandError from call_command) and nothing has run.

Numbers: ``--poll -1`` spun without pausing; a negative ``--batch`` failed inside every round,
forever; a huge one overflowed a query's bigint. Text: a byte that is not UTF-8 on the command line
reaches Python as a lone surrogate (``surrogateescape``), which psycopg cannot encode: a raw
UnicodeEncodeError from the first query.
"""

from __future__ import annotations

import argparse
import math

from common.text import control_in


def number(kind: type, *, least: float, above: bool = False, most: float | None = None):
    """An argparse type: ``kind`` at least ``least`` (or above it) and at most ``most``."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a number")
        if value < least or (above and value == least):
            bound = f"more than {least:g}" if above else f"at least {least:g}"
            raise argparse.ArgumentTypeError(f"{text} is not allowed: it must be {bound}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"{text} is not allowed: it must be at most {most:g}")
        return value

    return parse


def text(value: str) -> str:
    """An argparse type for free text that reaches the database, a URL or a message (an address,
    a slug): refused when it holds a control character (NUL included) or a byte that is not
    UTF-8. Not for file names, where such bytes are legitimate and the OS round-trips them."""
    found = control_in(value, tab=False)
    if found is None:
        return value
    code = int(found.removeprefix("U+"), 16)
    if 0xDC80 <= code <= 0xDCFF:
        byte = code - 0xDC00
        reason = f"the byte 0x{byte:02X}, which is not UTF-8 (check the terminal's encoding)"
    else:
        reason = f"{found}, a control character or an unpaired surrogate"
    raise argparse.ArgumentTypeError(f"it must be plain text but holds {reason}")
