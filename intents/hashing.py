"""The content hash: what a person approves, reduced to one sha256 (DESIGN.md "Content hash")."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

# Bumped if the canonical form ever changes, so old and new hashes can never collide.
HASH_SCHEME = 1


def _addresses(values: Iterable[str]) -> list[str]:
    return sorted(str(v).strip().lower() for v in values)


def canonical_content(
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
        "scheme": HASH_SCHEME,
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
    attachments: Iterable[tuple[str, str]] = (),
) -> str:
    return hashlib.sha256(
        canonical_content(
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


def version_hash(version) -> str:
    """Recompute a stored DraftVersion's hash from its fields (the worker's pre-call check)."""
    return content_hash(
        mailbox_id=version.draft.mailbox_id,
        to=version.to,
        cc=version.cc,
        bcc=version.bcc,
        subject=version.subject,
        text=version.text,
        html=version.html,
        in_reply_to=version.draft.in_reply_to,
    )
