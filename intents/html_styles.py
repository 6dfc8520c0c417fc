"""What an HTML body's own CSS does that the draft page's frame does not show as a mail client
would: fonts of its own and styles loaded from elsewhere (``style_warnings``), and rules whose
effect depends on the reader (``reader_looks``), Outlook's conditional comments among them
(``conditional_comments``). Pure: the draft page says so beside the body,
and an approval from a list (which shows neither) refuses such a draft (``draft_approve``).

The body is read as Chromium reads CSS wherever it can hold it: a rule applies with its name in
capitals, in CSS escapes (``@\\6d edia``) and, in an ``<svg>``'s ``<style>``, in character
references (``&#64;media``); so every check reads the body with both undone, once. A false alarm
(the words in the text of the message) costs a look; a missed one, an approval of what the
reviewer did not read.
"""

from __future__ import annotations

import html
import re

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy

from intents.css_hiding import (
    CSS_ESCAPE,
    HIDING_DECLARATION,
    StyleReading,
    as_css_reads,
    css_unescaped,
    custom_properties,
    unquoted,
)
from intents.html_colours import same_colour_text
from intents.html_hidden import (
    HIDDEN_BY_DEFAULT,
    HIDDEN_CONTENT,
    PRESENTATION_ATTRIBUTES,
    WORDS_ATTRIBUTES,
    has_words,
    hidden_without_words,
)
from intents.html_tokens import Tokens, comment_end, letter_at, tag

# A <link> whose attributes name a stylesheet (rel="stylesheet", "alternate stylesheet").
_STYLESHEET_LINK = re.compile(r"<link\b[^>]*stylesheet")


def style_warnings(body: str) -> tuple[bool, bool]:
    """(fonts, remote styles): whether an HTML body declares a font of its own (an
    ``@font-face`` rule), and whether it loads a stylesheet from elsewhere (a ``<link>`` to one,
    an ``@import``), however either is spelled.

    The draft page's frame applies neither (review.views.bodies). A mail client that applies an
    embedded font may draw the customer other characters than the reviewer reads; one that
    loads remote content applies what the stylesheet holds (fonts, hidden text, added text),
    which is not in the message approved and may change after the approval."""
    if not body:
        return False, False
    text = as_css_reads(body)
    return "@font-face" in text, "@import" in text or bool(_STYLESHEET_LINK.search(text))


# Where an image is loaded from: an image attribute of any tag (src, srcset, background,
# poster), the href of an SVG image, a CSS url() or image-set(); remote when it names http(s)
# or starts with "//" (a data: or cid: image is in the message). No two runs of white space
# side by side: a megabyte of spaces after "src=" is then read once, not once per space.
_REMOTE = r"(?:[\"']\s*)?(?:https?:)?//"
_REMOTE_IMAGE = re.compile(
    r"<[a-z][^<>]*?[\s\"'/](?:src|srcset|background|poster|lowsrc|dynsrc)\s*=\s*"
    + _REMOTE
    + r"|<(?:image|feimage|use)\b[^<>]*?[\s\"'/](?:xlink:)?href\s*=\s*"
    + _REMOTE
    + r"|(?:url|image-set)\(\s*"
    + _REMOTE
)


def remote_images(body: str) -> bool:
    """Whether an HTML body shows an image from elsewhere, however spelled. The draft page's
    frame loads none (review.views.bodies: ``img-src data:``), so the reviewer sees an empty
    box where a mail client that loads images shows the customer whatever that address serves:
    a picture of words ("pay to IBAN ..."), which can change after the approval."""
    return bool(body) and bool(_REMOTE_IMAGE.search(as_css_reads(body)))


