"""A TrueType font built by hand for the browser tests (no font library in the environment): one
glyph, a blocky "6", to which it maps the character "1", one em wide. Text set in it reads "6"
where it holds "1": the trick a font embedded in an email can play on whoever reads it.

Only the tables Chromium's font sanitiser (OTS) asks of a TrueType font, each as small as it
allows. A table is written as its fields in order, each a struct format and a value, named as the
OpenType specification names them (https://learn.microsoft.com/typography/opentype/spec/)."""

from __future__ import annotations

import base64
import struct

UNITS_PER_EM = 1000
# The "1" is one em wide: no system font's "1" is, so a frame that applies the font shows it in
# the width of the text too.
ADVANCE = 1000

# A blocky "6", 500 by 700 units from x=100: its outline one way round, its counter the other.
_OUTLINE = [(100, 0), (100, 700), (600, 700), (600, 600), (200, 600), (200, 400), (600, 400)]
_OUTLINE.append((600, 0))
_COUNTER = [(200, 100), (500, 100), (500, 300), (200, 300)]


def _fields(*fields: tuple[str, str, int | bytes]) -> bytes:
    return b"".join(struct.pack(">" + fmt, value) for _name, fmt, value in fields)


def _checksum(data: bytes) -> int:
    data += b"\0" * (-len(data) % 4)
    return sum(struct.unpack(f">{len(data) // 4}I", data)) & 0xFFFFFFFF


def _glyph_six() -> bytes:
    points = _OUTLINE + _COUNTER
    xs, ys = [x for x, _ in points], [y for _, y in points]
    deltas = [(x - px, y - py) for (x, y), (px, py) in zip(points, [(0, 0), *points], strict=False)]
    glyph = _fields(
        ("numberOfContours", "h", 2),
        ("xMin", "h", min(xs)),
        ("yMin", "h", min(ys)),
        ("xMax", "h", max(xs)),
        ("yMax", "h", max(ys)),
        ("endPtsOfContours[0]", "H", len(_OUTLINE) - 1),
        ("endPtsOfContours[1]", "H", len(points) - 1),
        ("instructionLength", "H", 0),
    )
    glyph += bytes([0x01] * len(points))  # flags: on the curve, coordinates as int16 deltas
    glyph += b"".join(struct.pack(">h", dx) for dx, _ in deltas)
    glyph += b"".join(struct.pack(">h", dy) for _, dy in deltas)
    return glyph + b"\0" * (-len(glyph) % 4)


def _cmap(char: str) -> bytes:
    """A Windows Unicode BMP subtable (format 4) of two segments: ``char`` to glyph 1, and the
    0xFFFF segment that closes every such table."""
    code = ord(char)
    return _fields(
        ("version", "H", 0),
        ("numTables", "H", 1),
        ("platformID", "H", 3),
        ("encodingID", "H", 1),
        ("subtableOffset", "I", 12),
        ("format", "H", 4),
        ("length", "H", 32),
        ("language", "H", 0),
        ("segCountX2", "H", 4),
        ("searchRange", "H", 4),
        ("entrySelector", "H", 1),
        ("rangeShift", "H", 0),
        ("endCode[0]", "H", code),
        ("endCode[1]", "H", 0xFFFF),
        ("reservedPad", "H", 0),
        ("startCode[0]", "H", code),
        ("startCode[1]", "H", 0xFFFF),
        ("idDelta[0]", "H", (1 - code) & 0xFFFF),
        ("idDelta[1]", "H", 1),
        ("idRangeOffset[0]", "H", 0),
        ("idRangeOffset[1]", "H", 0),
    )


def _name(family: str) -> bytes:
    strings = [(1, family), (2, "Regular"), (3, family), (4, family), (5, "Version 1.0")]
    strings.append((6, family))
    records, data = b"", b""
    for name_id, text in strings:
        encoded = text.encode("utf-16-be")
        records += struct.pack(">6H", 3, 1, 0x409, name_id, len(encoded), len(data))
        data += encoded
    return struct.pack(">3H", 0, len(strings), 6 + 12 * len(strings)) + records + data


def _os2(char: str) -> bytes:
    return _fields(
        ("version", "H", 4),
        ("xAvgCharWidth", "h", ADVANCE),
        ("usWeightClass", "H", 400),
        ("usWidthClass", "H", 5),
        ("fsType", "H", 0),
        ("ySubscriptXSize", "h", 650),
        ("ySubscriptYSize", "h", 700),
        ("ySubscriptXOffset", "h", 0),
        ("ySubscriptYOffset", "h", 140),
        ("ySuperscriptXSize", "h", 650),
        ("ySuperscriptYSize", "h", 700),
        ("ySuperscriptXOffset", "h", 0),
        ("ySuperscriptYOffset", "h", 480),
        ("yStrikeoutSize", "h", 50),
        ("yStrikeoutPosition", "h", 250),
        ("sFamilyClass", "h", 0),
        ("panose", "10s", bytes(10)),
        ("ulUnicodeRange1", "I", 1),
        ("ulUnicodeRange2", "I", 0),
        ("ulUnicodeRange3", "I", 0),
        ("ulUnicodeRange4", "I", 0),
        ("achVendID", "4s", b"TEST"),
        ("fsSelection", "H", 0x40),
        ("usFirstCharIndex", "H", ord(char)),
        ("usLastCharIndex", "H", ord(char)),
        ("sTypoAscender", "h", 800),
        ("sTypoDescender", "h", -200),
        ("sTypoLineGap", "h", 0),
        ("usWinAscent", "H", 800),
        ("usWinDescent", "H", 200),
        ("ulCodePageRange1", "I", 1),
        ("ulCodePageRange2", "I", 0),
        ("sxHeight", "h", 700),
        ("sCapHeight", "h", 700),
        ("usDefaultChar", "H", 0),
        ("usBreakChar", "H", 0x20),
        ("usMaxContext", "H", 1),
    )


