"""Text drawn in the colour of what is behind it (``same_colour_text``): white on a white cell,
``color:#fefefe`` in a ``bgcolor="#ffffff"`` table. The frame shows the reviewer nothing there,
while an inbox preview, a screen reader and a client that drops the colours give the customer
the words. Pure; ``intents.html_styles`` asks it for its hidden-text look.

Read as far as the colours can be known from the body itself: a colour or background of the
element's own style attribute, its ``bgcolor``, ``<font color>``, ``<body text>``, inherited down
the elements open around the text, a link's own colour, and the page's white and black where
nothing is set. Where a ``<style>`` rule may set a colour or a background on an element between
(it names ``color`` or ``background``), which is known only by drawing it, the text warns only
where the colours come from the element that holds it.

Words a box paints over (``html_cover.placement``: a wordless box with a background pulled up
over them or positioned out of the flow, a background over words of a negative z-index) are
read in the same walk.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache

from intents.css_colours import BLACK as _BLACK
from intents.css_colours import UNKNOWN as _UNKNOWN
from intents.css_colours import WHITE as _WHITE
from intents.css_colours import Colour, colour
from intents.css_colours import background as _background
from intents.css_colours import legacy_colour as _legacy_colour
from intents.css_colours import lightness as _lightness
from intents.css_colours import over as _over
from intents.html_cover import Placement, placement
from intents.html_hidden import has_words
from intents.html_tokens import END_TAG, RAW_TEXT, START_TAG, Tokens

# A colour no closer than this to the background, in every channel of 0 to 255, is taken as
# seen: #f0f0f0 on white is not, #e0e0e0 is.
_SAME = 24.0
_VOID = frozenset(
    {
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr",
    }
)  # fmt: skip
# Start tags that end an open element of the parser's: a cell ends a cell, a row a row, an item
# an item, a block a paragraph (within the table around them).
_ENDS = {
    "td": ("td", "th"), "th": ("td", "th"), "tr": ("td", "th", "tr"), "li": ("li",),
    "option": ("option",), "dd": ("dd", "dt"), "dt": ("dd", "dt"),
}  # fmt: skip
_ENDS_P = frozenset(
    {
        "address", "article", "aside", "blockquote", "div", "dl", "fieldset", "figure", "footer",
        "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main", "nav", "ol", "p",
        "pre", "section", "table", "ul",
    }
)  # fmt: skip
_TABLE = frozenset({"table", "td", "th"})
_DECLARATION = re.compile(
    r"(?<![\w-])(-webkit-text-fill-color|color|background-color|background)\s*:([^;]*)"
)


_LINK = "link"
_STYLE_ELEMENT = re.compile(r"<style\b[^>]*>(.*?)(?:</style|\Z)", re.DOTALL | re.IGNORECASE)
_RULE_COLOUR = re.compile(r"(?<![\w-])color\s*:")
_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.DOTALL)
# Elements that end where the page does not say, closed by a "/>" only in SVG and MathML.
_HTML_CONTAINERS = (
    _ENDS_P
    | frozenset(_ENDS)
    | frozenset(
        {"a", "b", "body", "center", "em", "font", "html", "i", "span", "strong", "tbody", "u"}
    )
)


# What a box that covers words (``html_cover``) sets, as written.
_MAY_COVER = re.compile(
    r"position\s*:\s*(?:relative|sticky|absolute|fixed)|inline-(?:block|table|flex|grid)"
)
# A filter that changes colours, not their lightness much: what it draws is compared by
# lightness (``_lightness``), where red on a green as light turns grey on grey.
_COLOUR_FILTER = re.compile(r"(?:grayscale|sepia|saturate|hue-rotate)\(")


def _own(found_tag, body: str) -> tuple:
    """The element's own (fill, colour, background): a colour, ``_UNKNOWN``, or None (not set);
    whether its style filters colours (``_COLOUR_FILTER``); how it is painted against the words
    around it (``html_cover.placement``, of its first style attribute, the one a browser keeps)."""
    fill: Colour | str | None = None
    text: Colour | str | None = None
    back: Colour | str | None = None
    styles = [body[a.start : a.end] for a in found_tag.attributes if a.name == "style"]
    heights = [body[a.start : a.end] for a in found_tag.attributes if a.name == "height"]
    placed = _style_placement(styles[0], heights[0] if heights else None) if styles else _NOWHERE
    for attribute in found_tag.attributes:
        value = html.unescape(body[attribute.start : attribute.end]).lower()
        if attribute.name == "bgcolor" and found_tag.name in ("body", "table", "tr", "td", "th"):
            back = _legacy_colour(value)
        elif (attribute.name, found_tag.name) in (("color", "font"), ("text", "body")):
            text = _legacy_colour(value)
        elif attribute.name == "href" and found_tag.name == "a":
            text = text or _LINK
    grey = False
    for attribute in found_tag.attributes:
        if attribute.name == "style":
            written = body[attribute.start : attribute.end]
            for index, found in _style_colours(written):
                if index == 0:
                    fill = found
                elif index == 1:
                    text = found
                else:
                    back = found
            grey = grey or bool(_COLOUR_FILTER.search(html.unescape(written).lower()))
    return fill, (_UNKNOWN if text == _LINK else text), back, grey, placed


@lru_cache(maxsize=1024)
def _style_placement(written: str, height: str | None) -> Placement:
    css = _COMMENT.sub(" ", html.unescape(written).lower())
    return placement(css, height=None if height is None else html.unescape(height))


@lru_cache(maxsize=1024)
def _style_colours(written: str) -> tuple[tuple[int, Colour | str | None], ...]:
    """What a style attribute's value, as written, sets, in order: (0 for the text fill, 1 for
    the colour, 2 for the background, the value). Kept per value: a template repeats the same
    few styles on every row."""
    css = _COMMENT.sub(" ", html.unescape(written).lower())
    found: list[tuple[int, Colour | str | None]] = []
    for name, value in _DECLARATION.findall(css):
        value = value.replace("!important", "").strip()
        if name == "background":
            found.append((2, _background(value)))
        elif name == "background-color":
            found.append((2, colour(value) or _UNKNOWN))
        elif value not in ("inherit", "unset"):
            if name == "color":
                found.append((1, colour(value) or _UNKNOWN))
            else:
                found.append((0, None if value == "currentcolor" else colour(value) or _UNKNOWN))
    return tuple(found)


def _inherited(value, parent, by_rules: bool):
    """An element's value of a property that inherits, from its own (``value``) and its
    parent's (``parent``); None where it is not known (a rule may set it on an element
    between)."""
    if value == _UNKNOWN:
        return None
    if value is not None:
        return value
    return None if by_rules else parent


def _behind(value, parent: Colour | None, by_rules: bool) -> Colour | None:
    """The colour behind an element's text, from its own background (``value``) and the colour
    behind its parent's (``parent``): its backgrounds composed down to the page's white."""
    if value == _UNKNOWN or (value is None and by_rules):
        return None
    if value is None or value[3] <= 0:
        return parent
    if value[3] >= 1:
        return value
    return None if parent is None else _over(value, parent)


# How an element's text is drawn, computed when it is opened from its own values and its
# parent's, so that reading a text does not walk the elements around it: a body of thousands
# of open elements is read in linear time. (fill, colour, colour behind, whether a filter
# turns it grey); under the first, the page's own, or unknown where a rule may set it.
def _computed(own: tuple, parent: tuple | None, rules: tuple[bool, bool, bool, bool]) -> tuple:
    by_fill, by_colour, by_background, _grey_by_rules = rules
    if parent is None:
        parent = (
            None if by_fill else "none",
            None if by_colour else _BLACK,
            None if by_background else _WHITE,
            False,
        )
    fill, text, back, grey = own[:4]
    return (
        _inherited(fill, parent[0], by_fill),
        _inherited(text, parent[1], by_colour),
        _behind(back, parent[2], by_background),
        grey or parent[3],
    )


def _unseen(stack: list, rules: tuple[bool, bool, bool, bool]) -> bool:
    fill, text, back, greyed = stack[-1][7]
    if fill != "none":
        text = fill
    if back is None or text is None:
        return False
    drawn = _over(text, back)
    if (rules[3] or greyed) and abs(_lightness(drawn) - _lightness(back)) <= _SAME:
        return True
    return max(abs(d - b) for d, b in zip(drawn[:3], back[:3], strict=True)) <= _SAME


_NOWHERE = Placement(False, False, False, False)


def _opaque(element) -> bool:
    back = element[3]
    return isinstance(back, tuple) and back[3] >= 0.9


# How far up a box of a negative z-index looks for a background over it: a body of thousands
# of them nested is read in linear time.
_MAX_COVER_DEPTH = 64


def _sunk(stack: list, placed: Placement) -> bool:
    """Whether the text of an element about to be opened (``placed``) over ``stack`` is in a box
    of a negative z-index (``Placement.sinks``, its own or inherited) that an element's
    background between it and the root of its stacking context covers (the page's <body> and
    <html> paint the canvas, under it)."""
    if not placed.sinks:
        return bool(stack) and stack[-1][6]
    for element in reversed(stack[-_MAX_COVER_DEPTH:]):
        if element[0] in ("html", "body") or element[5].stacks:
            # The root of the stacking context paints its background under the sunk box.
            return False
        if _opaque(element):
            return True
    return False


class _Covers:
    """The boxes open at the place read that a browser paints over words (``Placement``: lifted
    over the words before it, or floating over any) with a background of their own, and whether
    each holds words: one that holds none is there to cover; a card that holds its own text
    overlaps a header's padding as often as not, which only drawing tells."""

    def __init__(self):
        # [depth, words before it, floating, words in it, where the last words before it are]
        self.open: list[list] = []
        self.words = False
        self.floating_without_words = False
        self.last_words: tuple[int, int] | None = None
        # Where the words are that a box closed covers (``same_colour_spans``); None for a box
        # placed anywhere, over words only drawing tells.
        self.covered: list[tuple[int, int] | None] = []

    def opened(self, depth: int, element) -> None:
        placed = element[5]
        if (placed.lifted or placed.floating) and _opaque(element):
            self.open.append([depth, self.words, placed.floating, False, self.last_words])

    def text(self, span: tuple[int, int] | None = None) -> bool:
        """Words were read (at ``span``, where told): whether a box found before covers them."""
        self.words = True
        self.last_words = span
        if self.open:
            # The boxes around it are told when it closes.
            self.open[-1][3] = True
        return self.floating_without_words

    def closed(self, depth: int, *, every: bool = False) -> bool:
        """The stack is ``depth`` deep: whether a box closed covers words; with ``every``, each
        one closed is read, and where its words are kept (``covered``)."""
        found = False
        while self.open and self.open[-1][0] > depth:
            _, words_before, floating, words_in, last_words = self.open.pop()
            if words_in:
                if self.open:
                    self.open[-1][3] = True
                continue
            if floating:
                self.floating_without_words = True
                if self.words:
                    found = True
                    self.covered.append(None)
            elif words_before:
                found = True
                self.covered.append(last_words)
            if found and not every:
                return True
        return found