# Who may see the body otherwise than the reviewer's frame shows it, in the order the page
# names them. The frame is one reader: the reviewer's window width, their browser's colour
# scheme, a screen, Chromium's CSS.
READER_LOOKS: dict[str, Promise] = {
    "narrow_screens": gettext_lazy("phone-width screens"),
    "dark_mode": gettext_lazy("dark mode"),
    "outlook_dark_mode": gettext_lazy("Outlook's dark mode"),
    "outlook_windows": gettext_lazy("Outlook for Windows"),
    "print": gettext_lazy("printing"),
    "mail_client": gettext_lazy("mail clients that support other CSS"),
    "device_settings": gettext_lazy("other device settings (touch screens, contrast, motion)"),
    "hidden_text": gettext_lazy(
        "inbox previews, screen readers and mail clients that show the words it hides, or leave "
        "out the words its styles write"
    ),
}

# A conditional rule and its prelude, up to its block. The prelude stops at "@" too (an
# at-keyword in it makes the rule apply nowhere): each "@" starts at most one scan, so a body of
# a megabyte of "@media" is read once, not once per "@media".
_CONDITIONAL_RULE = re.compile(
    r"@(media|container|supports|document|-moz-document)(?![\w-])([^{;@]*)\{"
)
# A media attribute (<style media>, <link media>, <source media> in a <picture>), within a tag.
_MEDIA_ATTRIBUTE = re.compile(r"<[a-z][^<>]*?[\s\"'/]media\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]*)")
# A comment, to its end or, unclosed, to the end (as CSS reads one): always matched, so
# removing them is one pass.
_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.DOTALL)
# An identifier of a media query: a media type, a feature's name, a keyword value; never a
# unit (the "px" of "600px") or the rest of a number.
_MEDIA_IDENT = re.compile(r"(?<![\w.-])-?[a-z_][a-z0-9_-]*")
_WIDTH_FEATURES = ("width", "height", "aspect-ratio", "orientation")
# Words of a media query that say nothing about the reader on their own.
_NEUTRAL_MEDIA_WORDS = frozenset(
    {"all", "only", "and", "not", "or", "screen", "dark", "light", "portrait", "landscape"}
)
# How far after "color-scheme" its value is read; a longer run is taken as naming dark.
_SCHEME_VALUE = re.compile(r"color-scheme([^;{}<>]{0,300})")
_OUTLOOK_DARK = re.compile(r"\[\s*data-og[a-z]*")
# The start of one of Outlook's conditional comments: "<!--[if mso]>" (a comment to a browser,
# markup to Outlook for Windows), "<!--[if !mso]><!-->", and the downlevel-revealed "<![if ...]>".
_CONDITIONAL_START = r"<!(?:--)?\s*\[\s*if\b"
_CONDITIONAL_COMMENT_START = re.compile(_CONDITIONAL_START)
# One conditional block as written, to its "<![endif]>" or "<![endif]-->", or, unclosed, to the
# end (always matched, so a body of a megabyte of "<![if" is read once).
_CONDITIONAL_BLOCK = re.compile(
    _CONDITIONAL_START + r".*?(?:<!\[\s*endif\s*\]\s*(?:--)?>|\Z)", re.IGNORECASE | re.DOTALL
)


def _media_looks(query: str) -> set[str]:
    """Whose look a media query list picks: any part of it that is not understood is taken as
    some device setting, never as nothing."""
    query = _COMMENT.sub(" ", query)
    looks = set()
    for word in _MEDIA_IDENT.findall(query):
        if "color-scheme" in word:
            looks.add("dark_mode")
        elif any(feature in word for feature in _WIDTH_FEATURES):
            looks.add("narrow_screens")
        elif word == "print" or (word == "screen" and "(" not in query):
            # A printout shows what a screen-only rule hides, and the other way round.
            looks.add("print")
        elif word not in _NEUTRAL_MEDIA_WORDS:
            looks.add("device_settings")
    return looks


def _scan(text: str) -> set[str]:
    looks = set()
    for name, prelude in _CONDITIONAL_RULE.findall(text):
        if name == "media":
            looks |= _media_looks(prelude)
        elif name == "container":
            # A container's size follows the width the mail client gives the message.
            looks.add("narrow_screens")
        else:
            looks.add("mail_client")
    for value in _MEDIA_ATTRIBUTE.findall(text):
        looks |= _media_looks(value.strip("\"'"))
    return looks


