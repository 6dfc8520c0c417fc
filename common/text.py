"""Characters text may not hold where people read it or it becomes a header. ``control_in``
(subjects): control characters (NUL, ESC, BEL...) and unpaired surrogates, which cannot be
stored, shown or written in a header faithfully. ``unsafe_in_name`` (a name others read: an
agent token's, a passkey's, an inbox's display name): those, a tab, and the bidirectional
controls (U+202A-U+202E, U+2066-U+2069), which make a name display as something other than what
it holds; ``unsafe_in_text`` the same for text of several lines (a reason, a note), which may hold
tabs and line feeds. ``unseen_in`` (an address, which is a person's name on the pages when they gave none):
every character a reader cannot see or that reorders the others; ``unseen_shown`` writes them as
code points. ``invisible_characters`` (what a draft's subject and bodies say): the bidirectional
controls and the characters that draw nothing, without those people write text with."""

from __future__ import annotations

import re
import unicodedata

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def control_in(value: str, *, tab: bool = True) -> str | None:
    """The first control character of ``value`` (C0, DEL, C1; a tab only when ``tab`` is False)
    or unpaired surrogate, as ``U+001B``, or None. None of these can be stored or shown, or
    written in a header, faithfully."""
    for char in value:
        code = ord(char)
        if (code < 0x20 and not (tab and char == "\t")) or 0x7F <= code <= 0x9F:
            return f"U+{code:04X}"
        if 0xD800 <= code <= 0xDFFF:
            return f"U+{code:04X}"
    return None


def unsafe_in_name(value: str) -> str | None:
    """A control character (a tab too), an unpaired surrogate or a bidirectional control in
    ``value``, as ``U+001B``, or None."""
    if found := control_in(value, tab=False):
        return found
    bidi = next((char for char in value if char in BIDI_CONTROLS), None)
    return None if bidi is None else f"U+{ord(bidi):04X}"


def unsafe_in_text(value: str) -> str | None:
    """What ``unsafe_in_name`` names, but a tab or a line feed, in text of several lines that
    others read (a reject reason the agent reads, a note, the journal's reasons), as ``U+202E``,
    or None. A carriage return is named: callers turn CRLF into LF first."""
    return unsafe_in_name(value.replace("\t", " ").replace("\n", " "))


# Controls, format characters (the bidi controls, zero-width ones, a soft hyphen), surrogates,
# private-use and unassigned code points, line and paragraph separators, and spaces other than
# U+0020: nothing a reader sees, or what reorders what they see.
UNSEEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})


def _unseen(char: str) -> bool:
    return char != " " and unicodedata.category(char) in UNSEEN_CATEGORIES


def unseen_in(value: str) -> str | None:
    """The first character of ``value`` a reader cannot see, or mistakes for another, or that
    reorders the others (``UNSEEN_CATEGORIES``), as ``U+200B``, or None. For an address shown
    as a person's name: ``ana@exa\u200bmple.com`` reads as ``ana@example.com``, and with U+202E
    the rest of the line reads backwards."""
    found = next((char for char in value if _unseen(char)), None)
    return None if found is None else f"U+{ord(found):04X}"


def unseen_shown(value: str) -> str:
    """``value`` with every character ``unseen_in`` names written as its code point,
    ``[U+202E]``: what it holds, readable, and storable (a NUL is neither in PostgreSQL)."""
    return "".join(f"[U+{ord(char):04X}]" if _unseen(char) else char for char in value)


# In a message a person approves: the bidirectional controls (the order of what follows is not
# the order it is written in), the zero-width and invisible operators, fillers that draw
# nothing, the byte order mark, the tag characters (U+E0000 block: invisible text a model reads
# as letters) and the variation selectors of the supplement. Not the ones people write text
# with: a non-breaking space or a soft hyphen (HTML's &nbsp; and &shy;), the joiners of emoji
# sequences and of Persian words (U+200C, U+200D), the marks of right-to-left text (U+200E,
# U+200F, U+061C).
INVISIBLE_CHARACTERS = re.compile(
    "[\u202a-\u202e\u2066-\u2069\u200b\u2060-\u2064\ufeff\u180e\u115f\u1160\u3164"
    "\uffa0\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)


def invisible_characters(value: str) -> str:
    """The characters of ``value`` that ``INVISIBLE_CHARACTERS`` matches, each named once
    (``U+202E RIGHT-TO-LEFT OVERRIDE``), or "". "$\u202e001" reads "$100" where the override
    is honoured and "$001" where it is dropped; "555\u200b0100" reads as the number it is not."""
    found = dict.fromkeys(INVISIBLE_CHARACTERS.findall(value))
    return ", ".join(f"U+{ord(char):04X} {unicodedata.name(char, '?')}" for char in found)


def invisible_shown(value: str) -> str:
    """``value`` with each character ``invisible_characters`` names written as ``[U+202E]``."""
    return INVISIBLE_CHARACTERS.sub(lambda m: f"[U+{ord(m[0]):04X}]", value)


# Marks that draw nothing on their own beyond INVISIBLE_CHARACTERS: the variation selectors of
# the basic block (an emoji's, kept there since people write them) and the combining grapheme
# joiner.
_DRAW_NOTHING_ALONE = re.compile("[\ufe00-\ufe0f\u034f]")


def nothing_visible(value: str) -> str | None:
    """None when ``value`` holds a character a reader sees; else the characters it holds but
    white space, each named once (``U+FEFF ZERO WIDTH NO-BREAK SPACE``): a subject of a byte
    order mark and a right-to-left override is not empty to ``strip()``, and shows nothing."""
    hidden = [
        char
        for char in value
        if not char.isspace()
        and (_unseen(char) or INVISIBLE_CHARACTERS.match(char) or _DRAW_NOTHING_ALONE.match(char))
    ]
    if len(hidden) < sum(not char.isspace() for char in value):
        return None
    return ", ".join(
        f"U+{ord(char):04X} {unicodedata.name(char, '?')}" for char in dict.fromkeys(hidden)
    )
