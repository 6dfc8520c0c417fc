"""CSS colours as the reader-looks checks read them (``intents.html_colours``): a value's colour
(``colour``: a hex, an rgb() or hsl(), a name, ``transparent``), an attribute's (``bgcolor``,
``<font color>``: ``legacy_colour``), a background's (``background``), one drawn over another
(``over``) and its lightness. Pure; read from a body already lower-cased.
"""

from __future__ import annotations

import colorsys
import re

# CSS's named colours.
_NAMED = dict(
    entry.split(":")
    for entry in [
        "aliceblue:f0f8ff",
        "antiquewhite:faebd7",
        "aqua:00ffff",
        "aquamarine:7fffd4",
        "azure:f0ffff",
        "beige:f5f5dc",
        "bisque:ffe4c4",
        "black:000000",
        "blanchedalmond:ffebcd",
        "blue:0000ff",
        "blueviolet:8a2be2",
        "brown:a52a2a",
        "burlywood:deb887",
        "cadetblue:5f9ea0",
        "chartreuse:7fff00",
        "chocolate:d2691e",
        "coral:ff7f50",
        "cornflowerblue:6495ed",
        "cornsilk:fff8dc",
        "crimson:dc143c",
        "cyan:00ffff",
        "darkblue:00008b",
        "darkcyan:008b8b",
        "darkgoldenrod:b8860b",
        "darkgray:a9a9a9",
        "darkgreen:006400",
        "darkgrey:a9a9a9",
        "darkkhaki:bdb76b",
        "darkmagenta:8b008b",
        "darkolivegreen:556b2f",
        "darkorange:ff8c00",
        "darkorchid:9932cc",
        "darkred:8b0000",
        "darksalmon:e9967a",
        "darkseagreen:8fbc8f",
        "darkslateblue:483d8b",
        "darkslategray:2f4f4f",
        "darkslategrey:2f4f4f",
        "darkturquoise:00ced1",
        "darkviolet:9400d3",
        "deeppink:ff1493",
        "deepskyblue:00bfff",
        "dimgray:696969",
        "dimgrey:696969",
        "dodgerblue:1e90ff",
        "firebrick:b22222",
        "floralwhite:fffaf0",
        "forestgreen:228b22",
        "fuchsia:ff00ff",
        "gainsboro:dcdcdc",
        "ghostwhite:f8f8ff",
        "gold:ffd700",
        "goldenrod:daa520",
        "gray:808080",
        "green:008000",
        "greenyellow:adff2f",
        "grey:808080",
        "honeydew:f0fff0",
        "hotpink:ff69b4",
        "indianred:cd5c5c",
        "indigo:4b0082",
        "ivory:fffff0",
        "khaki:f0e68c",
        "lavender:e6e6fa",
        "lavenderblush:fff0f5",
        "lawngreen:7cfc00",
        "lemonchiffon:fffacd",
        "lightblue:add8e6",
        "lightcoral:f08080",
        "lightcyan:e0ffff",
        "lightgoldenrodyellow:fafad2",
        "lightgray:d3d3d3",
        "lightgreen:90ee90",
        "lightgrey:d3d3d3",
        "lightpink:ffb6c1",
        "lightsalmon:ffa07a",
        "lightseagreen:20b2aa",
        "lightskyblue:87cefa",
        "lightslategray:778899",
        "lightslategrey:778899",
        "lightsteelblue:b0c4de",
        "lightyellow:ffffe0",
        "lime:00ff00",
        "limegreen:32cd32",
        "linen:faf0e6",
        "magenta:ff00ff",
        "maroon:800000",
        "mediumaquamarine:66cdaa",
        "mediumblue:0000cd",
        "mediumorchid:ba55d3",
        "mediumpurple:9370db",
        "mediumseagreen:3cb371",
        "mediumslateblue:7b68ee",
        "mediumspringgreen:00fa9a",
        "mediumturquoise:48d1cc",
        "mediumvioletred:c71585",
        "midnightblue:191970",
        "mintcream:f5fffa",
        "mistyrose:ffe4e1",
        "moccasin:ffe4b5",
        "navajowhite:ffdead",
        "navy:000080",
        "oldlace:fdf5e6",
        "olive:808000",
        "olivedrab:6b8e23",
        "orange:ffa500",
        "orangered:ff4500",
        "orchid:da70d6",
        "palegoldenrod:eee8aa",
        "palegreen:98fb98",
        "paleturquoise:afeeee",
        "palevioletred:db7093",
        "papayawhip:ffefd5",
        "peachpuff:ffdab9",
        "peru:cd853f",
        "pink:ffc0cb",
        "plum:dda0dd",
        "powderblue:b0e0e6",
        "purple:800080",
        "rebeccapurple:663399",
        "red:ff0000",
        "rosybrown:bc8f8f",
        "royalblue:4169e1",
        "saddlebrown:8b4513",
        "salmon:fa8072",
        "sandybrown:f4a460",
        "seagreen:2e8b57",
        "seashell:fff5ee",
        "sienna:a0522d",
        "silver:c0c0c0",
        "skyblue:87ceeb",
        "slateblue:6a5acd",
        "slategray:708090",
        "slategrey:708090",
        "snow:fffafa",
        "springgreen:00ff7f",
        "steelblue:4682b4",
        "tan:d2b48c",
        "teal:008080",
        "thistle:d8bfd8",
        "tomato:ff6347",
        "turquoise:40e0d0",
        "violet:ee82ee",
        "wheat:f5deb3",
        "white:ffffff",
        "whitesmoke:f5f5f5",
        "yellow:ffff00",
        "yellowgreen:9acd32",
    ]
)
Colour = tuple[float, float, float, float]
WHITE: Colour = (255.0, 255.0, 255.0, 1.0)
BLACK: Colour = (0.0, 0.0, 0.0, 1.0)
# A colour that a value names in a way not read here (a gradient, a var()).
UNKNOWN = "unknown"
_HEX = re.compile(r"#([0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})")
_FUNCTION = re.compile(r"(rgba?|hsla?)\(([^()]*)\)")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?%?")


