"""Arguments of management commands: numbers checked where argparse reads them, so a bad one is a
usage error naming the bound (``--poll -1`` spun without pausing; a negative ``--batch`` failed
inside every round, forever; a huge one overflowed a query's bigint)."""

from __future__ import annotations

import argparse
import math


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