def reader_looks(body: str) -> list[str]:
    """The readers (``READER_LOOKS``' keys, in its order) to whom the HTML body's own CSS may
    show other text than the frame shows the reviewer, however its rules are spelled:

    - a conditional rule: ``@media`` by its query (a phone's width, dark mode, print, any other
      feature), ``@container`` (its size follows the width the client gives the message),
      ``@supports`` and ``@-moz-document`` (which CSS the client supports, or which client it
      is); and a ``media`` attribute (``<style media>``, ``<source media>``) by its query;
    - a colour scheme that names dark (``color-scheme: light dark``, its ``<meta>``) or a colour
      chosen by it (``light-dark()``): the text's default colour or the one the message gives
      changes with the reader's dark mode;
    - Outlook's dark-mode selectors (``[data-ogsc]``, ``[data-ogsb]``: the attributes
      Outlook.com and Outlook's apps add to what they darken);
    - text the frame hides or that only the frame shows (``_hides_or_adds_text``): a
      ``display:none`` preheader, a ``hidden`` paragraph, a ``<template>``, a ``::after``
      that writes words, a ``<style>`` rule that hides whatever it reaches, however it hides
      (``HIDING_DECLARATION``: ``font:0/0 a``, a ``scale``, a ``filter``, a ``mask``,
      ``content-visibility:hidden``, a ``translate`` or an offset far off, a line clamp, a
      colour of no alpha such as ``#0000`` or ``rgb(0 0 0 / 0)``, a font size tiny in any
      unit, a value of ``var()``, a ``-webkit-`` spelling); the words of an element a browser
      does not draw (``<rp>``, a ``<dialog>`` without ``open``, a ``<datalist>``, MathML's
      ``<annotation>``, a ``<noembed>``, a ``<noframes>``) or draws in place of what it holds
      (an ``<audio>``'s, a ``<video>``'s, an ``<object>``'s or a ``<canvas>``'s fallback),
      wherever such a tag is written; an element that its
      own style attribute hides only when it holds words (text, an image's alt, a nested
      element's text, a picture a ``display:none`` hides: ``html_hidden.hidden_without_words``),
      so a spacer of ``&nbsp;`` under ``font-size:0;line-height:0`` or an
      ``<img src="data:," style="height:0">`` without alt is no hidden text, and a
      ``font-size:0`` gap fix around columns that set their own font size is;
      ``html_words`` and ``css_added_text`` give the page what they hold, and
      ``html_hidden_words.hidden_words`` which of those words are the hidden ones;
    - Outlook's conditional comments (``<!--[if mso]>...<![endif]-->``): a browser, and so the
      frame, reads them as comments and shows nothing of what they hold, Outlook for Windows
      renders it (and hides what ``<!--[if !mso]><!-->`` holds); ``conditional_comments``
      gives the page their source.

    Every such rule warns, a phone's larger font size too: what a rule changes (a font size of
    0, a colour of the background, a ``display``) is known only by drawing it for each reader.

    Comments are read both ways: removed (``@media /* { */ (max-width: 600px) {``), and kept (a
    "/*" in the text of the message, where it is no comment, must not hide a rule after it)."""
    if not body:
        return []
    text = as_css_reads(body)
    looks = _scan(text) | _scan(_COMMENT.sub(" ", text))
    if "light-dark(" in text or any(
        "dark" in value or len(value) == 300 for value in _SCHEME_VALUE.findall(text)
    ):
        looks.add("dark_mode")
    if _OUTLOOK_DARK.search(text):
        looks.add("outlook_dark_mode")
    if _CONDITIONAL_COMMENT_START.search(text):
        looks.add("outlook_windows")
    if _hides_or_adds_text(body, text):
        looks.add("hidden_text")
    return [look for look in READER_LOOKS if look in looks]


def conditional_comments(body: str) -> list[str]:
    """The source of each of Outlook's conditional blocks in an HTML body, as written: what
    Outlook for Windows shows or hides otherwise than a browser, which the frame cannot show
    (Outlook draws with Word's engine), so the draft page shows it as text."""
    if not body:
        return []
    return _CONDITIONAL_BLOCK.findall(body)


