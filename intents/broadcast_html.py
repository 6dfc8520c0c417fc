"""Where each placeholder of a broadcast's HTML template sits, checked once per template.

Every value is HTML-escaped into the HTML body (``broadcast_content.render``): ``& < > " '``
become references. That keeps a value inert in text and inside a quoted attribute value, and
nowhere else: in an unquoted value a space starts a new attribute (``<img src={{ pic }}>`` with
``x.png onerror=alert(1)``), in a tag or attribute name a value makes markup of its own, inside
``<script>``/``<style>`` or an ``on*``/``style``/``srcdoc`` attribute the browser decodes the
references back before running the value as script, CSS or HTML. A reviewer sees one sample row,
so the template is refused rather than trusted to the values of the other 9,999.

Where a value begins a URL attribute (``href="{{ link }}"``) it picks the scheme
(``javascript:``, ``data:``); ``url_placeholders`` names those placeholders, and every row's
value for them must then be an http(s) or mailto URL (``broadcast_content.clean_recipients``).
After a fixed ``https://host/`` the scheme is the template's, and any value is fine.

The template is split as the WHATWG tokenizer splits it (the few states that decide where a tag,
a comment or a script begins and ends, in one linear pass). Python 3.13.0's ``html.parser`` took
21 s for 40 KB of "<a " and raised AssertionError on "<![<![", and does not say whether a value
was quoted. Where this splitter and a browser could disagree (comments, raw text), it ends a
region no later than a browser does, so the rest is checked as markup: stricter, never looser.
"""

from __future__ import annotations

import html as html_lib
import re
import secrets

from django.utils.translation import gettext as _

from intents.broadcast_content import PLACEHOLDER, TemplateInvalid
from intents.html_tokens import Attribute
from intents.html_tokens import comment_end as _comment_end
from intents.html_tokens import tag as _tag

FIELD = "html"
URL_ATTRIBUTES = frozenset(
    {
        "href",
        "src",
        "action",
        "formaction",
        "srcset",
        "background",
        "poster",
        "cite",
        "data",
        "xlink:href",
        "longdesc",
        "lowsrc",
        "dynsrc",
        "codebase",
        "manifest",
        "ping",
    }
)
# Their value is CSS, or a whole HTML document.
NOT_TEXT_ATTRIBUTES = frozenset({"style", "srcdoc"})
# SVG's animation elements set another attribute of their parent to their own values
# (<a><animate attributeName="href" values="javascript:..."/>, <set ... to=...>): any of their
# attributes may pick a link's address or which attribute is set, so none takes a placeholder.
ANIMATION_ELEMENTS = frozenset(
    {"animate", "set", "animatemotion", "animatetransform", "animatecolor"}
)
# Their text is script or CSS (noscript: markup or raw text, as the reader's scripting decides):
# no placeholder inside. A value there is not inert, escaped or not.
CODE_ELEMENTS = frozenset({"script", "style", "noscript"})
# Their text is text up to their end tag (RCDATA, RAWTEXT): an escaped value stays inert.
TEXT_ELEMENTS = frozenset({"title", "textarea", "xmp", "iframe", "noembed", "noframes"})
# ...but not after one of these: inside <svg> or <math> (foreign content has no RCDATA or
# RAWTEXT, so <svg><title><img onerror={{ v }}> is an image with an event handler) and inside a
# <select> that ignores their start tag, what they hold is read as tags.
_TEXT_MAY_BE_TAGS_AFTER = re.compile(r"<(?:svg|math|select)(?=[\t\n\f\r />]|$)", re.IGNORECASE)
# What starts markup in text: a tag, an end tag, a comment or declaration.
_MARKUP = re.compile(r"<[A-Za-z!/?]")
# A URL's scheme is fixed once the template's own text holds one of these before the value.
_SCHEME_END = re.compile(r"[:/?#]")
_SCRIPT_SCHEME = re.compile(r"(?:javascript|vbscript|data):", re.IGNORECASE)
# The URL parser drops ASCII tab and newline anywhere and C0 controls and spaces at the start.
_URL_IGNORED = re.compile(r"[\t\n\r]")
_URL_LEADING = "".join(chr(c) for c in range(0x21))


def url_placeholders(template: str) -> set[str]:
    """The placeholders that begin a URL attribute's value (so pick its scheme), after checking
    that every placeholder of the HTML template sits in text or a quoted attribute value;
    TemplateInvalid names the first that does not, and where."""
    names = [match.group(1) for match in PLACEHOLDER.finditer(template)]
    if not names:
        return set()
    # A random marker per placeholder, lower-case letters and digits only: one word wherever it
    # sits (a tag name, an attribute name, an unquoted value), and no template holds it.
    prefix = f"csph{secrets.token_hex(8)}n"
    counter = iter(range(len(names)))
    marked = PLACEHOLDER.sub(lambda m: f"{prefix}{next(counter)}z", template)
    return _Check(marked, re.compile(re.escape(prefix) + r"(\d+)z"), names).run()


