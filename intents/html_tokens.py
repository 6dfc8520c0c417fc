"""HTML split as the WHATWG tokenizer splits it, the few states that decide where a tag and a
comment begin and end, in one linear pass: a tag's name, attributes and end (``tag``), a
comment's end (``comment_end``). Pure. ``intents.broadcast_html`` checks a template's
placeholders with it; ``intents.html_styles.html_words`` reads a body's text with it;
``intents.html_hidden`` what an element that its style hides holds. Python 3.13.0's
``html.parser`` took 21 s for 40 KB of "<a "."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The tokenizer's runs: a tag name, what separates attributes, an attribute name (its first
# character may be "="), spaces, an unquoted value.
_TAG_NAME = re.compile(r"[^\t\n\f\r />]*")
_SEPARATORS = re.compile(r"[\t\n\f\r /]*")
_ATTRIBUTE_NAME = re.compile(r".[^\t\n\f\r />=]*", re.DOTALL)
_SPACES = re.compile(r"[\t\n\f\r ]*")
_UNQUOTED = re.compile(r"[^\t\n\f\r >]*")


# A browser lower-cases tag and attribute names in ASCII only: str.lower() also turns a Kelvin
# sign into "k" and "À" into "à", names a browser keeps apart.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    name_start: int
    name_end: int
    start: int  # of the value, in the template
    end: int
    quoted: bool


@dataclass(frozen=True)
class Tag:
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
    before/after attribute name, attribute value quoted or not, self-closing)."""
    n = len(text)
    name_end = _run_end(_TAG_NAME, text, start)
    name = text[start:name_end].translate(_ASCII_LOWER)
    attributes: list[Attribute] = []
    i = name_end
    while True:
        i = _run_end(_SEPARATORS, text, i)
        if i >= n:
            return Tag(name, name_end, n, False, attributes)
        if text[i] == ">":
            return Tag(name, name_end, i + 1, True, attributes)
        attribute_start = i
        i = attribute_end = _run_end(_ATTRIBUTE_NAME, text, i)
        attribute = text[attribute_start:attribute_end].translate(_ASCII_LOWER)
        j = _run_end(_SPACES, text, i)
        if j >= n or text[j] != "=":
            attributes.append(Attribute(attribute, attribute_start, attribute_end, i, i, False))
            i = j
            continue
        j = _run_end(_SPACES, text, j + 1)
        if j < n and text[j] in "\"'":
            close = text.find(text[j], j + 1)
            if close == -1:
                return Tag(name, name_end, n, False, attributes)
            attributes.append(
                Attribute(attribute, attribute_start, attribute_end, j + 1, close, True)
            )
            i = close + 1
            continue
        i = _run_end(_UNQUOTED, text, j)
        attributes.append(Attribute(attribute, attribute_start, attribute_end, j, i, False))
