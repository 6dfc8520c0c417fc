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


def control_in(value: str) -> str | None:
    """The first control character of ``value`` other than a tab (ESC, BEL, NUL...: C0, C1 and
    DEL) or an unpaired surrogate, as ``U+001B``, or None. None of these can be written in a
    header faithfully; line breaks are ``line_break_in``'s to name."""
    for char in value:
        code = ord(char)
        if (code < 0x20 and char != "\t") or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF:
            return f"U+{code:04X}"
    return None
