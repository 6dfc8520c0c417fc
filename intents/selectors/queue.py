"""The review queue of drafts, keyset-paginated."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Prefetch, Q

from intents.errors import InvalidInput
from intents.models import Draft, DraftVersion
from intents.selectors.common import DEFAULT_PAGE, Page, decode_cursor, encode_cursor, limit_of


def draft_queue(
    *, tenant, status: str = Draft.Status.PENDING, mailbox_ids=None, cursor=None, limit=DEFAULT_PAGE
) -> Page:
    """Drafts in one status, oldest first (the review queue), keyset-paginated."""
    limit = limit_of(limit)
    if status not in Draft.Status.values:
        raise InvalidInput("status_invalid", f"Unknown status {status!r}.", "status")
    qs = (
        Draft.objects.filter(tenant=tenant, status=status)
        .select_related("mailbox", "agent_token")
        .prefetch_related(
            Prefetch(
                "versions",
                queryset=DraftVersion.objects.order_by("number"),
                to_attr="all_versions",
            )
        )
        .order_by("created_at", "id")
    )
    if mailbox_ids is not None:
        qs = qs.filter(mailbox_id__in=list(mailbox_ids))
    if cursor:
        created, pk = decode_cursor(cursor, 2)
        try:
            created_at = datetime.fromisoformat(created)
            pk = int(pk)
        except ValueError:
            raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor") from None
        qs = qs.filter(Q(created_at__gt=created_at) | Q(created_at=created_at, id__gt=pk))
    rows = list(qs[: limit + 1])
    for draft in rows:
        versions = draft.all_versions
        draft.current = next((v for v in versions if v.number == draft.current_version), None)
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1].created_at, rows[-1].pk)
    return Page(rows, next_cursor, limit)
