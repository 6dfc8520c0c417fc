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

import colorsys
import html
import re
from functools import lru_cache

from intents.html_cover import Placement, placement
from intents.html_hidden import has_words
from intents.html_tokens import END_TAG, RAW_TEXT, START_TAG, Tokens

# CSS's named colours.
_NAMED = dict(
    entry.split(":")
    for entry in [
        "aliceblue:f0f8ff",
        "antiquewhite:faebd7",
        "aqua:00ffff",
        "aquamarine:7fffd4",
        "azure:f0ffff",
        "beige:f5f5dc",
        "bisque:ffe4c4",
        "black:000000",
        "blanchedalmond:ffebcd",
        "blue:0000ff",
        "blueviolet:8a2be2",
        "brown:a52a2a",
        "burlywood:deb887",
        "cadetblue:5f9ea0",
        "chartreuse:7fff00",
        "chocolate:d2691e",
        "coral:ff7f50",
        "cornflowerblue:6495ed",
        "cornsilk:fff8dc",
        "crimson:dc143c",
        "cyan:00ffff",
        "darkblue:00008b",
        "darkcyan:008b8b",
        "darkgoldenrod:b8860b",
        "darkgray:a9a9a9",
        "darkgreen:006400",
        "darkgrey:a9a9a9",
        "darkkhaki:bdb76b",
        "darkmagenta:8b008b",
        "darkolivegreen:556b2f",
        "darkorange:ff8c00",
        "darkorchid:9932cc",
        "darkred:8b0000",
        "darksalmon:e9967a",
        "darkseagreen:8fbc8f",
        "darkslateblue:483d8b",
        "darkslategray:2f4f4f",
        "darkslategrey:2f4f4f",
        "darkturquoise:00ced1",
        "darkviolet:9400d3",
        "deeppink:ff1493",
        "deepskyblue:00bfff",
        "dimgray:696969",
        "dimgrey:696969",
        "dodgerblue:1e90ff",
        "firebrick:b22222",
        "floralwhite:fffaf0",
        "forestgreen:228b22",
        "fuchsia:ff00ff",
        "gainsboro:dcdcdc",
        "ghostwhite:f8f8ff",
        "gold:ffd700",
        "goldenrod:daa520",
        "gray:808080",
        "green:008000",
        "greenyellow:adff2f",
        "grey:808080",
        "honeydew:f0fff0",
        "hotpink:ff69b4",
        "indianred:cd5c5c",
        "indigo:4b0082",
        "ivory:fffff0",
        "khaki:f0e68c",
        "lavender:e6e6fa",
        "lavenderblush:fff0f5",
        "lawngreen:7cfc00",
        "lemonchiffon:fffacd",
        "lightblue:add8e6",
        "lightcoral:f08080",
        "lightcyan:e0ffff",
        "lightgoldenrodyellow:fafad2",
        "lightgray:d3d3d3",
        "lightgreen:90ee90",
        "lightgrey:d3d3d3",
        "lightpink:ffb6c1",
        "lightsalmon:ffa07a",
        "lightseagreen:20b2aa",
        "lightskyblue:87cefa",
        "lightslategray:778899",
        "lightslategrey:778899",
        "lightsteelblue:b0c4de",
        "lightyellow:ffffe0",
        "lime:00ff00",
        "limegreen:32cd32",
        "linen:faf0e6",
        "magenta:ff00ff",
        "maroon:800000",
        "mediumaquamarine:66cdaa",
        "mediumblue:0000cd",
        "mediumorchid:ba55d3",
        "mediumpurple:9370db",
        "mediumseagreen:3cb371",
        "mediumslateblue:7b68ee",
        "mediumspringgreen:00fa9a",
        "mediumturquoise:48d1cc",
        "mediumvioletred:c71585",
        "midnightblue:191970",
        "mintcream:f5fffa",
        "mistyrose:ffe4e1",
        "moccasin:ffe4b5",
        "navajowhite:ffdead",
        "navy:000080",
        "oldlace:fdf5e6",
        "olive:808000",
        "olivedrab:6b8e23",
        "orange:ffa500",
        "orangered:ff4500",
        "orchid:da70d6",
        "palegoldenrod:eee8aa",
        "palegreen:98fb98",
        "paleturquoise:afeeee",
        "palevioletred:db7093",
        "papayawhip:ffefd5",
        "peachpuff:ffdab9",
        "peru:cd853f",
        "pink:ffc0cb",
        "plum:dda0dd",
        "powderblue:b0e0e6",
        "purple:800080",
        "rebeccapurple:663399",
        "red:ff0000",
        "rosybrown:bc8f8f",
        "royalblue:4169e1",
        "saddlebrown:8b4513",
        "salmon:fa8072",
        "sandybrown:f4a460",
        "seagreen:2e8b57",
        "seashell:fff5ee",
        "sienna:a0522d",
        "silver:c0c0c0",
        "skyblue:87ceeb",
        "slateblue:6a5acd",
        "slategray:708090",
        "slategrey:708090",
        "snow:fffafa",
        "springgreen:00ff7f",
        "steelblue:4682b4",
        "tan:d2b48c",
        "teal:008080",
        "thistle:d8bfd8",
        "tomato:ff6347",
        "turquoise:40e0d0",
        "violet:ee82ee",
        "wheat:f5deb3",
        "white:ffffff",
        "whitesmoke:f5f5f5",
        "yellow:ffff00",
        "yellowgreen:9acd32",
    ]
)
Colour = tuple[float, float, float, float]
_WHITE: Colour = (255.0, 255.0, 255.0, 1.0)
_BLACK: Colour = (0.0, 0.0, 0.0, 1.0)
# A colour no closer than this to the background, in every channel of 0 to 255, is taken as
# seen: #f0f0f0 on white is not, #e0e0e0 is.
_SAME = 24.0
_HEX = re.compile(r"#([0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})")
_FUNCTION = re.compile(r"(rgba?|hsla?)\(([^()]*)\)")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?%?")
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


