"""What a version's content shows otherwise to some reader, read once per content.

The queue marks each row offered for bulk approval whose current version another reader sees
otherwise (``review.pages``): its HTML's looks (``html_styles.reader_looks``), links that lead
elsewhere than they show (``html_links.misleading_links``), characters nobody sees and domains
that read as another (``policy.invisible_in_content``, ``policy.lookalike_hosts_in_content``).
Those checks read whole bodies in Python, about a second per megabyte: a queue page of 50 drafts
with large HTML took 40 s, on every load. A version never changes, and its ``content_hash``
covers its subject, text and HTML exactly, so the marks are kept in the cache under that hash
and the rules' own digest (``RULES``: the source of the modules that decide them, so a release
that changes a rule never reads marks of the old one). Only the versions the cache does not
hold are read, in one query.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.core.cache import cache as marks_cache
from django.db.models import F

from intents.html_links import misleading_links
from intents.html_styles import reader_looks
from intents.models import DraftVersion
from intents.policy import invisible_in_content, lookalike_hosts_in_content

# A week: marks are small, and a version is decided within its review deadline.
MARKS_SECONDS = 7 * 24 * 3600

# The modules whose rules the marks follow: those that decide them and every module of ours they
# import (tests/review/test_content_marks.py checks), or a release that changes one reads marks of
# its old rule.
_RULE_MODULES = (
    "common.addresses",
    "common.text",
    "intents.content_marks",
    "intents.css_colours",
    "intents.css_hiding",
    "intents.css_values",
    "intents.html_colours",
    "intents.html_cover",
    "intents.hostnames",
    "intents.html_hidden",
    "intents.html_links",
    "intents.html_styles",
    "intents.html_tokens",
    "intents.policy",
)


@dataclass(frozen=True)
class ContentMarks:
    reader_looks: tuple[str, ...] = ()
    misleading_links: bool = False
    invisible_characters: bool = False
    lookalike_hosts: bool = False


@cache
def rules_digest() -> str:
    """A digest of the source of the modules that decide the marks, read once per process."""
    digest = hashlib.sha256()
    for name in _RULE_MODULES:
        digest.update(Path(importlib.import_module(name).__file__ or "").read_bytes())
    return digest.hexdigest()[:16]


def marks_of(*, subject: str, text: str, html: str) -> ContentMarks:
    """The marks of one content, read now."""
    text = _text_to_read(text)
    return ContentMarks(
        reader_looks=tuple(reader_looks(html)),
        misleading_links=bool(misleading_links(html)),
        invisible_characters=bool(invisible_in_content(subject=subject, text=text, html=html)),
        lookalike_hosts=bool(lookalike_hosts_in_content(subject=subject, text=text, html=html)),
    )


def _key(content_hash: str) -> str:
    return f"content-marks:{rules_digest()}:{content_hash}"


def _text_to_read(text: str) -> str:
    """A text that holds a character outside ASCII or a Punycode label, else nothing: the only
    texts a mark can come from, and an English text of a megabyte is not read through them."""
    return text if not text.isascii() or "xn--" in text.lower() else ""


def keep_marks(version: DraftVersion) -> ContentMarks:
    """Read a new version's marks once its transaction has committed (``transaction.on_commit``,
    robust: a failure here is logged and costs the queue one read later), so that the queue
    reads no body of it. Returns them."""
    marks = marks_of(subject=version.subject, text=version.text, html=version.html)
    marks_cache.set(_key(version.content_hash), marks, timeout=MARKS_SECONDS)
    return marks


def kept_marks(content_hash: str) -> ContentMarks | None:
    """The marks kept for a content, or None when the cache holds none: no body is read."""
    return marks_cache.get(_key(content_hash))


def current_content_marks(*, tenant, draft_ids) -> dict[int, ContentMarks]:
    """The marks of each draft's current version: from the cache where it holds them (a version
    written since this module's rules is kept there when it commits: ``keep_marks``), else read
    from the versions the cache lacks, in one query, and kept."""
    if not draft_ids:
        return {}
    current = DraftVersion.objects.filter(
        tenant=tenant, draft_id__in=draft_ids, number=F("draft__current_version")
    )
    keys = {
        draft_id: _key(content_hash)
        for draft_id, content_hash in current.values_list("draft_id", "content_hash")
    }
    held = marks_cache.get_many(list(keys.values()))
    marks = {draft_id: held[key] for draft_id, key in keys.items() if key in held}
    missing = [draft_id for draft_id in keys if draft_id not in marks]
    if not missing:
        return marks
    made = {
        draft_id: marks_of(subject=subject, text=text, html=html)
        for draft_id, subject, text, html in current.filter(draft_id__in=missing).values_list(
            "draft_id", "subject", "text", "html"
        )
    }
    marks_cache.set_many({keys[d]: m for d, m in made.items()}, timeout=MARKS_SECONDS)
    return {**marks, **made}