# Where CSS is, in a body read as CSS reads it (``as_css_reads``): a style attribute's value
# and a style element's content (an unclosed one to the end). Property names in the text of the
# message ("display: none of them") are not CSS and warn nothing.
_STYLE_ATTRIBUTE = re.compile(r"<[a-z][^<>]*?[\s\"'/]style\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]*)")
_STYLE_ELEMENT = re.compile(r"<style\b[^>]*>(.*?)(?:</style|\Z)", re.DOTALL)
# Markup that a browser, and so the frame, does not show while some mail clients do: the hidden
# attribute (Gmail drops it), a <template>'s content, a <details> element's content behind its
# summary (shown only when the reviewer opens it).
_HIDING_MARKUP = re.compile(r"<[a-z][^<>]*?[\s\"'/]hidden(?=[\s/>=])|<template\b|<details\b")
# An <iframe>'s srcdoc, wherever it is written: a document in an attribute, which the frame
# shows as the text of a tag (review.views.bodies.frames_as_text) and a client that draws frames
# as a document. An <svg>'s <title> (to its end, or the end of the <svg>): its accessible name,
# read by a screen reader, drawn by no one.
_FRAME_DOCUMENT = re.compile(r"[\t\n\f\r \"'/]srcdoc[\t\n\f\r ]*=")
_SVG = re.compile(r"<svg[\t\n\f\r />].*?(?:</svg|\Z)", re.DOTALL)
_SVG_TITLE = re.compile(r"<title\b[^>]*>(.*?)(?:</title|\Z)", re.DOTALL)
# A ``content`` declaration as written, to the end of its declaration.
_CONTENT_DECLARATION = re.compile(r"(?<![\w-])content\s*:[^;}]*")


def _hides_or_adds_text(body: str, text: str) -> bool:
    """Whether the body (``text``: read as CSS reads it) holds text the frame does not show or
    shows text it does not hold:

    - hiding markup (``_HIDING_MARKUP``), a rule of a ``<style>`` that hides or writes, a
      ``content`` declaration in a style attribute: whatever they are applied to, as which
      element a rule reaches is known only by drawing it;
    - an element whose own style attribute hides it and holds words
      (``html_hidden.hidden_without_words``); a spacer that holds none warns nothing. Every
      hiding style attribute written in the body (``_STYLE_ATTRIBUTE_ANYWHERE``: wherever
      "style=" follows a space, a quote or a "/", in a tag or not) must be one of a tag read
      so: one its tokenizer's states did not reach as a tag (in a comment, in an ``<svg>``'s
      ``<style>`` or ``<title>``, in a ``<noscript>`` that a mail client without scripts
      parses, after a CDATA section of an ``<svg>``, where a browser reads a ``<div>`` as one)
      warns, whatever the tag holds before it (a ">" or a "<" in a quoted attribute);
    - an element a browser does not draw, or draws in place of what it holds
      (``html_hidden.HIDDEN_BY_DEFAULT``, ``HIDDEN_CONTENT``), that holds words; one that
      reading did not reach as a tag (``_UNDRAWN_ELEMENT_ANYWHERE``) warns, as a style does;
    - words in the colour behind them, or under a box or a background a browser paints over
      them (``html_colours.same_colour_text``, ``html_cover``)."""
    if _HIDING_MARKUP.search(text) or _FRAME_DOCUMENT.search(text):
        return True
    if any(html_words(title) for svg in _SVG.findall(text) for title in _SVG_TITLE.findall(svg)):
        return True
    attributes = [_COMMENT.sub(" ", css) for css in _STYLE_ATTRIBUTE.findall(text)]
    elements = [_COMMENT.sub(" ", css) for css in _STYLE_ELEMENT.findall(text)]
    styles = StyleReading(custom_properties(text))
    if any(styles.css(css, HIDING_DECLARATION) for css in elements) or any(
        _CONTENT_DECLARATION.search(css) for css in attributes
    ):
        return True
    hiding, undrawn = hiding_places(body, styles)
    # Split once for both readings (the colours' reads on from where the hidden text's ended).
    tokens = Tokens(body)
    if not hiding and not undrawn:
        # Every element the reading below could take as hidden has a hiding style attribute or
        # an undrawn element's tag, which these find wherever it is written: nothing to read.
        return same_colour_text(body, tokens)
    quiet = hidden_without_words(body, styles.hiding, styles.hiding_pictures, tokens)
    if quiet is None or any(start not in quiet for start in (*hiding, *undrawn)):
        return True
    return same_colour_text(body, tokens)