def _channel(text: str, scale: float) -> float:
    return float(text[:-1]) * 2.55 if text.endswith("%") else float(text) * scale


def colour(value: str) -> Colour | None:
    """The colour a CSS value names (a hex, an rgb() or hsl(), a name, ``transparent``), as
    0-255 channels and an alpha; None for one not known here (``var()``, ``currentcolor``)."""
    value = value.strip()
    if value in _NAMED:
        code = _NAMED[value]
        return (int(code[:2], 16), int(code[2:4], 16), int(code[4:], 16), 1.0)
    if value == "transparent":
        return (0.0, 0.0, 0.0, 0.0)
    if found := _HEX.fullmatch(value):
        digits = found[1]
        if len(digits) <= 4:
            digits = "".join(c * 2 for c in digits)
        channels = [int(digits[i : i + 2], 16) for i in range(0, len(digits), 2)]
        alpha = channels[3] / 255 if len(channels) == 4 else 1.0
        return (channels[0], channels[1], channels[2], alpha)
    if found := _FUNCTION.fullmatch(value):
        numbers = _NUMBER.findall(found[2])
        if len(numbers) not in (3, 4):
            return None
        alpha = (
            _channel(numbers[3], 1.0) / (2.55 if numbers[3].endswith("%") else 1.0)
            if len(numbers) == 4
            else 1.0
        )
        if found[1].startswith("rgb"):
            r, g, b = (_channel(number, 1.0) for number in numbers[:3])
        else:
            hue = float(numbers[0].rstrip("%")) / 360 % 1
            light, saturation = (float(n.rstrip("%")) / 100 for n in (numbers[2], numbers[1]))
            r, g, b = (c * 255 for c in colorsys.hls_to_rgb(hue, light, saturation))
        return (r, g, b, min(max(alpha, 0.0), 1.0))
    return None


_UNKNOWN = "unknown"
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


def _legacy_colour(value: str) -> Colour | str | None:
    """An attribute's colour (``bgcolor``, ``<font color>``): a name or six hex digits, with or
    without "#", or "#" and three; any other spelling (which the legacy parser reads in its own
    way) is not known here."""
    value = value.strip()
    if value in _NAMED or value == "transparent":
        return colour(value)
    digits = value.removeprefix("#")
    if re.fullmatch(r"[0-9a-f]{6}", digits) or (value.startswith("#") and len(digits) == 3):
        return colour("#" + digits)
    return _UNKNOWN


def _background(value: str) -> Colour | str | None:
    if "gradient(" in value or "var(" in value or "image-set(" in value:
        return _UNKNOWN
    for word in re.findall(r"#[0-9a-f]+|(?:rgba?|hsla?)\([^()]*\)|[a-z]+", value):
        found = colour(word)
        if found is not None:
            return found
    return None


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
    fill = text = back = None
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
            for index, value in _style_colours(written):
                if index == 0:
                    fill = value
                elif index == 1:
                    text = value
                else:
                    back = value
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


def _over(top: Colour, bottom: Colour) -> Colour:
    a = top[3]
    return (*(a * t + (1 - a) * b for t, b in zip(top[:3], bottom[:3], strict=True)), 1.0)


def _lightness(colour_drawn: Colour) -> float:
    return 0.2126 * colour_drawn[0] + 0.7152 * colour_drawn[1] + 0.0722 * colour_drawn[2]


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
        self.open: list[list] = []  # [depth, words before it, floating, words in it]
        self.words = False
        self.floating_without_words = False

    def opened(self, depth: int, element) -> None:
        placed = element[5]
        if (placed.lifted or placed.floating) and _opaque(element):
            self.open.append([depth, self.words, placed.floating, False])

    def text(self) -> bool:
        """Words were read: whether a box found before covers them."""
        self.words = True
        if self.open:
            # The boxes around it are told when it closes.
            self.open[-1][3] = True
        return self.floating_without_words

    def closed(self, depth: int) -> bool:
        """The stack is ``depth`` deep: whether a box closed covers words."""
        while self.open and self.open[-1][0] > depth:
            _, words_before, floating, words_in = self.open.pop()
            if words_in:
                if self.open:
                    self.open[-1][3] = True
                continue
            if floating:
                self.floating_without_words = True
                if self.words:
                    return True
            elif words_before:
                return True
        return False


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
    for token in tokens or Tokens(body):
        if (
            stack
            and has_words(body[position : token.start])
            and (_unseen(stack, by_rules) or stack[-1][6] or covers.text())
        ):
            return True
        position = token.end
        if token.kind == END_TAG:
            name = token.tag.name
            boundaries = (
                ()
                if name == "table"
                else _TABLE
                if name in ("td", "th", "tr")
                else (_TABLE | {"svg", "math"} - {name})
            )
            _close(stack, (name,), boundaries)
            if covers.closed(len(stack)):
                return True
        elif token.kind == START_TAG:
            found_tag = token.tag
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
            if covers.closed(len(stack)):
                return True
    if (
        stack
        and has_words(body[position:])
        and (_unseen(stack, by_rules) or stack[-1][6] or covers.text())
    ):
        return True
    return covers.closed(0)
