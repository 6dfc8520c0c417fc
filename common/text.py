"""Text a person types as a name that others read (an agent token's, a passkey's, an inbox's
display name): one line of printable characters. Control characters (NUL, ESC, BEL...) and
unpaired surrogates cannot be stored or shown faithfully, and the bidirectional controls
(U+202A-U+202E, U+2066-U+2069) make a name display as something other than what it holds."""

from __future__ import annotations

import unicodedata

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def unsafe_in_name(value: str) -> str | None:
    """The first character of ``value`` a name may not hold, as ``U+001B``, or None."""
    for char in value:
        if char in BIDI_CONTROLS or unicodedata.category(char) in ("Cc", "Cs"):
            return f"U+{ord(char):04X}"
    return None
