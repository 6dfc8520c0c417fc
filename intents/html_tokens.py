"""HTML split as the WHATWG tokenizer splits it, the few states that decide where a tag and a
comment begin and end, in one linear pass: a tag's name, attributes and end (``tag``), a
comment's end (``comment_end``). Pure. ``intents.broadcast_html`` checks a template's
placeholders with it; ``intents.html_styles.html_words`` reads a body's text with it;
``intents.html_hidden`` what an element that its style hides holds. Python 3.13.0's
``html.parser`` took 21 s for 40 KB of "<a "."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import NamedTuple

# The tokenizer's runs: a tag name; one attribute and what separates it from the one before (or
# the tag's ">"): its name (its first character may be "="), and its value after "=",
# double-quoted, single-quoted (an unclosed quote: no "_end") or not; each run possessive, as
# the tokenizer never gives a character back. A name without "=" stops before the spaces after
# it, which the next match skips. Neither a name nor a ">": the text ends.
_TAG_NAME = re.compile(r"[^\t\n\f\r />]*")
_ATTRIBUTE = re.compile(
    r"[\t\n\f\r /]*+(?:(?P<close>>)|(?P<name>.[^\t\n\f\r />=]*+)(?P<value>[\t\n\f\r ]*+="
    r"[\t\n\f\r ]*+(?:\"(?P<double>[^\"]*)(?P<double_end>\"?)|'(?P<single>[^']*)(?P<single_end>'?)"
    r"|(?P<unquoted>[^\t\n\f\r >]*)))?)",
    re.DOTALL,
)


# A browser lower-cases tag and attribute names in ASCII only: str.lower() also turns a Kelvin
# sign into "k" and "À" into "à", names a browser keeps apart.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


# Named tuples: a body of a megabyte makes tens of thousands of them, and a frozen dataclass
# takes several times as long to make.
class Attribute(NamedTuple):
    name: str
    name_start: int
    name_end: int
    start: int  # of the value, in the template
    end: int
    quoted: bool


class Tag(NamedTuple):
    name: str
    name_end: int
    end: int  # after its ">", or the template's end
    closed: bool  # False: the template ends inside it
    attributes: list[Attribute]


# Where a comment ends: "-->" or "--!>", whichever comes first (a match that starts first ends
# first). One search: finding each mark to the end of the text read the rest of a body of
# thousands of comments once per comment.
_COMMENT_END = re.compile(r"--!?>")


def comment_end(text: str, content: int) -> int:
    """After the comment whose text starts at ``content``: the earliest end a browser takes
    ("<!-->", "<!--->", "-->", "--!>"); a later one would leave markup to a browser unchecked."""
    if text.startswith(">", content):
        return content + 1
    if text.startswith("->", content):
        return content + 2
    found = _COMMENT_END.search(text, content)
    return len(text) if found is None else found.end()


def letter_at(text: str, position: int) -> bool:
    """Whether an ASCII letter is at ``position``, as a tag's name must start: "<" and "</"
    before any other character ("\u00e9" too) are text or a bogus comment to the first ">"."""
    character = text[position : position + 1]
    return character.isascii() and character.isalpha()


def _run_end(run: re.Pattern, text: str, position: int) -> int:
    """Where ``run`` (a pattern that also matches nothing) starting at ``position`` ends."""
    match = run.match(text, position)
    return match.end() if match else position


def tag(text: str, start: int) -> Tag:
    """The tag whose name starts at ``start``, split as the WHATWG tokenizer splits it (tag name,
    before/after attribute name, attribute value quoted or not, self-closing): each attribute
    read by one match of ``_ATTRIBUTE``."""
    n = len(text)
    name_end = _run_end(_TAG_NAME, text, start)
    name = text[start:name_end].translate(_ASCII_LOWER)
    attributes: list[Attribute] = []
    i = name_end
    while True:
        found = _ATTRIBUTE.match(text, i)
        if found is None or found.start("name") == -1:
            if found is not None and found.start("close") != -1:
                return Tag(name, name_end, found.end(), True, attributes)
            return Tag(name, name_end, n, False, attributes)
        attribute_start, attribute_end = found.span("name")
        attribute = found["name"].translate(_ASCII_LOWER)
        i = found.end()
        if found.start("value") == -1:
            attributes.append(Attribute(attribute, attribute_start, attribute_end, i, i, False))
        elif found.start("double") != -1 or found.start("single") != -1:
            quoted = "double" if found.start("double") != -1 else "single"
            if not found[quoted + "_end"]:
                return Tag(name, name_end, n, False, attributes)
            value_start, value_end = found.span(quoted)
            attributes.append(
                Attribute(attribute, attribute_start, attribute_end, value_start, value_end, True)
            )
        else:
            value_start, value_end = found.span("unquoted")
            attributes.append(
                Attribute(attribute, attribute_start, attribute_end, value_start, value_end, False)
            )


# The kinds of markup a ``Token`` is: a comment ("<!--"), a bogus comment or declaration ("<!",
# "<?", "</" and no letter: to its ">"), a close tag, a start tag, a "<" that is text.
COMMENT, BOGUS, END_TAG, START_TAG, LESS_THAN = range(5)
# Elements whose content a browser reads as text, to their close tag (all of it for
# <plaintext>): a start tag of one is read on from there.
RAW_TEXT = frozenset(
    {
        "iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style",
        "textarea", "title", "xmp",
    }
)  # fmt: skip


class Token(NamedTuple):
    kind: int
    start: int  # of its "<"
    end: int  # where the text after it starts: after a raw text element's content, its close tag
    tag: Tag | None  # a start or close tag's


def _raw_text_end(text: str, name: str, position: int) -> int:
    if name == "plaintext":
        return len(text)
    found = re.compile(rf"</{name}[\t\n\f\r />]", re.ASCII | re.IGNORECASE).search(text, position)
    return len(text) if found is None else found.start()


def _tokens(text: str):
    n = len(text)
    position = 0
    while (start := text.find("<", position)) != -1:
        after = text[start + 1 : start + 2]
        if text.startswith("<!--", start):
            position = comment_end(text, start + 4)
            yield Token(COMMENT, start, position, None)
        elif after in ("!", "?") or (after == "/" and not letter_at(text, start + 2)):
            close = text.find(">", start)
            position = n if close == -1 else close + 1
            yield Token(BOGUS, start, position, None)
        elif after == "/":
            found = tag(text, start + 2)
            position = found.end
            yield Token(END_TAG, start, position, found)
        elif after.isascii() and after.isalpha():
            found = tag(text, start + 1)
            position = found.end
            if found.name in RAW_TEXT:
                position = _raw_text_end(text, found.name, position)
            yield Token(START_TAG, start, position, found)
        else:
            position = start + 1
            yield Token(LESS_THAN, start, position, None)


class Tokens:
    """A body's markup in order (``Token``s; the text is what lies between one's ``end`` and the
    next one's ``start``), split once however many readings walk it: each iteration reads the
    same split from the start, and splits further only as far as one reading goes (a reading
    that stops at the first hidden words splits no further)."""

    def __init__(self, text: str):
        self.text = text
        self._source: Iterator[Token] = _tokens(text)

    def __iter__(self) -> Iterator[Token]:
        self._source, reading = itertools.tee(self._source)
        return reading
