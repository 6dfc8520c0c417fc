"""django-q2 entry points. Each takes ids, calls one service and is safe to run twice or
concurrently on several clusters: the mailbox rows, not the queue, say what is pending."""

from __future__ import annotations

from mailboxes.display_names import mailbox_sync_display_name, mailboxes_sync_display_names


def sync_display_name(mailbox_id: int) -> bool:
    """Woken on the commit of a rename: bring AgentMail to the mailbox's new display name."""
    return mailbox_sync_display_name(mailbox_id=int(mailbox_id))


def sync_display_names() -> int:
    """Every minute: retry the renames AgentMail does not hold yet (bounded, with backoff)."""
    return mailboxes_sync_display_names()
