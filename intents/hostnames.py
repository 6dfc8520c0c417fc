"""Domain names written in a message's text, and those among them that look like another
(``lookalike_host``). Pure.

A mail client turns an address written in text into a link: "https://b\u0430nk.example/pay"
with a Cyrillic a is a link to ``xn--bnk-6cd.example`` that reads as bank.example, to the
reviewer and to the customer. The same definition marks an HTML link's text
(``intents.html_links``) and the text, subject and HTML words of a draft
(``intents.policy.lookalike_hosts_in_content``): the draft's page names such names, and an
approval from a list, which shows none of them as what they are, refuses them.

A name in one script is an ordinary name ("\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444",
"\u03c0\u03b1\u03c1\u03ac\u03b4\u03b5\u03b9\u03b3\u03bc\u03b1.\u03b5\u03bb", "caf\u00e9.example"):
it reads as what it is. One is a look-alike when a label mixes scripts (Latin with Cyrillic or
Greek; the mixes of Japanese, Chinese and Korean names are not that), when a label is made only
of letters that each look like a Latin one under a top-level name of another script (Chrome's
"whole-script confusable": "\u0440\u0430\u0443.example" reads "pay.example"), or when it holds a
Latin letter drawn as another ("\u0131", a dotless i). A label in Punycode ("xn--...") is read as
the name it stands for, and one that stands for none is a look-alike too: no reader can tell
what it is.
"""

from __future__ import annotations

import re
import unicodedata

# A run of the characters of a domain name: maximal, so a text of a megabyte is read once (a
# pattern for "labels, dots, a top-level label" backtracked on "a.a.a.a...").
_NAME_RUN = re.compile(r"[\w.-]+")
_ACE_PREFIX = "xn--"
# Scripts that names legitimately mix in one label (UTS #39, "highly restrictive"): Japanese,
# Chinese with Bopomofo, Korean, each with Latin.
_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
# Lower-case letters of other scripts drawn like a Latin letter (Unicode's confusables.txt,
# the ones Chrome's IDN spoof checker also names); a label of only these reads as Latin.
_LIKE_LATIN = {
    "CYRILLIC": frozenset("аъьсԁеҽһіјӏопрԛгѕѵԝѡхуүԍ"),
    "GREEK": frozenset("αικνορτυχγωεη"),
    # w, q, h, n, u, o, f, q, g
    "ARMENIAN": frozenset("\u0561\u0563\u0570\u0578\u057d\u0585\u0584\u0566\u0581"),
}
# Latin letters outside ASCII drawn as an ASCII one (no mark tells them apart).
_LATIN_LIKE_ASCII = frozenset("ıɑɡɩʟƖǀ")


def as_read(text: str) -> str:
    """The text as a reader reads an address in it: without the characters nobody sees (a
    zero-width space in "bank\u200b.example"), compatibility forms folded (a full-width stop,
    U+FF0E), and the other full stops IDNA takes as dots."""
    text = "".join(char for char in text if unicodedata.category(char) != "Cf")
    return unicodedata.normalize("NFKC", text).replace("\u3002", ".").replace("\uff61", ".")


def hosts_in(text: str) -> list[str]:
    """The domain names written in a text: a URL's host, an email address's domain, a bare name
    ("www.bank.example", "bank.example/pay"); a run of at least two labels whose last is
    letters only, or Punycode ("xn--p1ai")."""
    hosts = []
    for run in _NAME_RUN.findall(as_read(text)):
        labels = run.strip(".-").split(".")
        last = labels[-1]
        if (
            len(labels) > 1
            and all(labels)
            and len(last) > 1
            and (last.isalpha() or last.lower().startswith(_ACE_PREFIX))
        ):
            hosts.append(".".join(labels))
    return hosts


def _script(char: str) -> str:
    """The script of a letter, as the first word of its Unicode name says it ("CYRILLIC"),
    "HAN" for an ideograph; "" for what belongs to none (digits, marks, modifier letters)."""
    if not unicodedata.category(char).startswith("L") or unicodedata.category(char) == "Lm":
        return ""
    first = unicodedata.name(char, "").split(" ")[0]
    return "HAN" if first == "CJK" else first


def _in_a_name(char: str) -> bool:
    """Whether a name may hold the character (IDNA's letters, marks, digits and the hyphen,
    roughly: "a\u2488", a parenthesised digit one stop, is no name)."""
    category = unicodedata.category(char)
    return char == "-" or category[0] in "LM" or category == "Nd"


def unicode_form(name: str) -> str | None:
    """The name with each Punycode label read as the letters it stands for, lower-cased; None
    when one stands for no name (not valid Punycode, plain ASCII written as Punycode, capitals or
    characters no name holds)."""
    labels = []
    for label in name.lower().rstrip(".").split("."):
        if label.startswith(_ACE_PREFIX):
            try:
                label = label[len(_ACE_PREFIX) :].encode("ascii").decode("punycode")
            except UnicodeError:
                return None
            if label.isascii() or label != label.lower() or not all(map(_in_a_name, label)):
                return None
        labels.append(label)
    return ".".join(labels)


def lookalike_host(name: str) -> bool:
    """Whether a domain name may read as another (this module's docstring says when)."""
    shown = unicode_form(as_read(name))
    if shown is None:
        return True
    if shown.isascii():
        return False
    labels = shown.split(".")
    top_scripts = {_script(char) for char in labels[-1]} - {""}
    for label in labels:
        if any(char in _LATIN_LIKE_ASCII for char in label):
            return True
        scripts = {_script(char) for char in label} - {""}
        if len(scripts) > 1 and not any(scripts <= mix for mix in _MIXES):
            return True
        if len(scripts) == 1 and scripts != top_scripts:
            [script] = scripts
            letters = {char for char in label if _script(char)}
            if letters <= _LIKE_LATIN.get(script, frozenset()):
                return True
    return False


def lookalike_hosts(text: str) -> list[str]:
    """The names in a text (``hosts_in``) that may read as another, each once, in order."""
    return list(dict.fromkeys(name for name in hosts_in(text) if lookalike_host(name)))
