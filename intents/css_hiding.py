"""Which CSS hides an element's text from the frame, or writes text, as the reader-looks checks
read it (``intents.html_styles``): the declarations that hide (``HIDING_DECLARATION``, and
``HIDING_PICTURES`` for those that hide pictures too), a size computed to nothing, and a body's
var()s read as the values it defines for them (``StyleReading``). Pure; CSS is read as Chromium
reads it, its escapes and character references undone (``as_css_reads``).
"""

from __future__ import annotations

import html
import re

from intents.css_values import length_at_most

# A comment, to its end or, unclosed, to the end (as CSS reads one).
_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.DOTALL)

# A CSS escape: a backslash and one to six hex digits (and one whitespace after them), or a
# backslash and the character it stands for.
CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|(.))", re.DOTALL)


def css_unescaped(match: re.Match) -> str:
    if match[1] is None:
        return match[2]
    code = int(match[1], 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"


def as_css_reads(body: str) -> str:
    return CSS_ESCAPE.sub(css_unescaped, html.unescape(body)).lower()


# A zero as CSS writes a number (a sign, a fraction, an exponent: "-0", "0e5px").
_ZERO = r"[-+]?(?:0+(?:\.0*)?|\.0+)(?:e[-+]?\d+)?"
# A length of nothing or next to nothing: 0 in any unit, up to 3 px or pt, under 0.3 em, a
# number of a negative exponent.
_TINY = (
    r"(?:" + _ZERO + r"[a-z%]*|[0-3](?:\.\d*)?(?:px|pt)|0?\.[0-2]\d*(?:em|rem)"
    r"|(?:\d+(?:\.\d*)?|\.\d+)e-\d+[a-z%]*)(?![\w.])"
)
# A font size of next to nothing (about 4 px or less at the usual 16 px) in the units relative
# to a font, a window or a container, or physical; a percentage of the parent's size under 30.
_TINY_FONT = (
    r"(?:" + _TINY + r"|(?:(?:[0-2]?\d(?:\.\d*)?|\.\d+)%|0?\.[0-5]\d*r?(?:ex|ch)"
    r"|0?\.[0-2]\d*r?(?:cap|ic|lh)|0?\.\d+(?:[sld]?v(?:w|h|i|b|min|max)|cq(?:w|h|i|b|min|max))"
    r"|0?\.\d+mm|[0-3](?:\.\d*)?q|0?\.0\d*cm|0?\.0[0-3]\d*in|0?\.[0-2]\d*pc)(?![\w.]))"
)
# An offset that moves text out of the frame: left of its edge by a hundred units or more (where
# no scrolling shows it), or right of it or down by a page (a thousand pixels, a hundred of a
# font or window unit, 100 % of its box: the "text-indent:100%" of image replacement).
_FAR = (
    r"(?<![\w.])(?:-(?:\d{3,}|(?:\d+(?:\.\d*)?|\.\d+)e\+?[2-9])|\+?(?:\d{4,}|(?:\d+(?:\.\d*)?|\.\d+)e\+?[3-9]"
    r"|\d{3,}(?:\.\d*)?(?:%|r?(?:em|ex|ch|cap|ic|lh)|[sld]?v(?:w|h|i|b|min|max)"
    r"|cq(?:w|h|i|b|min|max)|pc|cm)|\d{2,}(?:\.\d*)?(?:cm|in)))"
)
_SIDES = r"(?:-(?:top|right|bottom|left|inline|block)(?:-start|-end)?)?"
# A colour's alpha of next to nothing (under a tenth), before the function's ")".
_NO_ALPHA = (
    r"(?:[-+]?0+(?:\.0*)?|[-+]?0*\.0\d*|\d(?:\.\d*)?%|0*\.\d+%"
    r"|(?:\d+(?:\.\d*)?|\.\d+)e-\d+%?|none)\s*\)"
)
# A declaration that hides its element's text from the frame (which a reader who ignores it,
# Outlook for Windows ignoring display:none, an inbox preview, a screen reader, still gets), or
# that writes text only a client with pseudo-elements shows (``content``). A value computed from
# a custom property, the environment or an attribute (``var()``, ``env()``, ``attr()``) is taken
# as hiding (a var() of a property the body defines is read as each value it may take:
# ``StyleReading``): which value it takes is known only by computing it, as what a transform,
# a filter (a blur, an opacity(0), a url() of an SVG filter), a mask or a blend mode leaves
# legible is known only by drawing it. A colour the same as its background, and a text stroke, are not
# read here: which colour is behind a text is known only by drawing it.
# Those that hide pictures too (all but a font size, a line height, a colour, a letter spacing).
_HIDING_BOXES = (
    r"display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)|opacity\s*:|mso-hide\s*:"
    r"|content\s*:|clip(?:-path)?\s*:|text-indent\s*:\s*-|transform\s*:|zoom\s*:"
    r"|content-visibility\s*:\s*hidden|(?:var|env|attr)\("
    r"|(?:scale|translate|rotate|filter|mask(?:-image|-box-image)?|mix-blend-mode|line-clamp)"
    r"\s*:\s*(?!(?:none|normal)\b)"
    r"|position\s*:\s*(?:absolute|fixed)|(?:max-)?(?:height|width|block-size|inline-size)\s*:\s*"
    + _TINY
    + r"|(?:(?:margin|padding|inset)"
    + _SIDES
    + r"|left|right|top|bottom|text-indent)\s*:[^;}:]*?"
    + _FAR
)
HIDING_DECLARATION = re.compile(
    r"(?<![\w-])(?:-(?:webkit|moz|ms|o)-)?(?:"
    + _HIDING_BOXES
    + r"|(?:font-size|line-height)\s*:\s*(?:"
    + _TINY_FONT
    + r"|(?:calc|min|max|clamp)\()"
    + r"|font\s*:[^;}:]*?(?:(?<![\w.#-])"
    + _TINY_FONT
    + r"|(?:calc|min|max|clamp)\()"
    + r"|letter-spacing\s*:\s*-(?!"
    + _TINY
    + r")\.?\d"
    + r"|(?:-webkit-text-fill-)?color\s*:\s*+(?:[^;}:]*?transparent"
    r"|#[0-9a-f]{3}[01](?![0-9a-f])|#[0-9a-f]{6}[01][0-9a-f](?![0-9a-f])"
    r"|(?:rgb|hsl)a?\((?:[^(),;}]*,){3}\s*" + _NO_ALPHA + r"|[^;}:/]*/\s*" + _NO_ALPHA + "))"
)
HIDING_PICTURES = re.compile(r"(?<![\w-])(?:-(?:webkit|moz|ms|o)-)?(?:" + _HIDING_BOXES + ")")
# A size given by a math function, which hides as a size of nothing does (``_TINY``) where it
# computes to at most that much whatever the box (``css_values.length_at_most``).
_COMPUTED_SIZE = re.compile(
    r"(?<![\w-])(?:-(?:webkit|moz|ms|o)-)?(?:max-)?(?:height|width|block-size|inline-size)"
    r"\s*:\s*(?=(?:calc|min|max|clamp)\()"
)
_TINY_PIXELS = 3.0


# A small angle (up to about 45 degrees), and declarations that leave every word where the frame
# draws it, legible: a rotation by one (a tilted badge), a filter that changes only colours (a
# grey logo; html_colours compares what it draws by lightness, where red on green turns grey on
# grey). Read as no declaration.
_SMALL_ANGLE = (
    r"[-+]?(?:(?:(?:[1-3]?\d|4[0-4])(?:\.\d*)?|45(?:\.0*)?|\.\d+)deg|0*\.[0-7]\d*rad"
    r"|0*\.(?:0\d*|1[0-2]\d*)turn|0+(?:\.0*)?)"
)
_LEGIBLE_DECLARATION = re.compile(
    r"(?<![\w-])(?:-(?:webkit|moz|ms|o)-)?(?:transform\s*:\s*(?:rotatez?\(\s*"
    + _SMALL_ANGLE
    + r"\s*\)\s*)+|rotate\s*:\s*"
    + _SMALL_ANGLE
    + r"\s*|filter\s*:\s*(?:(?:grayscale|sepia|saturate|hue-rotate)\(\s*"
    r"(?:\d+(?:\.\d*)?|\.\d+)(?:%|deg|rad|turn)?\s*\)\s*)+)(?:!important\s*)?(?=[;}]|\Z)"
)


def _hiding_css(css: str, declarations: re.Pattern) -> bool:
    """Whether CSS read as CSS reads it, without its comments, hides what ``declarations``
    says hides, or a size computed to nothing does."""
    if "rotate" in css or "filter" in css:
        css = _LEGIBLE_DECLARATION.sub(" ", css)
    return bool(declarations.search(css)) or any(
        length_at_most(css, found.end()) <= _TINY_PIXELS for found in _COMPUTED_SIZE.finditer(css)
    )


# A custom property's definition, in a rule or a style attribute (its value to the end of the
# declaration, or to a quote or an angle bracket: a value of the text of the message adds a
# candidate, never removes one), and a var() of one, with a fallback of no parentheses or none.
_CUSTOM_PROPERTY = re.compile(r"(?<![\w-])(--[\w-]+)\s*:([^;{}<>\"']*)")
_VAR = re.compile(r"var\(\s*(--[\w-]+)\s*(?:,([^()]*))?\)")
_DECLARATION_BOUNDS = re.compile(r"[;{}]")
# How many readings of one declaration its var()s may make (each takes a value defined for it,
# or its fallback); more is read as written, a var() that hides.
_MAX_VARIANTS = 16


def custom_properties(text: str) -> dict[str, frozenset[str]]:
    """Each custom property defined anywhere in a body read as CSS reads it, with every value
    written for it: which one reaches an element is known only by drawing it."""
    found: dict[str, set[str]] = {}
    for name, value in _CUSTOM_PROPERTY.findall(_COMMENT.sub(" ", text)):
        found.setdefault(name, set()).add(value.replace("!important", "").strip())
    return {name: frozenset(values) for name, values in found.items()}


def _variants(declaration: str, definitions: dict[str, frozenset[str]]) -> list[str]:
    """The declaration with each var() replaced by each value it may take: one defined for its
    property or, where none reaches the element, its fallback (or nothing: ``unset``). One of a
    property the body does not define, or defined by a var(), or too many, stays as written."""
    variants, done = [declaration], []
    while variants:
        variant = variants.pop()
        found = _VAR.search(variant)
        if found is None:
            done.append(variant)
            continue
        values = definitions.get(found[1])
        if not values or any("var(" in value for value in values):
            return [declaration]
        fallback = "unset" if found[2] is None else found[2]
        for value in values | {fallback}:
            variants.append(variant[: found.start()] + value + variant[found.end() :])
        if len(variants) + len(done) > _MAX_VARIANTS:
            return [declaration]
    return done


class StyleReading:
    """Whether a style hides, for one body: its var()s read as the values the body defines
    (``_variants``), each style value read once (a template repeats the same few styles on
    every row, and the reading of hidden text asks again of each one the search asked)."""

    def __init__(self, definitions: dict[str, frozenset[str]]):
        self.definitions = definitions
        self._read: dict[tuple[str, bool], bool] = {}

    def css(self, css: str, declarations: re.Pattern) -> bool:
        """Whether CSS read as CSS reads it, without its comments, hides (``_hiding_css``),
        a declaration of var()s where one of the values it may take does."""
        if "var(" not in css or not self.definitions:
            return _hiding_css(css, declarations)
        pieces = _DECLARATION_BOUNDS.split(css)
        return _hiding_css(";".join(p for p in pieces if "var(" not in p), declarations) or any(
            _hiding_css(variant, declarations)
            for piece in pieces
            if "var(" in piece
            for variant in _variants(piece, self.definitions)
        )

    def _value(self, value: str, pictures: bool) -> bool:
        key = (value, pictures)
        if key not in self._read:
            css = _COMMENT.sub(" ", as_css_reads(unquoted(value)))
            self._read[key] = self.css(css, HIDING_PICTURES if pictures else HIDING_DECLARATION)
        return self._read[key]

    def hiding(self, value: str) -> bool:
        """Whether a style attribute's value, as written, hides its element's text or writes
        text (``HIDING_DECLARATION``), read as CSS reads it."""
        return self._value(value, False)

    def hiding_pictures(self, value: str) -> bool:
        """Whether a style attribute's value, as written, hides pictures too
        (``HIDING_PICTURES``)."""
        return self._value(value, True)


def unquoted(value: str) -> str:
    """An attribute's value without the quotes around it (its own quotes stay)."""
    return value[1:-1] if len(value) > 1 and value[0] in "\"'" and value[-1] == value[0] else value
