"""Values that become email headers: subjects, display names, message ids, addresses.

CR and LF are not the only line breaks. ``str.splitlines()`` (which Python's ``email`` package
uses) and other mail software also break lines at VT, FF, the file/group/record separators, NEL
and the Unicode line and paragraph separators; a subject holding one of them can end up as two
header lines, the second one written by whoever chose the subject. Every value that becomes a
header is refused if it holds any of them.
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
