"""Values that become email headers: subjects, display names, message ids, addresses.

CR and LF are not the only line breaks. ``str.splitlines()`` (which Python's ``email`` package
uses) and other mail software also break lines at VT, FF, the file/group/record separators, NEL
and the Unicode line and paragraph separators; a subject holding one of them can end up as two
header lines, the second one written by whoever chose the subject. Every value that becomes a
header is refused if it holds any of them.

Nor is a line the only way a header says other than it holds: an RFC 2047 encoded word
(``=?utf-8?B?...?=``) in a subject is decoded by the reader's mail client, and by Python's
``email`` package when a sender sets the header from text, into words the person who approved
the subject never read (``encoded_word_in``).
"""

from __future__ import annotations

import re

_NAMES = {
    "\n": "LF",
    "\r": "CR",
    "\v": "VT",
    "\f": "FF",
    "\x1c": "FILE SEPARATOR",
    "\x1d": "GROUP SEPARATOR",
    "\x1e": "RECORD SEPARATOR",
    "\x85": "NEXT LINE",
    "\u2028": "LINE SEPARATOR",
    "\u2029": "PARAGRAPH SEPARATOR",
}
_LINE_BREAK = re.compile("[" + "".join(_NAMES) + "]")


def line_break_in(value: str) -> str | None:
    """The first line break in ``value``, named for a person (``U+2028 LINE SEPARATOR``), or None."""
    found = _LINE_BREAK.search(value)
    if found is None:
        return None
    char = found.group()
    return f"U+{ord(char):04X} {_NAMES[char]}"


# An RFC 2047 encoded word: "=?" charset (and language) "?" B or Q "?" text "?=", as leniently
# as mail clients and Python's email package decode one (any case, any charset name).
_ENCODED_WORD = re.compile(r"=\?[^?\s]+\?[bq]\?[^?\s]*\?=", re.IGNORECASE)


def encoded_word_in(value: str) -> str | None:
    """The first RFC 2047 encoded word in ``value`` (at most 80 characters of it), or None."""
    found = _ENCODED_WORD.search(value)
    return None if found is None else found.group()[:80]
