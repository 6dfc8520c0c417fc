"""The shipped translations: complete for the code as it is, and compiled from the .po files that
are committed (the .mo files are committed too, so a fresh clone needs no gettext)."""

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


def catalogue(lang: str, ext: str) -> Path:
    return ROOT / "locale" / lang / "LC_MESSAGES" / f"django.{ext}"


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
    for lang in SHIPPED:
        assert catalogue(lang, "po").is_file() and catalogue(lang, "mo").is_file()


@pytest.mark.parametrize("lang", SHIPPED)
def test_the_committed_mo_is_compiled_from_the_committed_po(lang):
    po = polib.pofile(str(catalogue(lang, "po")))
    mo = polib.mofile(str(catalogue(lang, "mo")))
    assert entries(mo) == entries(po), "out of date: run `make messages` and commit the .mo"


@pytest.mark.parametrize("lang", SHIPPED)
def test_translations_keep_every_placeholder(lang):
    broken = [
        entry.msgid
        for entry in polib.pofile(str(catalogue(lang, "po")))
        if entry.translated()
        and entry.msgstr
        and sorted(PLACEHOLDER.findall(entry.msgid)) != sorted(PLACEHOLDER.findall(entry.msgstr))
    ]
    assert broken == []


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
    for lang in SHIPPED:
        po = polib.pofile(str(copy / "locale" / lang / "LC_MESSAGES" / "django.po"))
        gaps = [f"{e.occurrences[:1]} {e.msgid!r}" for e in po.untranslated_entries()]
        gaps += [f"{e.occurrences[:1]} {e.msgid!r} (fuzzy)" for e in po.fuzzy_entries()]
        if gaps:
            missing[lang] = gaps
    assert missing == {}, "untranslated: run `make messages`, translate, run it again"
