"""CSS values that the hidden-text checks compute rather than match (``intents.html_styles``):
the most a length computed by ``calc()``, ``min()``, ``max()`` or ``clamp()`` can be
(``length_at_most``). Pure; read from a body already lower-cased and unescaped as CSS reads it.
"""

from __future__ import annotations

import math
import re

# Pixels per unit of the absolute units, and of the font-relative ones at the usual 16 px.
_PX_PER_UNIT = {
    "": 1.0, "px": 1.0, "pt": 4 / 3, "pc": 16.0, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4,
    "q": 96 / 101.6, "em": 16.0, "rem": 16.0, "ex": 8.0, "rex": 8.0, "ch": 8.0, "rch": 8.0,
    "cap": 11.0, "rcap": 11.0, "ic": 16.0, "ric": 16.0, "lh": 19.0, "rlh": 19.0,
}  # fmt: skip
_TOKEN = re.compile(
    r"\s*(?:(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)(?P<unit>%|[a-z]+)?"
    r"|(?P<function>[a-z-]+)\(|(?P<operator>[-+*/(),]))"
)
_MAX_DEPTH = 32
_UNKNOWN = (-math.inf, math.inf)


class _Unreadable(Exception):
    pass


class _TooDeep(Exception):
    """Nested past ``_MAX_DEPTH``: Chromium computes math functions nested to 100 deep, and no
    template nests them past a few, so such a value is taken as the least it could be."""


class _Expression:
    """A recursive descent over a math function's tokens, each value an interval in pixels
    (a unitless number as itself): a percentage or a viewport or container unit is anywhere
    from 0 up, a function it does not know (``var()``) anything."""

    def __init__(self, text: str, start: int):
        self.text = text
        self.position = start
        self.depth = 0

    def _token(self) -> re.Match | None:
        return _TOKEN.match(self.text, self.position)

    def _take(self, operator: str) -> bool:
        found = self._token()
        if found is not None and found["operator"] == operator:
            self.position = found.end()
            return True
        return False

    def sum(self) -> tuple[float, float]:
        low, high = self._product()
        while True:
            if self._take("+"):
                other = self._product()
                low, high = low + other[0], high + other[1]
            elif self._take("-"):
                other = self._product()
                low, high = low - other[1], high - other[0]
            else:
                return low, high

    def _product(self) -> tuple[float, float]:
        value = self._factor()
        while True:
            if self._take("*"):
                other = self._factor()
                ends = [_times(a, b) for a in value for b in other]
                value = (min(ends), max(ends))
            elif self._take("/"):
                low, high = self._factor()
                if low <= 0 <= high:
                    value = _UNKNOWN
                else:
                    ends = [a / b for a in value for b in (low, high)]
                    value = (min(ends), max(ends))
            else:
                return value

    def _factor(self) -> tuple[float, float]:
        found = self._token()
        if found is None:
            raise _Unreadable
        self.position = found.end()
        if found["number"] is not None:
            unit = found["unit"] or ""
            if unit in _PX_PER_UNIT:
                value = float(found["number"]) * _PX_PER_UNIT[unit]
                return value, value
            return 0.0, math.inf
        if found["operator"] in ("-", "+"):
            low, high = self._factor()
            return (-high, -low) if found["operator"] == "-" else (low, high)
        if found["operator"] == "(":
            return self._nested(found["operator"])
        if found["function"] is not None:
            return self._nested(found["function"])
        raise _Unreadable

    def _nested(self, function: str) -> tuple[float, float]:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _TooDeep
        if function not in ("(", "calc", "min", "max", "clamp"):
            raise _Unreadable
        arguments = [self.sum()]
        while self._take(","):
            arguments.append(self.sum())
        if not self._take(")"):
            raise _Unreadable
        self.depth -= 1
        if function in ("(", "calc") and len(arguments) == 1:
            return arguments[0]
        if function == "min":
            return min(a[0] for a in arguments), min(a[1] for a in arguments)
        if function == "max":
            return max(a[0] for a in arguments), max(a[1] for a in arguments)
        if function == "clamp" and len(arguments) == 3:
            lowest, value, highest = arguments
            return max(lowest[0], min(value[0], highest[0])), max(
                lowest[1], min(value[1], highest[1])
            )
        raise _Unreadable


def _times(a: float, b: float) -> float:
    # A zero times a length of any size is zero ("calc(0 * 100%)").
    return 0.0 if a == 0 or b == 0 else a * b


def length_at_most(text: str, start: int = 0) -> float:
    """The most, in pixels, that the math function (``calc(``, ``min(``, ``max(``, ``clamp(``)
    at ``start`` of ``text`` can compute to, whatever the box, the window and the font (at 16 px)
    are; infinity where it cannot be read, 0 where it is nested too deep to read (``_TooDeep``).
    A length a property cannot take below 0 (a height, a width) is 0 where this is negative."""
    expression = _Expression(text, start)
    try:
        most = expression.sum()[1]
    except _TooDeep:
        return 0.0
    except (_Unreadable, RecursionError):
        return math.inf
    return math.inf if math.isnan(most) else most


_PLAIN_LENGTH = re.compile(r"([-+]?(?:\d+(?:\.\d*)?|\.\d+))([a-z]*)")


def plain_length(value: str) -> float | None:
    """A length written as a number and a unit of a known size (``_PX_PER_UNIT``, a font's at
    16 px; a bare number as pixels, as a page without a doctype reads it), in pixels; None for
    any other (a percentage, a viewport unit, a function)."""
    found = _PLAIN_LENGTH.fullmatch(value.strip())
    if found is None or found[2] not in _PX_PER_UNIT:
        return None
    return float(found[1]) * _PX_PER_UNIT[found[2]]