def _head() -> bytes:
    return _fields(
        ("version", "I", 0x00010000),
        ("fontRevision", "I", 0x00010000),
        ("checksumAdjustment", "I", 0),  # set once the whole font is written
        ("magicNumber", "I", 0x5F0F3CF5),
        ("flags", "H", 0x000B),
        ("unitsPerEm", "H", UNITS_PER_EM),
        ("created", "q", 0),
        ("modified", "q", 0),
        ("xMin", "h", 100),
        ("yMin", "h", 0),
        ("xMax", "h", 600),
        ("yMax", "h", 700),
        ("macStyle", "H", 0),
        ("lowestRecPPEM", "H", 8),
        ("fontDirectionHint", "h", 2),
        ("indexToLocFormat", "h", 0),
        ("glyphDataFormat", "h", 0),
    )


def _hhea() -> bytes:
    return _fields(
        ("version", "I", 0x00010000),
        ("ascender", "h", 800),
        ("descender", "h", -200),
        ("lineGap", "h", 0),
        ("advanceWidthMax", "H", ADVANCE),
        ("minLeftSideBearing", "h", 0),
        ("minRightSideBearing", "h", 0),
        ("xMaxExtent", "h", 600),
        ("caretSlopeRise", "h", 1),
        ("caretSlopeRun", "h", 0),
        ("caretOffset", "h", 0),
        ("reserved", "8s", bytes(8)),
        ("metricDataFormat", "h", 0),
        ("numberOfHMetrics", "H", 2),
    )


def _maxp() -> bytes:
    return _fields(
        ("version", "I", 0x00010000),
        ("numGlyphs", "H", 2),
        ("maxPoints", "H", len(_OUTLINE) + len(_COUNTER)),
        ("maxContours", "H", 2),
        ("maxCompositePoints", "H", 0),
        ("maxCompositeContours", "H", 0),
        ("maxZones", "H", 2),
        ("rest", "16s", bytes(16)),  # twilight points to component depth: none
    )


def _post() -> bytes:
    return _fields(
        ("version", "I", 0x00030000),  # no glyph names
        ("italicAngle", "I", 0),
        ("underlinePosition", "h", -100),
        ("underlineThickness", "h", 50),
        ("isFixedPitch", "I", 0),
        ("memory", "16s", bytes(16)),
    )


def trojan_font(char: str = "1", family: str = "Trojan") -> bytes:
    """The font's bytes: ``char`` drawn as a "6"."""
    glyph = _glyph_six()
    tables = {
        b"OS/2": _os2(char),
        b"cmap": _cmap(char),
        b"glyf": glyph,
        b"head": _head(),
        b"hhea": _hhea(),
        # .notdef (glyph 0) is empty; the "6" starts at its left side bearing.
        b"hmtx": struct.pack(">HhHh", ADVANCE, 0, ADVANCE, min(x for x, _ in _OUTLINE)),
        b"loca": struct.pack(">3H", 0, 0, len(glyph) // 2),
        b"maxp": _maxp(),
        b"name": _name(family),
        b"post": _post(),
    }
    count = len(tables)
    power = 1 << (count.bit_length() - 1)
    directory = _fields(
        ("sfntVersion", "I", 0x00010000),
        ("numTables", "H", count),
        ("searchRange", "H", power * 16),
        ("entrySelector", "H", power.bit_length() - 1),
        ("rangeShift", "H", (count - power) * 16),
    )
    offset = len(directory) + 16 * count
    records, body, head_at = b"", b"", 0
    for tag, data in sorted(tables.items()):
        records += struct.pack(">4sIII", tag, _checksum(data), offset + len(body), len(data))
        if tag == b"head":
            head_at = offset + len(body)
        body += data + b"\0" * (-len(data) % 4)
    font = bytearray(directory + records + body)
    # head's checksumAdjustment makes the whole font sum to 0xB1B0AFBA.
    adjustment = (0xB1B0AFBA - _checksum(bytes(font))) & 0xFFFFFFFF
    struct.pack_into(">I", font, head_at + 8, adjustment)
    return bytes(font)


def trojan_font_face(family: str = "Trojan", char: str = "1") -> str:
    """An @font-face rule that embeds the font as a data: URL, as an email can."""
    data = base64.b64encode(trojan_font(char, family)).decode("ascii")
    return f"@font-face{{font-family:{family};src:url(data:font/ttf;base64,{data})}}"
