"""What a person changed between two versions of a draft, as data: the structured diff that agent
events carry and that the reviewer analytics measure.

The reviewer's page renders its own HTML diff (``review/diff.py``); this one is for programs, so it
is plain JSON-ready values and counts, and it is computed the same way wherever it is needed.
"""

from __future__ import annotations

import difflib
import re
from types import SimpleNamespace
from typing import cast

from django.db.models import OuterRef, QuerySet, Subquery

from intents.models import DraftVersion

_TOKEN = re.compile(r"\s+|[^\s]+")
_FIELDS = ("to", "cc", "bcc")
# SequenceMatcher's work grows with the product of the two sides (every whitespace token matches
# every other one): a 100,000-character body compared with itself took 41 s, inside the approval's
# transaction when an agent event carries the change, and past gunicorn's 30 s on the draft page.
# Longer sides are cut to what changed between their equal first and last words (linear), and a
# middle still longer than this on either side is shown as replaced whole: more than was changed,
# never less. About 0.5 s at this size.
MAX_MATCHED_TOKENS = 2_000

Opcode = tuple[str, int, int, int, int]


def _lf(body: str) -> str:
    return (body or "").replace("\r\n", "\n").replace("\r", "\n")


def word_opcodes(before: str, after: str) -> tuple[list[str], list[str], list[Opcode]]:
    """The words and spaces of ``before`` and ``after`` (CRLF and lone CR read as LF) and
    SequenceMatcher's opcodes from one to the other, in time bounded by ``MAX_MATCHED_TOKENS``
    whatever the lengths. The reviewer's diff (``review.diff``) and ``text_change`` both use it."""
    a = _TOKEN.findall(_lf(before))
    b = _TOKEN.findall(_lf(after))
    if len(a) <= MAX_MATCHED_TOKENS and len(b) <= MAX_MATCHED_TOKENS:
        whole: list[Opcode] = [*difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()]
        return a, b, whole
    shorter = min(len(a), len(b))
    head = next((i for i in range(shorter) if a[i] != b[i]), shorter)
    tail = next(
        (i for i in range(shorter - head) if a[len(a) - 1 - i] != b[len(b) - 1 - i]),
        shorter - head,
    )
    a_end, b_end = len(a) - tail, len(b) - tail
    opcodes: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
    if a_end - head <= MAX_MATCHED_TOKENS and b_end - head <= MAX_MATCHED_TOKENS:
        middle = difflib.SequenceMatcher(a=a[head:a_end], b=b[head:b_end], autojunk=False)
        opcodes += [
            (op, i1 + head, i2 + head, j1 + head, j2 + head)
            for op, i1, i2, j1, j2 in middle.get_opcodes()
        ]
    elif a_end > head or b_end > head:
        op = "replace" if a_end > head and b_end > head else "delete" if a_end > head else "insert"
        opcodes.append((op, head, a_end, head, b_end))
    if tail:
        opcodes.append(("equal", a_end, len(a), b_end, len(b)))
    return a, b, opcodes


def text_change(before: str, after: str) -> dict:
    """Word-level operations from ``before`` to ``after`` and the characters they add and remove.

    Each operation is ``{"op": "insert"|"delete"|"replace", "at": <char offset in before>,
    "before": str, "after": str}``; equal stretches are left out. CRLF and lone CR compare as LF.
    """
    a, b, opcodes = word_opcodes(before, after)
    ops: list[dict] = []
    added = removed = 0
    offset = 0
    for op, i1, i2, j1, j2 in opcodes:
        old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
        if op != "equal":
            ops.append({"op": op, "at": offset, "before": old, "after": new})
            removed += len(old)
            added += len(new)
        offset += len(old)
    return {"ops": ops, "chars_added": added, "chars_removed": removed}


def recipients_change(before: DraftVersion, after: DraftVersion) -> dict:
    """Per field (to, cc, bcc), the addresses added and removed, compared case-insensitively."""
    result: dict[str, dict[str, list[str]]] = {}
    for field in _FIELDS:
        old = {a.lower(): a for a in getattr(before, field)}
        new = {a.lower(): a for a in getattr(after, field)}
        result[field] = {
            "added": sorted(new[k] for k in new.keys() - old.keys()),
            "removed": sorted(old[k] for k in old.keys() - new.keys()),
        }
    return result


def version_change(before: DraftVersion, after: DraftVersion) -> dict:
    """The structured diff from ``before`` to ``after``.

    ``edit_size`` is the number of characters added plus removed in subject and text, a measure of
    how much a person rewrote; a recipient added or removed counts as one more.
    """
    text = text_change(before.text, after.text)
    subject = text_change(before.subject, after.subject)
    recipients = recipients_change(before, after)
    moved = sum(len(v["added"]) + len(v["removed"]) for v in recipients.values())
    html_changed = before.html != after.html
    return {
        "from_version": before.number,
        "to_version": after.number,
        "changed": bool(text["ops"] or subject["ops"] or moved or html_changed),
        "subject": {"before": before.subject, "after": after.subject} if subject["ops"] else None,
        "text": text,
        "html_changed": html_changed,
        "recipients": recipients,
        "edit_size": text["chars_added"]
        + text["chars_removed"]
        + subject["chars_added"]
        + subject["chars_removed"]
        + moved,
    }


def last_agent_version(target: DraftVersion) -> DraftVersion | None:
    """The agent's newest version at or before ``target`` (the one a person started from)."""
    return (
        DraftVersion.objects.filter(
            draft_id=target.draft_id,
            number__lte=target.number,
            author_kind=DraftVersion.Author.AGENT,
        )
        .order_by("-number")
        .first()
    )


# What ``version_change`` reads of a version, and the names ``with_agent_base`` gives them for the
# agent's version before it.
EDIT_FIELDS = ("number", "subject", "text", "html", "to", "cc", "bcc")
BASE_FIELDS = tuple(f"base_{name}" for name in EDIT_FIELDS)


def with_agent_base(versions: QuerySet[DraftVersion]) -> QuerySet[DraftVersion]:
    """``versions`` with the ``EDIT_FIELDS`` of the agent's newest version at or before each, as
    ``BASE_FIELDS`` (None when an agent wrote none), in the same query (subqueries on the
    (draft, number) key)."""
    base = DraftVersion.objects.filter(
        draft_id=OuterRef("draft_id"),
        number__lte=OuterRef("number"),
        author_kind=DraftVersion.Author.AGENT,
    ).order_by("-number")
    return versions.annotate(
        **{f"base_{name}": Subquery(base.values(name)[:1]) for name in EDIT_FIELDS}
    )


def edit_size_from_agent(row: dict) -> int | None:
    """The ``edit_size`` from the agent's version to this one, for a row of ``with_agent_base``
    read with ``EDIT_FIELDS`` and ``BASE_FIELDS``; None when nothing changed (a reopened copy, an
    edit undone) or no agent's version came before. Plain objects with the fields
    ``version_change`` reads: building model instances took half the time of the analytics'
    pass at 10,000 edited drafts."""
    if row["base_number"] is None:
        return None
    after = SimpleNamespace(**{name: row[name] for name in EDIT_FIELDS})
    before = SimpleNamespace(**{name: row[f"base_{name}"] for name in EDIT_FIELDS})
    change = version_change(cast(DraftVersion, before), cast(DraftVersion, after))
    return change["edit_size"] if change["changed"] else None


def change_from_agent(target: DraftVersion) -> dict | None:
    """The structured diff from the agent's last version to ``target`` (``None`` when a person
    wrote every version, which the API does not allow today but the model does)."""
    base = last_agent_version(target)
    if base is None:
        return None
    return version_change(base, target)