# Elements whose content no mail client shows as text of the message, skipped to their end tag
# (the head's text is its title's).
_NOT_SHOWN = frozenset({"script", "style", "title"})
# Elements that start a line of their own.
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
        "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
        "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "template",
        "td", "th", "tr", "ul",
    }
)  # fmt: skip


def hiding_places(body: str, styles: StyleReading) -> tuple[list[int], list[int]]:
    """Where, in ``body`` as written, a style or presentation attribute that hides starts, and
    where a start tag of an element a browser does not draw starts: wherever they are written,
    in or out of a tag, so a reading that did not reach one as a tag can be told apart."""
    hiding = [
        m.start(1) for m in _STYLE_ATTRIBUTE_ANYWHERE.finditer(body) if styles.hiding(m[2])
    ] + [
        m.start(1)
        for m in _PRESENTATION_ATTRIBUTE_ANYWHERE.finditer(body)
        if styles.hiding(f"{m[1]}:{unquoted(m[2])}")
    ]
    undrawn = [m.start(1) for m in _UNDRAWN_ELEMENT_ANYWHERE.finditer(body)]
    return hiding, undrawn


def html_words(body: str, *, _frames: int = 0) -> str:
    """Every text an HTML body holds, whether its styles show it or not, one block to a line:
    what a mail client that applies none of them shows, and what an inbox preview and a screen
    reader read, with the words of the attributes a screen reader reads (an image's alt, a
    tooltip, a label, a field's value: ``html_hidden.WORDS_ATTRIBUTES``) on lines of their own,
    an <iframe>'s srcdoc (a document of its own) read the same way, and an <svg>'s <title>.
    Comments (Outlook's conditional ones are shown apart), scripts, styles and the document's
    title are left out. Every word ``reader_looks`` names as hidden text is here, so the page
    that names it shows the reviewer what it is.

    Split by ``intents.html_tokens`` (the WHATWG tokenizer's states for tags and comments,
    one linear pass): Python 3.13.0's ``html.parser`` took 30 s for 60 KB
    of "<a ", and a page that reads a megabyte body must not."""
    if not body:
        return ""
    parts: list[str] = []
    position, n = 0, len(body)
    svg = 0  # <svg> elements open: a <title> in one is drawn as a tooltip and read aloud
    while (start := body.find("<", position)) != -1:
        parts.append(body[position:start])
        after = body[start + 1 : start + 2]
        if body.startswith("<!--", start):
            position = comment_end(body, start + 4)
        elif after in ("!", "?") or (after == "/" and not letter_at(body, start + 2)):
            close = body.find(">", start)
            position = n if close == -1 else close + 1
        elif after == "/" or (after.isascii() and after.isalpha()):
            found_tag = tag(body, start + (2 if after == "/" else 1))
            position = found_tag.end
            name = found_tag.name
            if name == "svg" and not body.startswith("/>", position - 2):
                svg = svg + 1 if after != "/" else max(0, svg - 1)
            if name in _BLOCKS:
                parts.append("\n")
            if after != "/":
                parts += _attribute_words(body, found_tag, _frames)
            if after != "/" and name in _NOT_SHOWN and not (name == "title" and svg):
                close_tag = re.compile(rf"</{name}[\t\n\f\r />]", re.ASCII | re.IGNORECASE)
                found = close_tag.search(body, position)
                position = n if found is None else found.start()
        else:
            parts.append("<")
            position = start + 1
    parts.append(body[position:])
    lines = (" ".join(line.split()) for line in html.unescape("".join(parts)).split("\n"))
    return "\n".join(line for line in lines if line)


