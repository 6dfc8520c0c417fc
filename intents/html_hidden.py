"""Whether an HTML element that its own style hides holds words a reader could get
(``hidden_without_words``), with what a browser's parser holds in an element as far as it can
be told without building its tree: where it ends (never earlier than a browser ends it) and
what is words. Pure. ``intents.html_styles`` asks it of every element whose style attribute
hides it (``display:none``, ``font-size:0``): ordinary templates hide spacers that hold nothing
(``<td style="font-size:0;line-height:0">&nbsp;</td>``), which must not warn as hidden text,
and a preheader of words, which must."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from common.text import INVISIBLE_CHARACTERS
from intents.html_tokens import (
    BOGUS,
    COMMENT,
    END_TAG,
    RAW_TEXT,
    START_TAG,
    Tag,
    Tokens,
)

# What a reader gets nothing from: white space, the no-break and other spaces (&nbsp;, &ensp;,
# &thinsp;, &#8202;, not U+1680, which draws a stroke), and the characters nobody sees
# (``INVISIBLE_CHARACTERS``: a zero-width space, a bidi control), which count as no words here
# only because ``policy.invisible_in_content`` names them wherever the body holds them, on the
# same page and in the same bulk approval. Not a zero-width joiner or non-joiner, a soft hyphen,
# a combining grapheme joiner: nothing else names those, so they count as words.
_NO_WORDS = re.compile(
    r"[\t\n\f\r \xa0\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|" + INVISIBLE_CHARACTERS.pattern
)
# Attributes whose text a reader gets: an image's alt, a tooltip, what a screen reader reads of
# an element besides its text (its label, description, role, value, placeholder, braille
# label; a table's summary, a header cell's abbreviation), a field's value.
WORDS_ATTRIBUTES = frozenset(
    {
        "abbr", "alt", "aria-braillelabel", "aria-brailleroledescription", "aria-description",
        "aria-label", "aria-placeholder", "aria-roledescription", "aria-valuetext", "label",
        "placeholder", "summary", "title", "value",
    }
)  # fmt: skip
_VOID = frozenset(
    {
        "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "image",
        "img", "input", "keygen", "link", "meta", "param", "source", "track", "wbr",
    }
)  # fmt: skip
# Elements whose content a browser reads as text (``html_tokens.RAW_TEXT``): no tags in them. A
# <noscript> is one where scripts run; where they do not, a hiding style in it is one this
# reading did not reach as a tag, which html_styles warns of.
_RAW_TEXT = RAW_TEXT
# The WHATWG parser's "special" elements, and <svg> and <math>: a close tag of another kind
# ("any other end tag": <span>, <font>, <b>) that meets one of them is ignored.
_SPECIAL = frozenset(
    {
        "address", "annotation-xml", "applet", "area", "article", "aside", "base", "basefont",
        "bgsound", "blockquote", "body", "br", "button", "caption", "center", "col", "colgroup",
        "dd", "desc", "details", "dialog", "dir", "div", "dl", "dt", "embed", "fieldset",
        "figcaption", "figure", "footer", "foreignobject", "form", "frame", "frameset", "h1",
        "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "iframe", "img",
        "input", "keygen", "li", "link", "listing", "main", "marquee", "math", "menu", "meta",
        "mi", "mn", "mo", "ms", "mtext", "nav", "noembed", "noframes", "noscript", "object",
        "ol", "p", "param", "plaintext", "pre", "script", "search", "section", "select",
        "source", "style", "summary", "svg", "table", "tbody", "td", "template", "textarea",
        "tfoot", "th", "thead", "title", "tr", "track", "ul", "wbr", "xmp",
    }
)  # fmt: skip
# Elements a browser does not draw (its style sheet's display:none, a <dialog> without "open"),
# whose words a reader that does not draw them gets: a client without ruby reads <rp>'s
# parentheses, a preview or a screen reader a closed dialog's text, an SVG's description and
# metadata and the text of what SVG draws only where it is referenced (a <symbol> no <use>
# draws, a <clipPath>, a <mask>). Taken as hidden by a style.
HIDDEN_BY_DEFAULT = frozenset(
    {
        "annotation", "clippath", "datalist", "defs", "desc", "dialog", "filter", "lineargradient",
        "marker", "mask", "metadata", "noembed", "noframes", "pattern", "radialgradient", "rp",
        "symbol",
    }
)  # fmt: skip
# SVG's presentation attributes that hide as the declaration of their name does
# (``display="none"`` on a <text>), read as one.
PRESENTATION_ATTRIBUTES = frozenset({"display", "font-size", "opacity", "visibility"})
# Elements a browser draws in place of what they hold (its fallback, read by a client that
# plays no media, runs no plugin or draws no canvas, and by a preview): what they hold is taken
# as hidden, their own attributes (a poster, a title) as shown.
HIDDEN_CONTENT = frozenset({"audio", "canvas", "object", "video"})
# Special elements a close tag of theirs ends with what they hold ("generate implied end tags,
# pop until"), when no element of ``_SCOPE`` stands between (one of ``_SCOPE_MORE`` neither).
# Any other (a <form>, a <body>, which the close tag leaves open) is taken to hold the rest.
_CLOSED_WITH_CONTENT = frozenset(
    {
        "address", "applet", "article", "aside", "blockquote", "center", "dd", "desc", "dialog",
        "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "h1", "h2", "h3",
        "h4", "h5", "h6", "header", "hgroup", "li", "listing", "main", "marquee", "menu", "nav",
        "object", "ol", "p", "pre", "search", "section", "summary", "table", "tbody", "td",
        "tfoot", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
# The parser's scope boundaries (of every kind of scope, so more than any one), <select>,
# <svg> and <math>.
_SCOPE = frozenset(
    {
        "annotation-xml", "applet", "caption", "desc", "foreignobject", "html", "marquee",
        "math", "mi", "mn", "mo", "ms", "mtext", "object", "select", "svg", "table", "td",
        "template", "th", "title",
    }
)  # fmt: skip
_SCOPE_MORE = {"p": frozenset({"button"}), "li": frozenset({"ol", "ul"})}
# Where an <svg> or a <math> holds HTML elements, in which a browser reads its close tag as HTML
# does (ignored): an <annotation-xml> of HTML or SVG among them.
_INTEGRATION_POINTS = frozenset(
    {"annotation-xml", "desc", "foreignobject", "mi", "mn", "mo", "ms", "mtext", "title"}
)
# Elements the parser opens again after a close tag that ended them with an element around them
# (its list of active formatting elements): their own close tag then ends the copy.
_FORMATTING = frozenset(
    {"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u"}
)  # fmt: skip
# Attributes that load a picture (an <img>'s, an <input type=image>'s, a <video>'s poster, a
# cell's background), which may be one of words; an empty one or "data:," is none.
_PICTURE_ATTRIBUTES = frozenset({"background", "data", "poster", "src", "srcset"})
_NO_PICTURE = frozenset({"", "data:,"})
# A comment that Outlook reads as markup.
_CONDITIONAL_MARK = re.compile(r"\[\s*if\b|\[\s*endif\b", re.IGNORECASE)
# How deep a hidden element's content is followed (deeper is taken as hidden words), and how
# far down a close tag looks for its element: a body of a megabyte of close tags is read once.
_MAX_DEPTH = 256
_MAX_STEPS = 32


def has_words(text: str) -> bool:
    return bool(_NO_WORDS.sub("", html.unescape(text)))


# What an open element must not be, between a close tag and an element of its name, for the
# parser to end that element with it (``_blockers``).
_BLOCKERS_OF_CLOSED_WITH_CONTENT = {
    name: _SCOPE | _SCOPE_MORE.get(name, frozenset()) for name in _CLOSED_WITH_CONTENT
}


def _blockers(name: str) -> frozenset[str]:
    """The open elements that make the parser ignore a close tag of ``name``."""
    if name in _BLOCKERS_OF_CLOSED_WITH_CONTENT:
        return _BLOCKERS_OF_CLOSED_WITH_CONTENT[name]
    if name in ("svg", "math"):
        return _INTEGRATION_POINTS
    return _SPECIAL


def _close(
    open_elements: list[tuple[str, bool]],
    open_names: list[str],
    reopened: dict[str, int],
    name: str,
) -> None:
    """A close tag of ``name`` within a hidden element (``open_elements``: each one's name and
    whether its own style hides, the hidden one first; ``open_names``: their names): what it
    ends, and only what a browser ends with it; one it cannot tell of (an element of its name
    more than ``_MAX_STEPS`` down) is taken as ignored, so an element is never taken as ended
    before a browser ends it. A formatting element that a close tag around it ended is opened
    again by the parser, its style with it (``reopened``): a close tag of its name ends the
    copy first, and one whose style hides is never taken as ended. The nearest element of its
    name is found, and what stands above it checked, by list and set operations: a megabyte of
    close tags over a stack ``_MAX_STEPS`` deep is read in a fraction of a second."""
    if name not in _CLOSED_WITH_CONTENT and name in _SPECIAL and name not in ("svg", "math"):
        return
    if reopened.get(name):
        reopened[name] -= 1
        return
    window = open_names[-_MAX_STEPS:]
    if name not in window:
        return
    index = len(open_names) - 1 - window[::-1].index(name)
    if not _blockers(name).isdisjoint(open_names[index + 1 :]):
        return
    ended = open_elements[index + 1 :]
    if any(inner in _FORMATTING and hides for inner, hides in ended):
        return
    for inner, _hides in ended:
        if inner in _FORMATTING:
            reopened[inner] = reopened.get(inner, 0) + 1
    del open_elements[index:]
    del open_names[index:]


def _picture(body: str, found_tag: Tag) -> bool:
    return any(
        found.name in _PICTURE_ATTRIBUTES
        and html.unescape(body[found.start : found.end]).strip() not in _NO_PICTURE
        for found in found_tag.attributes
    )


def hidden_without_words(
    body: str,
    hides: Callable[[str], bool],
    hides_pictures: Callable[[str], bool],
    tokens: Tokens | None = None,
) -> frozenset[int] | None:
    """Where the name of each style attribute that hides its element (``hides``, given the
    attribute's value as written) starts, and the name of each start tag of
    ``HIDDEN_BY_DEFAULT`` and ``HIDDEN_CONTENT``, of the start tags read, when none of their
    elements holds words; None when one does. An element a browser does not draw is taken as
    one its style hides (pictures too); one it draws in place of what it holds (a <video>'s
    fallback) as holding a hidden element, its own attributes (a poster, a title) shown.

    A picture (``_PICTURE_ATTRIBUTES``: which may be one of words) counts as words where a
    style of its own or around it hides pictures too (``hides_pictures``: a ``display:none``,
    a ``max-height:0``, not a ``font-size:0``, under which the frame shows it). A <source> draws
    none of its own (``_Reading._draws_picture``): it gives its <picture>'s <img> one, a hidden
    video its frames.

    Words are what a reader who ignores the style (an inbox preview, a screen reader, Outlook
    for ``display:none``) gets: text other than spaces (``_NO_WORDS``), an alt, a title or a
    label (``WORDS_ATTRIBUTES``: a hidden image's alt is read by a screen reader), the text of
    an element nested in it (a child's own style does not show what its parent's
    ``display:none`` hides; a child's own font size under a parent's ``font-size:0``, the
    inline-block gap fix, may show its words, but which ones depends on where a browser ends
    the child, which this reading does not know as the browser does: they count as hidden), a
    conditional comment (Outlook's markup), a CDATA section. A hidden <html> or <body> holds the
    message, a hidden <textarea>, <title>, <script> or other raw text what it holds as text. A
    void element (<img>, <br>, <hr>) holds nothing but its attributes.

    Where a hidden element ends is read as a browser's parser ends it, or later, never earlier
    (``_close``): a ``</div>`` inside a ``<td>`` of it, a ``</span>`` inside a ``<div>`` of it
    are ignored; a ``</form>`` leaves what it holds open; formatting it ended is opened again.
    Read once, by the tokenizer's states (``intents.html_tokens``: ``tokens``, the body's as
    another reading split it, or split here): linear in the body."""
    reading = _Reading(tokens or Tokens(body), hides, hides_pictures)
    try:
        reading.read()
    except _HoldsWords:
        return None
    return frozenset(reading.hiding_styles)


def hidden_extents(
    body: str,
    hides: Callable[[str], bool],
    hides_pictures: Callable[[str], bool],
    tokens: Tokens | None = None,
) -> tuple[list[tuple[int, int]], frozenset[int] | None]:
    """Where the words are that make ``hidden_without_words`` answer None: the extent of each
    outermost hidden element that holds words (from its start tag, or after it for a media
    element's fallback, to its close tag as read there, or the end), in the same one reading,
    which goes on past the first; and the places that reading returns where it reaches the end
    (None where an element is nested too deep to follow: the rest is taken as hidden). For the
    draft page only: the bulk approval's check stops at the first words."""
    reading = _Reading(tokens or Tokens(body), hides, hides_pictures, collect=True)
    try:
        reading.read()
    except _HoldsWords:
        return [*reading.extents, (reading.run_start, len(body))], None
    return reading.extents, frozenset(reading.hiding_styles)


class _HoldsWords(Exception):
    """A hidden element holds words: the reading stops there."""


class _Reading:
    """The state of ``hidden_without_words``'s one pass over a body: the hidden elements open at
    the place read (and those open inside them), and the hiding styles and tags met."""

    def __init__(
        self,
        tokens: Tokens,
        hides: Callable[[str], bool],
        hides_pictures: Callable[[str], bool],
        *,
        collect: bool = False,
    ):
        self.tokens = tokens
        self.body = tokens.text
        self.hides = hides
        self.hides_pictures = hides_pictures
        self.open_elements: list[tuple[str, bool]] = []
        self.open_names: list[str] = []
        # Whether each open element's own style hides pictures, and how many of them do.
        self.picture_hiding: list[bool] = []
        self.pictures_hidden = 0
        self.reopened: dict[str, int] = {}
        self.hiding_styles: set[int] = set()
        # Whether a <source> of the <picture> read last gave its <img> a picture, and whether
        # the outermost open element is a media element entered for its fallback only.
        self.picture_sourced = False
        self.fallback_entry = False
        # Reading on past the words (``hidden_extents``): where the outermost hidden element
        # open starts, whether it holds words, and the extents of those that did.
        self.collect = collect
        self.run_start = 0
        self.run_words = False
        self.extents: list[tuple[int, int]] = []

    def _holds_words(self) -> None:
        if not self.collect:
            raise _HoldsWords
        self.run_words = True

    def _run_ended(self, end: int) -> None:
        if self.run_words:
            self.extents.append((self.run_start, end))
        self.run_words = False

    def read(self) -> None:
        body = self.body
        position = 0
        for token in self.tokens:
            self._text(position, token.start)
            position = token.end
            if token.kind == COMMENT:
                if self.open_elements and _CONDITIONAL_MARK.search(body, token.start, position):
                    self._holds_words()
            elif token.kind == BOGUS:
                if self.open_elements and body.startswith("<!", token.start):
                    self._holds_words()
            elif token.kind in (END_TAG, START_TAG):
                assert token.tag is not None  # a start or close tag's token carries its tag
                if token.kind == END_TAG:
                    self._end_tag(token.tag.name, position)
                else:
                    self._start_tag(token.start, token.tag)
            elif self.open_elements:
                self._holds_words()
        self._text(position, len(body))
        if self.open_elements:
            self._run_ended(len(body))

    def _text(self, start: int, end: int) -> None:
        if self.open_elements and has_words(self.body[start:end]):
            self._holds_words()

    def _open(self, name: str, hidden: bool, pictures: bool) -> None:
        self.open_elements.append((name, hidden))
        self.open_names.append(name)
        self.picture_hiding.append(pictures)
        self.pictures_hidden += pictures

    def _end_tag(self, name: str, end: int) -> None:
        if name == "picture":
            self.picture_sourced = False
        if not self.open_elements:
            return
        _close(self.open_elements, self.open_names, self.reopened, name)
        depth = len(self.open_elements)
        self.pictures_hidden -= sum(self.picture_hiding[depth:])
        del self.picture_hiding[depth:]
        if not self.open_elements:
            self.reopened.clear()
            self.fallback_entry = False
            self._run_ended(end)

    def _draws_picture(self, found_tag: Tag) -> bool:
        """Whether an element draws a picture (``_picture``) where pictures are hidden. A
        <source> draws none of its own: its srcset gives its <picture>'s <img> one, its src a
        video's frames, which a style hides and a video's fallback does not."""
        if found_tag.name == "source":
            if not _picture(self.body, found_tag) or self.open_names[-1:] != ["video"]:
                return False
            return self.pictures_hidden - (self.fallback_entry and len(self.open_names) == 1) > 0
        return _picture(self.body, found_tag) or (found_tag.name == "img" and self.picture_sourced)

    def _start_tag(self, start: int, found_tag: Tag) -> None:
        """Read a start tag at ``start`` (a raw text element's content is skipped by the
        tokens: where one is open, this has taken it as words)."""
        body, name, attributes = self.body, found_tag.name, found_tag.attributes
        hiding = [
            found.name_start
            for found in attributes
            if (found.name == "style" and self.hides(body[found.start : found.end]))
            or (
                found.name in PRESENTATION_ATTRIBUTES
                and self.hides(f"{found.name}:{body[found.start : found.end]}")
            )
        ]
        if name in HIDDEN_BY_DEFAULT or name in HIDDEN_CONTENT:
            self.hiding_styles.add(start + 1)
        hidden_by_default = name in HIDDEN_BY_DEFAULT and not (
            name == "dialog" and any(found.name == "open" for found in attributes)
        )
        hidden = bool(hiding) or hidden_by_default
        own_pictures_hidden = hidden_by_default or (
            hidden
            and any(
                found.name == "style" and self.hides_pictures(body[found.start : found.end])
                for found in attributes
            )
        )
        if not self.open_elements:
            self.run_start, self.run_words = start, False
        if hidden:
            self.hiding_styles.update(hiding)
            if name in ("html", "body"):
                self._holds_words()
        if name == "picture":
            self.picture_sourced = False
        elif name == "source" and _picture(body, found_tag):
            self.picture_sourced = True
        if name in HIDDEN_CONTENT and not (hidden or self.open_elements):
            self._open(name, True, True)
            self.fallback_entry = True
            self.run_start = found_tag.end
        elif hidden or self.open_elements:
            if name in _RAW_TEXT or any(
                found.name in WORDS_ATTRIBUTES and has_words(body[found.start : found.end])
                for found in attributes
            ):
                self._holds_words()
            if (self.pictures_hidden or own_pictures_hidden) and self._draws_picture(found_tag):
                self._holds_words()
            if name in _VOID and not self.open_elements:
                self._run_ended(found_tag.end)
            if name not in _VOID:
                self._open(name, hidden, own_pictures_hidden)
                if len(self.open_elements) > _MAX_DEPTH:
                    raise _HoldsWords