# How far down the open elements an end tag, or a start tag that ends one, looks for it: one
# further down is taken as still open (a body of thousands of them is read in linear time).
_MAX_STEPS = 64


def _close(stack: list, names, boundaries) -> None:
    for index in range(len(stack) - 1, max(len(stack) - 1 - _MAX_STEPS, -1), -1):
        if stack[index][0] in names:
            del stack[index:]
            return
        if stack[index][0] in boundaries:
            return


# Every colour a text or a background may be given, as written (``_may_match``). Each starts
# with a lookahead of its first letters: tried at every space of a body, the alternation took
# most of a newsletter's check.
_TEXT_COLOURS = re.compile(
    r"(?=[-ct])(?:(?<![\w-])(?:-webkit-text-fill-)?color\s*:|(?<=[\s\"'/])(?:color|text)\s*=)"
    r"\s*[\"']?([^;\"'>]*)"
)
_BACKGROUNDS = re.compile(
    r"(?=b)(?:(?<![\w-])background(?:-color)?\s*:|(?<=[\s\"'/])bgcolor\s*=)\s*[\"']?([^;\"'>]*)"
)


def _may_match(text: str) -> bool:
    """Whether some colour the body gives a text (or black) is near some background it gives
    (or white): the reading below warns of nothing else, and a reply without either is not
    walked. One not read here (a translucent one, var()) may match anything."""
    texts = {_any_colour(value) for value in set(_TEXT_COLOURS.findall(text))} | {_BLACK}
    backs = {_any_colour(value) for value in set(_BACKGROUNDS.findall(text))} | {_WHITE}
    return any(
        t is None
        or b is None
        or max(abs(x - y) for x, y in zip(t[:3], b[:3], strict=True)) <= _SAME
        for t in texts
        for b in backs
    )