# How many <iframe> srcdoc documents, one in another, are read as documents; the text of one
# deeper is shown as its source.
_FRAMES_READ = 3


def _attribute_words(body: str, found_tag, frames: int) -> list[str]:
    """Lines of the words a tag's attributes hold (as written: ``html_words`` unescapes them)."""
    lines: list[str] = []
    for attribute in found_tag.attributes:
        value = body[attribute.start : attribute.end]
        if attribute.name in WORDS_ATTRIBUTES and has_words(html.unescape(value)):
            lines.append(f"\n{value}\n")
        elif attribute.name == "srcdoc" and found_tag.name == "iframe" and value.strip():
            document = html.unescape(value)
            words = document if frames >= _FRAMES_READ else html_words(document, _frames=frames + 1)
            lines.append(f"\n{html.escape(words, quote=False)}\n")
    return lines


# The same patterns, for text read in its own letters (``css_added_text``).
_STYLE_ATTRIBUTE_ANY_CASE = re.compile(_STYLE_ATTRIBUTE.pattern, re.IGNORECASE)
# Every place a style attribute may be written, as written, in or out of a tag: its name (group
# 1) and its value (group 2). In a lookahead, so a value that a quote in the text of the message
# opened ('<p>style="</p><p style="display:none">') does not hide the next one.
_STYLE_ATTRIBUTE_ANYWHERE = re.compile(
    r"[\t\n\f\r \"'/](?=(style)[\t\n\f\r ]*=[\t\n\f\r ]*(\"[^\"]*\"|'[^']*'|[^\t\n\f\r >]*))",
    re.ASCII | re.IGNORECASE,
)
# Every place an SVG presentation attribute that may hide may be written (``_STYLE_ATTRIBUTE_ANYWHERE``).
_PRESENTATION_ATTRIBUTE_ANYWHERE = re.compile(
    r"[\t\n\f\r \"'/](?=("
    + "|".join(sorted(PRESENTATION_ATTRIBUTES))
    + r")[\t\n\f\r ]*=[\t\n\f\r ]*(\"[^\"]*\"|'[^']*'|[^\t\n\f\r >]*))",
    re.ASCII | re.IGNORECASE,
)
# Every place a start tag of an element a browser does not draw, or draws in place of what it
# holds, may be written, in or out of a tag (its name: group 1).
_UNDRAWN_ELEMENT_ANYWHERE = re.compile(
    r"<(" + "|".join(sorted(HIDDEN_BY_DEFAULT | HIDDEN_CONTENT)) + r")(?=[\t\n\f\r />])",
    re.ASCII | re.IGNORECASE,
)
_STYLE_ELEMENT_ANY_CASE = re.compile(_STYLE_ELEMENT.pattern, re.DOTALL | re.IGNORECASE)
_CONTENT_DECLARATION_ANY_CASE = re.compile(_CONTENT_DECLARATION.pattern, re.IGNORECASE)


def css_added_text(body: str) -> list[str]:
    """Each ``content`` declaration of the body's CSS, its escapes read as CSS reads them and
    its letters as written (a reviewer checks an IBAN or a reference letter by letter; the
    other readers here lower-case the body): text that a client with pseudo-elements (and the
    frame) writes into the message, and one without (Gmail, Outlook) does not."""
    if not body:
        return []
    text = CSS_ESCAPE.sub(css_unescaped, html.unescape(body))
    found: list[str] = []
    attributes = [unquoted(value) for value in _STYLE_ATTRIBUTE_ANY_CASE.findall(text)]
    for css in attributes + _STYLE_ELEMENT_ANY_CASE.findall(text):
        found += [
            match.strip() for match in _CONTENT_DECLARATION_ANY_CASE.findall(_COMMENT.sub(" ", css))
        ]
    return found