class _Check:
    def __init__(self, text: str, marker: re.Pattern, names: list[str]):
        self.text = text
        self.marker = marker
        self.names = names
        self.in_url: set[str] = set()
        found = _TEXT_MAY_BE_TAGS_AFTER.search(text)
        self.text_may_be_tags_from = len(text) if found is None else found.start()
        # No placeholder from here on (found by a search that failed): a later one need not run.
        self.unmarked_from = len(text)

    def run(self) -> set[str]:
        position = 0
        while (start := self.text.find("<", position)) != -1:
            position = self._markup(start)
        return self.in_url

    def _refuse_in(self, start: int, end: int, where: str) -> None:
        if match := self.marker.search(self.text, start, end):
            self._refuse(match, where)

    def _refuse(self, match: re.Match, where: str) -> None:
        raise TemplateInvalid(
            FIELD,
            _("html, line %(line)s: {{ %(name)s }} is %(where)s.")
            % {
                "line": self.text.count("\n", 0, match.start()) + 1,
                "name": self.names[int(match.group(1))],
                "where": where,
            },
        )

    def _markup(self, start: int) -> int:
        """Check what begins at the "<" at ``start``; the position after it."""
        text = self.text
        after = text[start + 1 : start + 2]
        if text.startswith("<!--", start):
            end = _comment_end(text, start + 4)
            self._refuse_in(start, end, _("inside an HTML comment"))
            return end
        if after in ("!", "?"):
            return self._bogus_comment(start)
        if after == "/":
            first = text[start + 2 : start + 3]
            if first == ">":
                return start + 3
            if not (first.isascii() and first.isalpha()):
                return self._bogus_comment(start)
            tag = _tag(text, start + 2)
            self._refuse_in(start, tag.end, _("in an end tag"))
            return tag.end
        if after.isascii() and after.isalpha():
            return self._start_tag(start)
        return start + 1  # a "<" of the text

    def _bogus_comment(self, start: int) -> int:
        close = self.text.find(">", start)
        end = len(self.text) if close == -1 else close + 1
        self._refuse_in(start, end, _("inside a markup declaration"))
        return end

    def _start_tag(self, start: int) -> int:
        tag = _tag(self.text, start + 1)
        if not tag.closed:
            self._refuse_in(start, tag.end, _("in a tag that is never closed"))
        self._refuse_in(start, tag.name_end, _("in a tag name; a value there writes markup"))
        if tag.name in ANIMATION_ELEMENTS:
            self._refuse_in(
                tag.name_end,
                tag.end,
                _("in an attribute of <%(tag)s>, which sets another attribute, a link's too")
                % {"tag": tag.name},
            )
        if self.marker.search(self.text, start, tag.end):
            for attribute in tag.attributes:
                self._check_attribute(tag.name, attribute)
        if tag.name not in CODE_ELEMENTS | TEXT_ELEMENTS or tag.end >= len(self.text):
            return tag.end
        close = re.compile(rf"</{tag.name}[\t\n\f\r />]", re.ASCII | re.IGNORECASE)
        found = close.search(self.text, tag.end)
        end = len(self.text) if found is None else found.start()
        if tag.name == "script" and "<!--" in self.text[tag.end : end]:
            end = len(self.text)  # escaped script data may run past "</script>"
        if tag.name in CODE_ELEMENTS:
            self._refuse_in(
                tag.end,
                end,
                _("inside <%(tag)s>, whose text is read as script or CSS") % {"tag": tag.name},
            )
        elif start > self.text_may_be_tags_from and _MARKUP.search(self.text, tag.end, end):
            # Text or tags as the element's place decides: neither reading of it, nor of what
            # follows (a quoted value in one may be the end tag in the other), can be trusted.
            self._refuse_from(
                tag.end,
                _("after <%(tag)s> holding markup, which inside <svg>, <math> or <select> is tags")
                % {"tag": tag.name},
            )
        return end

    def _refuse_from(self, start: int, where: str) -> None:
        """``_refuse_in`` to the template's end, searched at most once past each position (so a
        template of many such elements stays linear)."""
        if start < self.unmarked_from:
            self._refuse_in(start, len(self.text), where)
            self.unmarked_from = start

    def _check_attribute(self, tag: str, attribute: Attribute) -> None:
        where = {"tag": tag[:40], "attribute": attribute.name[:40]}
        self._refuse_in(
            attribute.name_start,
            attribute.name_end,
            _("in an attribute name of <%(tag)s>; a value there writes attributes") % where,
        )
        matches = list(self.marker.finditer(self.text, attribute.start, attribute.end))
        if not matches:
            return
        if not attribute.quoted:
            self._refuse(
                matches[0],
                _(
                    "in the unquoted value of the %(attribute)s attribute of <%(tag)s>, where a "
                    'space in a value starts another attribute; quote it: %(attribute)s="…"'
                )
                % where,
            )
        if attribute.name.startswith("on"):
            self._refuse(
                matches[0],
                _("in the event-handler attribute %(attribute)s of <%(tag)s>, which runs as script")
                % where,
            )
        if attribute.name in NOT_TEXT_ATTRIBUTES:
            self._refuse(
                matches[0],
                _(
                    "in the %(attribute)s attribute of <%(tag)s>, whose value is read as CSS or "
                    "HTML, not text"
                )
                % where,
            )
        if attribute.name in URL_ATTRIBUTES:
            self._check_url(matches, attribute, where)

    def _check_url(self, matches: list[re.Match], attribute: Attribute, where: dict) -> None:
        """The placeholder that begins each URL of the value (srcset: each candidate) picks its
        scheme unless the template's text before it fixed one."""
        previous, begun = attribute.start, False
        for match in matches:
            before = self.text[previous : match.start()]
            previous = match.end()
            if attribute.name == "srcset" and "," in before:  # "URL descriptor, URL ..."
                before, begun = before.rpartition(",")[2], False
            if begun:
                continue  # an earlier placeholder begins this URL
            begun = True
            written = _URL_IGNORED.sub("", html_lib.unescape(before)).lstrip(_URL_LEADING)
            if _SCRIPT_SCHEME.match(written):
                self._refuse(
                    match,
                    _("in the %(attribute)s attribute of <%(tag)s>, after a script or data URL")
                    % where,
                )
            if not _SCHEME_END.search(written):
                self.in_url.add(self.names[int(match.group(1))])
