"""A translation catalogue of a test's own, served before the shipped ones.

A test that a message is translated (passed through gettext, its placeholders filled in after)
must not depend on what translators have written yet: it compiles its own words into a
``<tmp>/locale/<lang>/LC_MESSAGES/django.mo`` and puts that directory first in ``LOCALE_PATHS``
(Django's test signals drop the loaded catalogues when the setting changes, and again when the
test ends)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import polib


def serve_catalogue(settings, directory: Path, lang: str, words: dict[str, str]) -> None:
    """``words`` (msgid: translation) served in ``lang`` for the rest of the test; ``settings``
    is pytest-django's fixture."""
    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": lang}
    for msgid, msgstr in words.items():
        catalog.append(polib.POEntry(msgid=msgid, msgstr=msgstr))
    target = directory / "locale" / lang / "LC_MESSAGES"
    target.mkdir(parents=True)
    catalog.save_as_mofile(str(target / "django.mo"))
    settings.LOCALE_PATHS = [directory / "locale", *settings.LOCALE_PATHS]


# What a test's own German catalogue puts before each msgid it translates.
GERMAN = "[de] "


def visible(page: str) -> str:
    """The page's text as read: no tags, so no attribute values (a code in a title)."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))
