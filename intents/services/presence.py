"""Presence: who has a draft open right now (``DraftPresence``), from the pages' heartbeats."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from intents import errors
from intents.models import Draft, DraftPresence
from intents.policy import user_may_decide
from intents.selectors.presence import PRESENCE_SECONDS


def presence_beat(*, tenant, draft_id, user, mode: str) -> None:
    """Record that ``user`` has the draft open, viewing or editing. One upsert, no transaction
    of its own and no journal row: presence is ephemeral and changes no state of the draft.
    ``started_at`` restarts when the mode changes or after the person had gone."""
    try:
        pk = int(draft_id)
    except (TypeError, ValueError):
        raise errors.NotFound("not_found", "No such draft.") from None
    # Another tenant's draft is a 404 whatever else is wrong with the request.
    draft = Draft.objects.filter(tenant=tenant, pk=pk).select_related("mailbox").first()
    if draft is None:
        raise errors.NotFound("not_found", "No such draft.")
    if mode not in DraftPresence.Mode.values:
        raise errors.InvalidInput("bad_mode", _("Presence is viewing or editing."), "mode")
    if mode == DraftPresence.Mode.EDITING and (
        draft.status != Draft.Status.PENDING
        or not user_may_decide(tenant=tenant, user=user, mailbox=draft.mailbox)
    ):
        # Only someone who may edit the draft shows as editing it (a viewer's page could claim
        # to, and warn colleagues off a draft nobody was changing), and only while it can be
        # edited (an editor left open after a colleague decided it): they count as viewing.
        mode = DraftPresence.Mode.VIEWING
    table = DraftPresence._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} AS p (tenant_id, draft_id, user_id, mode, started_at, seen_at) "  # noqa: S608
            "VALUES (%s, %s, %s, %s, STATEMENT_TIMESTAMP(), STATEMENT_TIMESTAMP()) "
            "ON CONFLICT (draft_id, user_id) DO UPDATE SET mode = EXCLUDED.mode, "
            "seen_at = EXCLUDED.seen_at, started_at = CASE WHEN p.mode <> EXCLUDED.mode "
            "OR p.seen_at < EXCLUDED.seen_at - make_interval(secs => %s) "
            "THEN EXCLUDED.started_at ELSE p.started_at END",
            [tenant.pk, pk, user.pk, mode, PRESENCE_SECONDS],
        )


def presence_leave(*, tenant, draft_id, user) -> None:
    """The person closed the page (best effort: the expiry covers a page that just vanished)."""
    DraftPresence.objects.filter(tenant=tenant, draft_id=draft_id, user=user).delete()


def presence_purge() -> int:
    """Forget presence rows nobody has refreshed for a day (daily, with the retention purge)."""
    deleted, _rows = DraftPresence.objects.filter(seen_at__lt=Now() - timedelta(days=1)).delete()
    return deleted