def _channel(text: str, scale: float) -> float:
    return float(text[:-1]) * 2.55 if text.endswith("%") else float(text) * scale


def colour(value: str) -> Colour | None:
    """The colour a CSS value names (a hex, an rgb() or hsl(), a name, ``transparent``), as
    0-255 channels and an alpha; None for one not known here (``var()``, ``currentcolor``)."""
    value = value.strip()
    if value in _NAMED:
        code = _NAMED[value]
        return (int(code[:2], 16), int(code[2:4], 16), int(code[4:], 16), 1.0)
    if value == "transparent":
        return (0.0, 0.0, 0.0, 0.0)
    if found := _HEX.fullmatch(value):
        digits = found[1]
        if len(digits) <= 4:
            digits = "".join(c * 2 for c in digits)
        channels = [int(digits[i : i + 2], 16) for i in range(0, len(digits), 2)]
        alpha = channels[3] / 255 if len(channels) == 4 else 1.0
        return (channels[0], channels[1], channels[2], alpha)
    if found := _FUNCTION.fullmatch(value):
        numbers = _NUMBER.findall(found[2])
        if len(numbers) not in (3, 4):
            return None
        alpha = (
            _channel(numbers[3], 1.0) / (2.55 if numbers[3].endswith("%") else 1.0)
            if len(numbers) == 4
            else 1.0
        )
        if found[1].startswith("rgb"):
            r, g, b = (_channel(number, 1.0) for number in numbers[:3])
        else:
            hue = float(numbers[0].rstrip("%")) / 360 % 1
            light, saturation = (float(n.rstrip("%")) / 100 for n in (numbers[2], numbers[1]))
            r, g, b = (c * 255 for c in colorsys.hls_to_rgb(hue, light, saturation))
        return (r, g, b, min(max(alpha, 0.0), 1.0))
    return None


def legacy_colour(value: str) -> Colour | str | None:
    """An attribute's colour (``bgcolor``, ``<font color>``): a name or six hex digits, with or
    without "#", or "#" and three; any other spelling (which the legacy parser reads in its own
    way) is not known here."""
    value = value.strip()
    if value in _NAMED or value == "transparent":
        return colour(value)
    digits = value.removeprefix("#")
    if re.fullmatch(r"[0-9a-f]{6}", digits) or (value.startswith("#") and len(digits) == 3):
        return colour("#" + digits)
    return UNKNOWN


def background(value: str) -> Colour | str | None:
    if "gradient(" in value or "var(" in value or "image-set(" in value:
        return UNKNOWN
    for word in re.findall(r"#[0-9a-f]+|(?:rgba?|hsla?)\([^()]*\)|[a-z]+", value):
        found = colour(word)
        if found is not None:
            return found
    return None


def over(top: Colour, bottom: Colour) -> Colour:
    a = top[3]
    return (
        a * top[0] + (1 - a) * bottom[0],
        a * top[1] + (1 - a) * bottom[1],
        a * top[2] + (1 - a) * bottom[2],
        1.0,
    )


def lightness(colour_drawn: Colour) -> float:
    return 0.2126 * colour_drawn[0] + 0.7152 * colour_drawn[1] + 0.0722 * colour_drawn[2]
