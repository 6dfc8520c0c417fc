"""Where the links of an HTML body lead, beside what they show (``html_links``). Pure.

The draft page's frame shows a link's text; where it leads is its ``href``, which a reviewer
sees only by hovering it, one link at a time. A link whose text is an address ("https://
bank.example/pay", "help@bank.example") and whose target is another ("https://evil.test/pay")
is the oldest phishing there is, and an agent that quotes a customer's HTML, or is talked into
writing it, sends it under the tenant's name. So is a link that runs or carries a document
(``javascript:``, ``data:``), which the frame's sandbox does not follow and some clients do, and
a relative one, which a ``<base href>`` sends where the mail client resolves it (the frame's
policy ignores the base: ``base-uri 'none'``). The draft page lists every link with its target
and marks those; an approval from a list, which shows none of them, refuses them
(``draft_approve``).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from intents.hostnames import hosts_in, lookalike_host
from intents.html_tokens import comment_end, letter_at, tag

# Schemes a link of a message may lead to without a warning; the rest run something, carry a
# document of their own or open a local program.
PLAIN_SCHEMES = frozenset({"http", "https", "mailto", "tel"})
# What the URL parser drops: ASCII tab and newline anywhere, C0 controls and spaces at the ends.
_URL_IGNORED = re.compile(r"[\t\n\r]")
_URL_TRIMMED = "".join(chr(c) for c in range(0x21))
# Elements whose content is no link text (and may hold "<a" as text).
_RAW_TEXT = frozenset({"script", "style", "title", "textarea", "xmp"})


@dataclass(frozen=True)
class Link:
    text: str  # as a reader sees it, white space collapsed
    target: str  # the href, character references undone, trimmed as the URL parser trims it
    misleading: bool  # it leads elsewhere than its text says, or runs or carries something


def _host(name: str) -> str:
    name = name.lower().rstrip(".")
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError:
        return name


def _same_site(shown: str, target: str) -> bool:
    """Whether a host named in the text and the target's host are one site: the same, or one a
    subdomain of the other ("www.bank.example" for "bank.example"), never a longer name that
    ends otherwise ("bank.example.evil.test")."""
    return shown == target or target.endswith("." + shown) or shown.endswith("." + target)


def _misleading(text: str, target: str, *, based: bool) -> bool:
    try:
        parts = urlsplit(target)
        hostname = parts.hostname or ""
    except ValueError:  # "https://[bank" : no URL a reader can check
        return True
    scheme = parts.scheme.lower()
    named = hosts_in(text)
    if any(lookalike_host(name) for name in named):
        # A name that reads as another ("b\u0430nk.example" with a Cyrillic a is
        # "xn--bnk-6cd.example"): to the customer too.
        return True
    shown = [_host(name) for name in named]
    if not scheme:
        # Relative: where it leads is the mail client's to decide (or a <base>'s).
        return based or bool(shown)
    if scheme not in PLAIN_SCHEMES:
        return True
    if scheme == "mailto":
        host = _host(parts.path.rpartition("@")[2].split("?")[0])
    elif scheme == "tel":
        return bool(shown)
    else:
        host = _host(hostname)
    return any(not _same_site(name, host) for name in shown)


def html_links(body: str) -> list[Link]:
    """Each link of an HTML body (``<a href>``, ``<area href>``) in order, with the text it
    shows (an area's: its alt) and where it leads; split as ``intents.html_tokens`` splits tags,
    in one pass."""
    based, found = _links(body)
    return [Link(text, target, _misleading(text, target, based=based)) for text, target in found]


def template_links(body: str, placeholder: re.Pattern) -> tuple[bool, list[tuple[str, str]]]:
    """The links of a template's HTML whose text or target holds a ``placeholder`` (text,
    target, as ``html_links`` reads them), and whether it has a ``<base href>``: what each
    recipient's values make of them is ``filled_link_misleading``'s, without rendering the
    whole body per recipient. Values are escaped into text and quoted attribute values only
    (``intents.broadcast_html``), so they change no link's bounds."""
    based, found = _links(body)
    return based, [
        (text, target)
        for text, target in found
        if placeholder.search(text) or placeholder.search(target)
    ]


def filled_link_misleading(text: str, target: str, *, based: bool) -> bool:
    """Whether a link of ``template_links`` leads elsewhere than it shows once a recipient's
    values fill its text and target in, read as ``html_links`` reads a link."""
    target = _URL_IGNORED.sub("", target).strip(_URL_TRIMMED)
    return _misleading(" ".join(text.split()), target, based=based)


def _links(body: str) -> tuple[bool, list[tuple[str, str]]]:
    """(whether it has a ``<base href>``, (text, target) of each link) of an HTML body."""
    if not body:
        return False, []
    based = False
    found: list[tuple[str, list[str]]] = []  # (target, text parts) of each link
    open_link: list[str] | None = None
    position, n = 0, len(body)
    while (start := body.find("<", position)) != -1:
        if open_link is not None:
            open_link.append(body[position:start])
        after = body[start + 1 : start + 2]
        if body.startswith("<!--", start):
            position = comment_end(body, start + 4)
            continue
        if after in ("!", "?") or (after == "/" and not letter_at(body, start + 2)):
            close = body.find(">", start)
            position = n if close == -1 else close + 1
            continue
        if not (after == "/" or (after.isascii() and after.isalpha())):
            if open_link is not None:
                open_link.append("<")
            position = start + 1
            continue
        end_tag = after == "/"
        found_tag = tag(body, start + (2 if end_tag else 1))
        position = found_tag.end
        if end_tag:
            if found_tag.name == "a":
                open_link = None
            continue
        values = {
            a.name: html.unescape(body[a.start : a.end]) for a in reversed(found_tag.attributes)
        }
        if found_tag.name == "base" and "href" in values:
            based = True
        if found_tag.name in ("a", "area") and "href" in values:
            words = [values.get("alt", "")] if found_tag.name == "area" else []
            found.append((values["href"], words))
            open_link = words if found_tag.name == "a" else None
        elif found_tag.name == "a":
            open_link = None
        if found_tag.name == "img" and open_link is not None:
            open_link.append(" " + values.get("alt", "") + " ")
        if found_tag.name in _RAW_TEXT:
            close_tag = re.compile(rf"</{found_tag.name}[\t\n\f\r />]", re.ASCII | re.IGNORECASE)
            raw_end = close_tag.search(body, position)
            position = n if raw_end is None else raw_end.start()
    if open_link is not None:
        open_link.append(body[position:])
    return based, [
        (
            " ".join(html.unescape("".join(parts)).split()),
            _URL_IGNORED.sub("", href).strip(_URL_TRIMMED),
        )
        for href, parts in found
    ]


def misleading_links(body: str) -> list[Link]:
    return [link for link in html_links(body) if link.misleading]
