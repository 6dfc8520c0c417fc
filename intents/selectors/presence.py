"""Who else has drafts open right now: one query for any number of drafts."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from django.db.models import Exists, OuterRef
from django.db.models.functions import Now

from intents.models import DraftPresence
from tenants.models import Membership

# A heartbeat every few seconds (the page polls); without one for this long, a person is gone.
PRESENCE_SECONDS = 30


def present_on_drafts(*, tenant, draft_ids, exclude_user=None) -> dict[int, list[DraftPresence]]:
    """draft id -> the people (other than ``exclude_user``) seen on it within PRESENCE_SECONDS
    (database clock), editors first, then by when they came. Only active members of the tenant:
    a member removed with the page open stays 'editing' to the others no longer than a
    deactivated account did (their next beat is refused)."""
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
        .filter(
            Exists(
                Membership.objects.filter(
                    tenant_id=OuterRef("tenant_id"), user_id=OuterRef("user_id"), is_active=True
                )
            )
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
