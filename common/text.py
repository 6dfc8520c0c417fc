"""Characters text may not hold where people read it or it becomes a header. ``control_in``
(subjects): control characters (NUL, ESC, BEL...) and unpaired surrogates, which cannot be
stored, shown or written in a header faithfully. ``unsafe_in_name`` (a name others read: an
agent token's, a passkey's, an inbox's display name): those, a tab, and the bidirectional
controls (U+202A-U+202E, U+2066-U+2069), which make a name display as something other than what
it holds."""

from __future__ import annotations

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