def _any_colour(value: str) -> Colour | None:
    found = _background(html.unescape(value).strip())
    return found if isinstance(found, tuple) and found[3] >= 1 else None


def same_colour_text(body: str, tokens: Tokens | None = None) -> bool:
    """Whether the body holds words drawn in (next to) the colour behind them, as far as the
    body's own attributes tell it (the module's docstring); ``tokens``: the body's, as another
    reading split it, or split here."""
    return _read(body, tokens, None)


def same_colour_spans(
    body: str, tokens: Tokens | None = None
) -> tuple[list[tuple[int, int]], bool]:
    """Where the words are that ``same_colour_text`` answers of, in the same reading gone on
    past the first: each run of them (words of the colour behind them, next to each other with
    only tags between, or the last words before a box pulled up over them), and whether every
    one was located (a box placed anywhere covers words only drawing tells). For the draft page
    only: the bulk approval's check stops at the first."""
    spans: list[tuple[int, int]] = []
    complete = True
    _read(body, tokens, spans)
    for span in spans:
        complete = complete and span != _SOMEWHERE
    return sorted({span for span in spans if span[0] >= 0}), complete


# Where words that a box placed anywhere covers are: not known; and a mark of words seen, which
# ends a run of unseen ones.
_SOMEWHERE = (-1, -1)
_SEEN = (-2, -2)


