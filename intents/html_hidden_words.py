"""Which words an HTML body hides from the reviewer's frame (``hidden_words``): the words of each
element its own style hides or a browser does not draw, of words in the colour behind them or
under a box pulled over them, of an <iframe>'s srcdoc and an <svg>'s <title>. Pure. The draft
page asks it only where ``html_styles.reader_looks`` names hidden text, and shows them above
every word the body holds (``html_words``), so the reviewer reads the hidden ones at once; the
bulk approval, which reads every draft, never asks it.

Located by the readings that decide (``html_hidden.hidden_extents``,
``html_colours.same_colour_spans``, the same patterns as ``html_styles._hides_or_adds_text``),
read on past the first words. Where the body alone cannot tell which words are hidden (a rule of
a ``<style>`` reaches elements only drawing tells, so do the ``hidden`` attribute's and a
``<template>``'s; a box placed anywhere covers whatever is there), the answer says it is not
complete: the page then does not claim these are all.
"""

from __future__ import annotations

import html
from typing import NamedTuple

from intents.css_hiding import StyleReading, as_css_reads, custom_properties
from intents.html_colours import same_colour_spans
from intents.html_hidden import hidden_extents
from intents.html_styles import (
    _COMMENT,
    _CONTENT_DECLARATION,
    _FRAME_DOCUMENT,
    _HIDING_MARKUP,
    _STYLE_ELEMENT,
    _SVG,
    _SVG_TITLE,
    HIDING_DECLARATION,
    hiding_places,
    html_words,
)
from intents.html_tokens import END_TAG, START_TAG, Tokens


class HiddenWords(NamedTuple):
    words: list[str]  # one line each, in the order the body holds them, each once
    complete: bool  # every way the body hides words was located


def hidden_words(body: str) -> HiddenWords:
    """The words the body hides from the frame (the module's docstring)."""
    if not body:
        return HiddenWords([], True)
    text = as_css_reads(body)
    tokens = Tokens(body)
    found: list[tuple[int, str]] = []
    frames, titles = _frames_and_titles(body, tokens, found)
    # What only drawing tells: the hidden attribute, a <template>, a closed <details>, a rule of
    # a style sheet that hides (a ``content`` declaration writes words, which the page lists
    # apart).
    styles = StyleReading(custom_properties(text))
    complete = not _HIDING_MARKUP.search(text) and not any(
        styles.css(_CONTENT_DECLARATION.sub(" ", _COMMENT.sub(" ", css)), HIDING_DECLARATION)
        for css in _STYLE_ELEMENT.findall(text)
    )
    # Each srcdoc and each <svg>'s <title> of words that the check counts, located as tags.
    complete = complete and len(_FRAME_DOCUMENT.findall(text)) <= frames
    complete = complete and titles >= sum(
        1 for svg in _SVG.findall(text) for title in _SVG_TITLE.findall(svg) if html_words(title)
    )
    hiding, undrawn = hiding_places(body, styles)
    if hiding or undrawn:
        extents, read = hidden_extents(body, styles.hiding, styles.hiding_pictures, tokens)
        found += [(start, html_words(body[start:end])) for start, end in extents]
        # A hiding style or an undrawn tag the reading did not reach as a tag (in a comment, an
        # <svg>'s <style>): its words are somewhere the reading cannot point to.
        complete = complete and read is not None and all(p in read for p in (*hiding, *undrawn))
    spans, located = same_colour_spans(body, tokens)
    found += [(start, html_words(body[start:end])) for start, end in spans]
    lines: dict[str, None] = {}
    for _start, words in sorted(found, key=lambda place: place[0]):
        lines.update((line, None) for line in words.split("\n") if line)
    return HiddenWords(list(lines), complete and located)


def _frames_and_titles(body: str, tokens: Tokens, found: list[tuple[int, str]]) -> tuple[int, int]:
    """Add the words of each <iframe>'s srcdoc and each <svg>'s <title> to ``found``; how many
    srcdoc attributes (of any tag) and titles of words there are."""
    frames = titles = svg = 0
    for token in tokens:
        found_tag = token.tag
        if token.kind == END_TAG and found_tag is not None and found_tag.name == "svg":
            svg = max(0, svg - 1)
        if token.kind != START_TAG or found_tag is None:
            continue
        if found_tag.name == "svg" and not body.startswith("/>", found_tag.end - 2):
            svg += 1
        elif found_tag.name == "title" and svg:
            words = html_words(body[found_tag.end : token.end])
            titles += bool(words)
            found.append((token.start, words))
        for attribute in found_tag.attributes:
            if attribute.name == "srcdoc":
                frames += 1
                if found_tag.name == "iframe":
                    document = html.unescape(body[attribute.start : attribute.end])
                    found.append((token.start, html_words(document)))
    return frames, titles
