"""The content hash: what a person approves, reduced to one sha256 (DESIGN.md "Content hash")."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable

# How the scheme rule keeps every stored approval verifiable (tests/intents/test_hashing.py pins it):
# - A scheme is frozen once released: its canonical form and digest for given content never change
#   (known-answer tests pin each scheme's bytes and digest). A change to what or how we hash is a
#   new scheme number, with its own canonical function added to ``_CANONICAL``; the old one stays.
# - The stored hash implies its scheme: scheme 1 is the bare 64-character sha256 hex that every
#   version stored so far carries; a later scheme N is stored as "N:" + hex (``format_hash``; the
#   column and the approve form's pattern must be widened in the same change).
# - Verification (``version_hash``, the worker's pre-call check) recomputes with the scheme the
#   stored hash names, so a version approved under scheme 1 still matches after scheme 2 ships.
#   A stored hash that names no known scheme is recomputed with the current one and so never
#   matches: the send is blocked (fail closed).
HASH_SCHEME = 2  # the scheme new versions are hashed with


def _addresses(values: Iterable[str]) -> list[str]:
    return sorted(str(v).strip().lower() for v in values)


def _canonical_v1(
    *,
    mailbox_id: int,
    to: Iterable[str],
    cc: Iterable[str],
    bcc: Iterable[str],
    subject: str,
    text: str,
    html: str,
    in_reply_to: str,
    attachments: Iterable[tuple[str, str]] = (),
) -> bytes:
    document = {
        "scheme": 1,
        "mailbox_id": int(mailbox_id),
        "to": _addresses(to),
        "cc": _addresses(cc),
        "bcc": _addresses(bcc),
        "subject": subject,
        "text": text,
        "html": html,
        "in_reply_to": in_reply_to or "",
        "attachments": sorted([str(name), str(digest)] for name, digest in attachments),
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def _canonical_v2(
    *,
    mailbox_id: int,
    to: Iterable[str],
    cc: Iterable[str],
    bcc: Iterable[str],
    subject: str,
    text: str,
    html: str,
    in_reply_to: str,
    attachments: Iterable[tuple[str, str, str]] = (),
) -> bytes:
    """Scheme 2: scheme 1's fields, and each attachment as [filename, content type, sha256]
    (scheme 1 had no content type: a file renamed nothing but relabelled from text/plain to
    text/html would have kept its approval)."""
    document = {
        "scheme": 2,
        "mailbox_id": int(mailbox_id),
        "to": _addresses(to),
        "cc": _addresses(cc),
        "bcc": _addresses(bcc),
        "subject": subject,
        "text": text,
        "html": html,
        "in_reply_to": in_reply_to or "",
        "attachments": sorted(
            [str(name), str(content_type), str(digest)]
            for name, content_type, digest in attachments
        ),
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


_CANONICAL: dict[int, Callable[..., bytes]] = {1: _canonical_v1, 2: _canonical_v2}
_STORED_HASH = re.compile(r"(?:([1-9][0-9]*):)?[0-9a-f]{64}")


def canonical_content(*, scheme: int = HASH_SCHEME, **content) -> bytes:
    """The bytes that are hashed under ``scheme`` (by default the current one)."""
    return _CANONICAL[scheme](**content)


def format_hash(scheme: int, hexdigest: str) -> str:
    """The stored form of a digest: bare hex for scheme 1, "N:hex" for any later scheme."""
    return hexdigest if scheme == 1 else f"{scheme}:{hexdigest}"


def scheme_of(stored_hash: str) -> int | None:
    """The scheme a stored hash was made with, or None if it names no known scheme."""
    match = _STORED_HASH.fullmatch(stored_hash)
    if match is None:
        return None
    if match.group(1) is None:
        return 1
    scheme = int(match.group(1))
    return scheme if scheme != 1 and scheme in _CANONICAL else None


def content_hash(
    *,
    mailbox_id: int,
    to: Iterable[str],
    cc: Iterable[str],
    bcc: Iterable[str],
    subject: str,
    text: str,
    html: str,
    in_reply_to: str,
    attachments: Iterable[tuple] = (),
    scheme: int = HASH_SCHEME,
) -> str:
    """The stored form of the hash of this content under ``scheme`` (by default the current one)."""
    digest = hashlib.sha256(
        canonical_content(
            scheme=scheme,
            mailbox_id=mailbox_id,
            to=to,
            cc=cc,
            bcc=bcc,
            subject=subject,
            text=text,
            html=html,
            in_reply_to=in_reply_to,
            attachments=attachments,
        )
    ).hexdigest()
    return format_hash(scheme, digest)


def attachment_entries(scheme: int, attachments: Iterable) -> list[tuple]:
    """What ``scheme`` hashes of each attachment row (filename, content_type, sha256)."""
    if scheme == 1:
        return [(a.filename, a.sha256) for a in attachments]
    return [(a.filename, a.content_type, a.sha256) for a in attachments]


def version_hash(version, attachments: Iterable | None = None) -> str:
    """Recompute a stored DraftVersion's hash from its fields and attachment rows (the worker's
    pre-call check), under the scheme its stored hash names; an unknown scheme is recomputed
    with the current one. ``attachments``: the version's rows, if the caller has read them."""
    scheme = scheme_of(version.content_hash or "") or HASH_SCHEME
    rows = version.attachments.all() if attachments is None else attachments
    return content_hash(
        scheme=scheme,
        mailbox_id=version.draft.mailbox_id,
        to=version.to,
        cc=version.cc,
        bcc=version.bcc,
        subject=version.subject,
        text=version.text,
        html=version.html,
        in_reply_to=version.draft.in_reply_to,
        attachments=attachment_entries(scheme, rows),
    )
