"""One reading of a JSON text for every entry point that takes one from outside (the agent API's
body and its idempotency fingerprint, the MCP guard, the webhook receiver after verification).

Python's ``json`` is lenient where a second reader would see something else, so each of these is
refused here instead, with a stable ``code`` and, where the text has one, the member's path:

- ``duplicate_key``: ``{"to": [...], "to": [...]}``. RFC 8259 §4 leaves the meaning open; Python
  keeps the last, other parsers (and the human reading a log of the request) the first. A
  signature or a review over the raw bytes covers both values, only one would be used.
- ``not_utf8``: bytes that are not UTF-8, a byte order mark, or NUL bytes (UTF-16/32 text).
  ``json.loads`` guesses UTF-16 and UTF-32 from the first bytes and skips a BOM, whatever the
  ``Content-Type`` said; RFC 8259 §8.1 wants UTF-8 without a BOM between systems.
- ``not_finite``: ``NaN`` and ``Infinity`` (not JSON; Python takes them) and numbers beyond a
  float (``1e400`` reads as ``inf``); jsonb stores none of them.
- ``number_too_long``: an integer of more digits than Python converts
  (``sys.get_int_max_str_digits``), which ``json`` reported as a bare ``ValueError``.
- ``too_deep``: more than ``max_depth`` levels of objects and arrays (``json`` raises
  ``RecursionError``, not ``ValueError``, past about a thousand).
- ``too_many_values``: ``max_values`` items of arrays and members of objects or more, counted
  before the parse. The parse and the walks after it cost about half a microsecond per value,
  in Python: a 4.5 MB body of ``0,0,0,…`` (2.2 million values) took 1.2 s of CPU, and a token
  within its rate (120 a minute) could keep both cores of a small server busy with them.
- ``malformed``: anything else ``json`` refuses, trailing data after the value included.

Every check after parsing walks the value without recursion.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any


class JSONRefused(ValueError):
    """A JSON text refused whole: ``code`` (stable), ``message`` (safe to show: it never quotes
    the input beyond a key's path), ``field`` (``to[2]``, ``provenance.a``) or None."""

    def __init__(
        self, code: str, message: str, field: str | None = None, *, line: int | None = None
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.line = line  # of a ``malformed`` text, where the parser stopped


class _Duplicated(dict):
    """An object that named ``key`` more than once (kept only until the walk refuses it)."""

    key: str


class _Unreadable:
    """A number the walk refuses, with the code and words for it."""

    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message


def _duplicated(found: dict, pairs: list[tuple[str, Any]]) -> _Duplicated:
    duplicated = _Duplicated(found)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            duplicated.key = key
            break
        seen.add(key)
    return duplicated


def _constant(name: str):
    raise JSONRefused("not_finite", f"{name} is not valid JSON; numbers must be finite")


def _float(text: str, problems: list[object]) -> float | _Unreadable:
    value = float(text)
    if math.isfinite(value):
        return value
    unreadable = _Unreadable("not_finite", "numbers must be finite (this one is beyond a float)")
    problems.append(unreadable)
    return unreadable


def _int(text: str, problems: list[object]) -> int | _Unreadable:
    limit = sys.get_int_max_str_digits()
    if limit and len(text) > limit and len(text.lstrip("-")) > limit:
        unreadable = _Unreadable("number_too_long", f"integers may have at most {limit} digits")
        problems.append(unreadable)
        return unreadable
    return int(text)


# A refusal names a key, never the megabytes of one.
KEY_SHOWN = 100


def _shown(key: str) -> str:
    """A key as a path names it: cut after ``KEY_SHOWN`` characters, and an unpaired surrogate
    written as its JSON escape (``\\ud800``), which no UTF-8 answer can carry as it is: the API's
    refusal naming such a key was a 500."""
    if len(key) > KEY_SHOWN:
        key = key[:KEY_SHOWN] + "\u2026"
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def _path(parent: str | None, step: str | int) -> str:
    if isinstance(step, int):
        return f"{parent or ''}[{step}]"
    return f"{parent}.{_shown(step)}" if parent else _shown(step)


def _refused(code: str, message: str, field: str | None) -> JSONRefused:
    return JSONRefused(code, f"{field}: {message}" if field else message, field)


_CONTAINERS = frozenset({dict, list, _Duplicated})


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether objects and arrays nest more than ``limit`` levels: one level at a time, looking
    only at containers. (Exact type checks, not isinstance: a body of a million small objects
    is checked in a tenth of the time, well under its parse.)"""
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        append = below.append
        for item in level:
            if item:
                for child in item if type(item) is list else item.values():
                    if type(child) in _CONTAINERS:
                        append(child)
        level = below
    return False


def _first_problem(value: Any, problems: list[object]) -> JSONRefused:
    marked = {id(problem) for problem in problems}
    stack: list[tuple[Any, str | None]] = [(value, None)]
    while stack:
        item, field = stack.pop()
        if id(item) in marked:
            if isinstance(item, _Duplicated):
                key = _path(field, item.key)
                return _refused(
                    "duplicate_key", "this key appears more than once in its object", key
                )
            assert isinstance(item, _Unreadable)
            return _refused(item.code, item.message, field)
        if isinstance(item, dict):
            children = [(child, _path(field, key)) for key, child in item.items()]
        elif isinstance(item, list):
            children = [(child, _path(field, index)) for index, child in enumerate(item)]
        else:
            continue
        stack.extend(reversed(children))
    raise AssertionError("a marked node is always in the value it was parsed into")


def decode(body: bytes) -> str:
    """``body`` as UTF-8 text, or ``JSONRefused("not_utf8")``."""
    if b"\x00" in body:
        raise JSONRefused("not_utf8", "the body holds NUL bytes: send JSON as UTF-8 (not UTF-16)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONRefused(
            "not_utf8", f"the body is not UTF-8 (an invalid byte at offset {exc.start})"
        ) from None
    if text.startswith("\ufeff"):
        raise JSONRefused("not_utf8", "the body starts with a byte order mark; send UTF-8 without")
    return text


# Far above any body the product takes (a broadcast of 10,000 recipients with five variables
# each is about 60,000), far below a costly one (about 0.1 s of parse at the most).
MAX_VALUES = 200_000

# A JSON string: its quotes and what is between them, escapes included.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def values_over(text: str, limit: int) -> bool:
    """Whether the JSON text holds more than ``limit`` items of arrays and members of objects
    altogether, without parsing it. True whenever it has ``limit`` commas between values (one
    fewer than the values of each container), and only if it holds more than ``limit`` values.

    A count of commas (C speed) settles nearly every text. One with that many commas anywhere
    has its strings taken out and is counted again, unless it holds more than twice as many
    strings as ``limit``: a string is a member's key or a value, so it holds more values too."""
    if text.count(",") < limit:
        return False
    if (text.count('"') - text.count('\\"')) // 2 > 2 * limit:
        return True
    return _STRING.sub("", text).count(",") >= limit


def loads(body: bytes | str, *, max_depth: int, max_values: int = MAX_VALUES) -> Any:
    """The value of the JSON text ``body`` (UTF-8 bytes, or text already decoded), or
    ``JSONRefused`` for anything listed in this module's docstring."""
    text = decode(body) if isinstance(body, bytes) else body
    if values_over(text, max_values):
        raise JSONRefused(
            "too_many_values",
            f"the body holds more than {max_values:,} values (items of arrays and members of "
            "objects)",
        )
    problems: list[object] = []

    # Called for every object of the text: one frame, a dict as json would build it.
    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict:
        found = dict(pairs)
        if len(found) != len(pairs):
            found = _duplicated(found, pairs)
            problems.append(found)
        return found

    try:
        value = json.loads(
            text,
            object_pairs_hook=pairs_hook,
            parse_constant=_constant,
            parse_float=lambda number: _float(number, problems),
            parse_int=lambda number: _int(number, problems),
        )
    except JSONRefused:
        raise
    except RecursionError:
        raise JSONRefused("too_deep", f"the body nests more than {max_depth} levels deep") from None
    except json.JSONDecodeError as exc:
        # The parser's words and position only ("Extra data", "Expecting value"): never the input.
        raise JSONRefused(
            "malformed", f"{exc.msg} at line {exc.lineno} column {exc.colno}", line=exc.lineno
        ) from None
    if _deeper_than(value, max_depth):
        raise JSONRefused("too_deep", f"the body nests more than {max_depth} levels deep")
    if problems:
        raise _first_problem(value, problems)
    return value
