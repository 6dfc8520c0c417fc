"""The shipped translations: complete for the code as it is, and compiled from the .po files that
are committed (the .mo files are committed too, so a fresh clone needs no gettext).

Every catalogue counts: the project's ``locale/`` (base and signed-out pages, tenants) and each
app's own ``<app>/locale/`` (review, intents, webhooks, console...), found on disk, so a new app
catalogue is checked without touching this file. makemessages run from the top puts each app's
strings in that app's catalogue when the app has a ``locale/`` directory, the project's otherwise."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polib
import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
SHIPPED = [code for code, _name in settings.LANGUAGES if code != "en"]
PLACEHOLDER = re.compile(r"%\((\w+)\)s")


IGNORED_DIRS = {".venv", ".tools", ".data", ".git", "mutants", "node_modules", "tests"}


def locale_dirs(root: Path = ROOT) -> list[Path]:
    """The project's locale/ and every app's <app>/locale/ under root (one level down: apps are
    top-level packages here)."""
    found = [root / "locale"] if (root / "locale").is_dir() else []
    found += sorted(
        child / "locale"
        for child in root.iterdir()
        if child.is_dir() and child.name not in IGNORED_DIRS and (child / "locale").is_dir()
    )
    return found


def catalogues(root: Path = ROOT) -> list[tuple[str, str]]:
    """(locale dir relative to root, language) for every shipped language of every catalogue."""
    return [(str(d.relative_to(root)), lang) for d in locale_dirs(root) for lang in SHIPPED]


def catalogue(lang: str, ext: str, where: str = "locale", root: Path = ROOT) -> Path:
    return root / where / lang / "LC_MESSAGES" / f"django.{ext}"


CATALOGUES = catalogues()


def require_gettext(environ=os.environ) -> None:
    """makemessages runs GNU xgettext: skip where it is missing, except in CI (.ci/run installs
    it), so that a CI run cannot pass with the completeness check skipped."""
    if shutil.which("xgettext") and shutil.which("msgmerge"):
        return
    if environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail("CI is set but GNU gettext (xgettext, msgmerge) is missing")
    pytest.skip("GNU gettext (xgettext) is not installed: apt-get install gettext")


def makemessages_arguments() -> list[str]:
    """The arguments `make messages` gives makemessages, read from the Makefile (one list)."""
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    ignores = re.search(r"^MESSAGES_IGNORE\s*:=(.*)$", makefile, re.M)
    assert ignores, "Makefile has no MESSAGES_IGNORE"
    return [f"-l{lang}" for lang in SHIPPED] + [
        "--no-obsolete",
        "--add-location=file",
        *ignores.group(1).split(),
    ]


def entries(catalog) -> dict:
    """(context, msgid) -> translation, for what gettext uses: translated, not fuzzy, no header.
    A .mo holds only those; a .po entry counts when it is translated and not fuzzy."""
    return {
        (entry.msgctxt, entry.msgid): (entry.msgstr, tuple(sorted(entry.msgstr_plural.items())))
        for entry in catalog
        if entry.msgid
        and "fuzzy" not in entry.flags
        and (entry.msgstr or any(entry.msgstr_plural.values()))
    }


def test_every_language_is_shipped_with_a_po_and_a_mo():
    assert SHIPPED == ["es", "de"]
    where = [str(d.relative_to(ROOT)) for d in locale_dirs()]
    # The project's catalogue and the review pages' ones at least; others join by existing.
    assert {"locale", "review/locale", "intents/locale", "webhooks/locale"} <= set(where)
    for place, lang in CATALOGUES:
        assert catalogue(lang, "po", place).is_file(), f"{place}: no {lang} .po"
        assert catalogue(lang, "mo", place).is_file(), f"{place}: no {lang} .mo"


def test_catalogues_are_found_in_every_app_with_a_locale_dir(tmp_path):
    """The discovery the other tests rely on: an app that gains a locale/ is checked too."""
    for place in ("locale", "review/locale", "newapp/locale", "tests/locale"):
        (tmp_path / place).mkdir(parents=True)
    assert catalogues(tmp_path) == [
        (place, lang) for place in ("locale", "newapp/locale", "review/locale") for lang in SHIPPED
    ]


@pytest.mark.parametrize(("place", "lang"), CATALOGUES)
def test_the_committed_mo_is_compiled_from_the_committed_po(place, lang):
    po = polib.pofile(str(catalogue(lang, "po", place)))
    mo = polib.mofile(str(catalogue(lang, "mo", place)))
    assert entries(mo) == entries(po), "out of date: run `make messages` and commit the .mo"


def placeholders_lost(catalog) -> list[str]:
    """Entries whose translation lost or added a %(name)s (each plural form too)."""
    broken = []
    for entry in catalog:
        if "fuzzy" in entry.flags:
            continue
        wanted = sorted(PLACEHOLDER.findall(entry.msgid))
        wanted_plural = sorted(PLACEHOLDER.findall(entry.msgid_plural or entry.msgid))
        if entry.msgstr and sorted(PLACEHOLDER.findall(entry.msgstr)) != wanted:
            broken.append(entry.msgid)
        # A singular form may drop the count ("The approved draft…"), never another name.
        for form, text in sorted(entry.msgstr_plural.items()):
            names = set(PLACEHOLDER.findall(text))
            if text and not (set(wanted) - {"count", "n"} <= names <= set(wanted_plural)):
                broken.append(f"{entry.msgid} [{form}]")
    return broken


@pytest.mark.parametrize(("place", "lang"), CATALOGUES)
def test_translations_keep_every_placeholder(place, lang):
    assert placeholders_lost(polib.pofile(str(catalogue(lang, "po", place)))) == []


def test_a_lost_placeholder_is_found():
    catalog = polib.POFile()
    catalog.append(polib.POEntry(msgid="Held by %(name)s", msgstr="Übernommen"))
    catalog.append(
        polib.POEntry(
            msgid="%(n)s attempt",
            msgid_plural="%(n)s attempts",
            msgstr_plural={0: "%(n)s Versuch", 1: "%(m)s Versuche"},
        )
    )
    assert placeholders_lost(catalog) == ["Held by %(name)s", "%(n)s attempt [1]"]


def test_makemessages_finds_no_untranslated_string(tmp_path):
    """Extract the strings of the code as it is now (in a copy, so the checkout's catalogues are
    not rewritten) and require a translation, not fuzzy, for every one of them."""
    require_gettext()
    copy = tmp_path / "src"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".venv", ".data", ".tools", ".git", "mutants", "node_modules", "__pycache__", "tests"
        ),
    )
    env = {
        **os.environ,
        "COUNTERSIGN_ENV": "test",
        # Settings want a database URL; makemessages never connects (no embedded server start).
        "DATABASE_URL": "postgres://unused@127.0.0.1:9/unused",
    }
    subprocess.run(
        [sys.executable, "manage.py", "makemessages", *makemessages_arguments()],
        cwd=copy,
        env=env,
        check=True,
        capture_output=True,
    )
    missing = {}
    extracted = catalogues(copy)
    # Every catalogue of the checkout is refreshed (none is left out of the extraction) ...
    assert extracted == CATALOGUES
    for place, lang in extracted:
        po = polib.pofile(str(catalogue(lang, "po", place, root=copy)))
        gaps = [f"{e.occurrences[:1]} {e.msgid!r}" for e in po.untranslated_entries()]
        gaps += [f"{e.occurrences[:1]} {e.msgid!r} (fuzzy)" for e in po.fuzzy_entries()]
        if gaps:
            missing[f"{place} {lang}"] = gaps
    # ... and an app without a locale/ of its own has its strings in the project's catalogue, so
    # a string cannot escape the check by living in an app nobody translates.
    assert missing == {}, "untranslated: run `make messages`, translate, run it again"


@pytest.mark.parametrize(("place", "lang"), CATALOGUES)
def test_each_translation_is_the_one_served(place, lang):
    """Django merges every catalogue: the project's locale/ first, then the apps' in
    INSTALLED_APPS order (django.contrib.admin, django_q... before ours). A msgid another
    catalogue also translates is served from there ("Filter" is admin's), so an app's own
    translation would silently never show: such a msgid needs a context (pgettext)."""
    from django.utils import translation

    overridden = []
    with translation.override(lang):
        for entry in polib.pofile(str(catalogue(lang, "po", place))):
            if not entry.msgid or entry.msgid_plural or not entry.msgstr or "fuzzy" in entry.flags:
                continue
            if entry.msgctxt:
                served = translation.pgettext(entry.msgctxt, entry.msgid)
            else:
                served = translation.gettext(entry.msgid)
            if served != entry.msgstr:
                overridden.append(f"{entry.msgid!r}: {served!r} instead of {entry.msgstr!r}")
    assert overridden == []