def _read(body: str, tokens: Tokens | None, spans: list[tuple[int, int]] | None) -> bool:
    """``same_colour_text``'s reading; with ``spans``, read to the end and each place kept there
    (``same_colour_spans``)."""
    lowered = body.lower()
    if not body or not (
        _COLOUR_FILTER.search(lowered) or _MAY_COVER.search(lowered) or _may_match(lowered)
    ):
        return False
    rules = _COMMENT.sub(" ", " ".join(_STYLE_ELEMENT.findall(body)).lower())
    by_rules = (
        "text-fill-color" in rules,
        bool(_RULE_COLOUR.search(rules)),
        "background" in rules,
        bool(_COLOUR_FILTER.search(rules)),
    )
    stack: list = []
    covers = _Covers()
    position = 0
    every = spans is not None
    for token in tokens or Tokens(body):
        if stack and has_words(body[position : token.start]):
            if spans is None:
                if _unseen(stack, by_rules) or stack[-1][6] or covers.text():
                    return True
            else:
                _kept(spans, (position, token.start), _unseen(stack, by_rules) or stack[-1][6])
                if covers.text((position, token.start)):
                    spans.append(_SOMEWHERE)
        position = token.end
        if token.kind == END_TAG:
            assert token.tag is not None  # a close tag's token carries its tag
            name = token.tag.name
            boundaries = (
                ()
                if name == "table"
                else _TABLE
                if name in ("td", "th", "tr")
                else (_TABLE | {"svg", "math"} - {name})
            )
            _close(stack, (name,), boundaries)
            if covers.closed(len(stack), every=every) and not every:
                return True
        elif token.kind == START_TAG:
            found_tag = token.tag
            assert found_tag is not None  # a start tag's token carries its tag
            name = found_tag.name
            if name in _ENDS:
                _close(stack, _ENDS[name], ("table",))
            if name in _ENDS_P:
                _close(stack, ("p",), _TABLE | {"button"})
            if (
                name not in RAW_TEXT
                and name not in _VOID
                and not (body.startswith("/>", found_tag.end - 2) and name not in _HTML_CONTAINERS)
            ):
                own = _own(found_tag, body)
                seen = _computed(own, stack[-1][7] if stack else None, by_rules)
                stack.append((name, *own, _sunk(stack, own[4]), seen))
                covers.opened(len(stack), stack[-1])
            if covers.closed(len(stack), every=every) and not every:
                return True
    if stack and has_words(body[position:]):
        if spans is None:
            if _unseen(stack, by_rules) or stack[-1][6] or covers.text():
                return True
        else:
            _kept(spans, (position, len(body)), _unseen(stack, by_rules) or stack[-1][6])
            if covers.text((position, len(body))):
                spans.append(_SOMEWHERE)
    if spans is None:
        return covers.closed(0)
    covers.closed(0, every=True)
    spans += [_SOMEWHERE if span is None else span for span in covers.covered]
    return bool(spans)


def _kept(spans: list[tuple[int, int]], span: tuple[int, int], unseen: bool) -> None:
    """Keep the words at ``span`` where they are unseen, with the run before them where only
    tags stand between (``same_colour_spans``); a run ends at words seen."""
    if not unseen:
        if spans and spans[-1] != _SEEN:
            spans.append(_SEEN)
    elif spans and spans[-1] not in (_SEEN, _SOMEWHERE):
        spans[-1] = (spans[-1][0], span[1])
    else:
        spans.append(span)
