"""The word-level diff a reviewer sees between two versions of a draft: escaped HTML with
<ins>/<del>, and which recipients and files were added or removed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from intents.changes import word_opcodes
from intents.models import DraftVersion


def word_diff(old: str, new: str) -> SafeString:
    """Word-level diff as escaped HTML with <ins>/<del>; whitespace is kept as written, except
    that CRLF and lone CR compare as LF: versions saved before the draft services normalised line
    endings hold the browser's CRLF, and every line of them would show as changed. In bounded
    time (``word_opcodes``): a long changed stretch may show as replaced whole."""
    a, b, opcodes = word_opcodes(old, new)
    parts: list[str] = []
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            parts.append(escape("".join(a[i1:i2])))
            continue
        if op in ("delete", "replace"):
            parts.append(f"<del>{escape(''.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            parts.append(f"<ins>{escape(''.join(b[j1:j2]))}</ins>")
    return mark_safe("".join(parts))  # noqa: S308 - every piece above is escaped


@dataclass
class VersionDiff:
    base: DraftVersion
    target: DraftVersion
    subject: SafeString
    text: SafeString
    html_changed: bool
    added: list[str]
    removed: list[str]
    # Files (attachment rows) of one version with no file of the same name, type and bytes in
    # the other: the hash covers all three, so a file replaced under its old name is both.
    files_added: list = field(default_factory=list)
    files_removed: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.base.content_hash != self.target.content_hash and (
            self.base.subject != self.target.subject
            or self.base.text != self.target.text
            or self.html_changed
            or bool(self.added or self.removed)
            or bool(self.files_added or self.files_removed)
        )


def _files_only_in(version: DraftVersion, other: DraftVersion) -> list:
    """``version``'s attachment rows that ``other`` does not carry (same name, type, digest),
    counted: the hash covers each copy, so a second copy of a file is a file added."""

    def key(row) -> tuple[str, str, str]:
        return (row.filename, row.content_type, row.sha256)

    theirs = Counter(key(row) for row in other.attachments.all())
    only = []
    for row in version.attachments.all():
        if theirs[key(row)]:
            theirs[key(row)] -= 1
        else:
            only.append(row)
    return only


def version_diff(base: DraftVersion, target: DraftVersion) -> VersionDiff:
    def tagged(v):
        return {f"{k}: {a.lower()}" for k in ("to", "cc", "bcc") for a in getattr(v, k)}

    old, new = tagged(base), tagged(target)
    return VersionDiff(
        base=base,
        target=target,
        subject=word_diff(base.subject, target.subject),
        text=word_diff(base.text, target.text),
        html_changed=base.html != target.html,
        added=sorted(new - old),
        removed=sorted(old - new),
        files_added=_files_only_in(target, base),
        files_removed=_files_only_in(base, target),
    )
