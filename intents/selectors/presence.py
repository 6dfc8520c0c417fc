"""Who else has drafts open right now: one query for any number of drafts."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from django.db.models.functions import Now

from intents.models import DraftPresence

# A heartbeat every few seconds (the page polls); without one for this long, a person is gone.
PRESENCE_SECONDS = 30


def present_on_drafts(*, tenant, draft_ids, exclude_user=None) -> dict[int, list[DraftPresence]]:
    """draft id -> the people (other than ``exclude_user``) seen on it within PRESENCE_SECONDS
    (database clock), editors first, then by when they came."""
    ids = [int(i) for i in draft_ids]
    if not ids:
        return {}
    qs = (
        DraftPresence.objects.filter(
            tenant=tenant,
            draft_id__in=ids,
            seen_at__gt=Now() - timedelta(seconds=PRESENCE_SECONDS),
            user__is_active=True,
        )
        .select_related("user")
        .order_by("draft_id", "mode", "started_at", "id")
    )
    if exclude_user is not None:
        qs = qs.exclude(user=exclude_user)
    found: dict[int, list[DraftPresence]] = defaultdict(list)
    for row in qs:
        found[row.draft_id].append(row)
    return dict(found)
