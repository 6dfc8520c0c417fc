"""Where a box's own style makes a browser paint it over words, or words under a background
(``placement``). Pure; ``intents.html_colours`` asks it of each element it walks, for its
hidden-text look: a wordless box with a background pulled up over the words before it, or
placed anywhere (``position:absolute``), and words of a negative ``z-index`` under an element's
background, show the reviewer's frame the box, while an inbox preview, a screen reader and a
client that drops the styles give the customer the words.

Read as CSS 2.1's painting order (Appendix E) has it, and only where the style alone tells:
within a stacking context the backgrounds of blocks are painted first and the text of blocks
after them, so a block pulled up by a negative margin paints its background under the words it
overlaps (Chromium draws them); a positioned or inline-level box is painted after that text, so
its background covers them. A box without a background, a margin of a few pixels, a box of no
size it sets, a length computed by a function (``calc()``, ``var()``) cover nothing here.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from intents.css_values import plain_length

# A margin, an offset, of at most this many pixels moves a box over nothing a reader misses: a
# few pixels of an ordinary layout's overlap.
_FEW_PIXELS = 8.0
_DECLARATION = re.compile(r"(?<![\w-])([a-z-]+)\s*:([^;]*)")
_POSITIONED = frozenset({"relative", "sticky", "absolute", "fixed"})
_INLINE_LEVEL = frozenset({"inline-block", "inline-table", "inline-flex", "inline-grid"})
# What gives a box a size of its own, whatever it holds.
_SIZES = (
    "height", "min-height", "block-size", "min-block-size", "padding", "padding-top",
    "padding-bottom", "padding-block", "padding-block-start", "padding-block-end", "line-height",
)  # fmt: skip
# What makes an element the root of a stacking context: the words of a negative z-index in it
# are painted over its background.
_STACKING = re.compile(
    r"(?<![\w-])(?:opacity\s*:\s*(?:0?\.\d|0(?![.\d]))|(?:transform|filter|perspective|"
    r"clip-path|mask|mask-image|backdrop-filter|isolation|mix-blend-mode|contain|will-change)"
    r"\s*:\s*(?!none|normal|auto)[a-z0-9.(-])"
)


class Placement(NamedTuple):
    lifted: bool  # painted after the text before it, pulled up over it, with a size
    floating: bool  # positioned out of the flow, over whatever is where it is, with a size
    stacks: bool  # the root of a stacking context
    sinks: bool  # positioned under its stacking context's backgrounds (a negative z-index)


_NOWHERE = Placement(False, False, False, False)


def _declarations(css: str) -> dict[str, str]:
    """Each property the CSS sets, to its last value (``!important`` left out)."""
    return {
        name: value.replace("!important", "").strip() for name, value in _DECLARATION.findall(css)
    }


def _first(value: str | None) -> float | None:
    """A shorthand's first value (a margin's top) in pixels; None where it is not a plain
    length."""
    return plain_length(value.split()[0]) if value and value.split() else None


def placement(css: str, *, height: str | None = None) -> Placement:
    """How a box with this style (read as CSS reads it, lower-cased) and ``height`` attribute
    is painted against the words around it (the module's docstring)."""
    if not any(word in css for word in ("position", "inline-", "z-index")):
        return _NOWHERE
    declared = _declarations(css)
    position = declared.get("position", "static")
    positioned = position in _POSITIONED
    z_index = declared.get("z-index", "auto")
    sinks = positioned and z_index.startswith("-") and z_index[1:].isdigit() and z_index != "-0"
    stacks = (positioned and z_index != "auto") or bool(_STACKING.search(css))
    sized = (height is not None and (plain_length(height) or 0) > 0) or any(
        (_first(declared.get(name)) or 0) > 0 for name in _SIZES
    )
    if not sized and position in ("absolute", "fixed"):
        sized = ("top" in declared and "bottom" in declared) or "inset" in declared
    if not sized:
        return Placement(False, False, stacks, sinks)
    pulled = [
        _first(declared.get("margin")),
        _first(declared.get("margin-top")),
        _first(declared.get("margin-block-start")),
        _first(declared.get("margin-block")),
    ]
    if position in ("relative", "sticky"):
        bottom = _first(declared.get("bottom"))
        pulled += [_first(declared.get("top")), _first(declared.get("inset"))]
        pulled.append(None if bottom is None else -bottom)
    lifted = (positioned or declared.get("display") in _INLINE_LEVEL) and any(
        amount is not None and amount < -_FEW_PIXELS for amount in pulled
    )
    return Placement(lifted, position in ("absolute", "fixed"), stacks, sinks)
