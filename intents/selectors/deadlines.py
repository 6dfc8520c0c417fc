"""Deadline (SLA) breaches for the health panel: per mailbox and per reviewer."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, F, Q
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from intents.models import Draft
from tenants.models import User

BREACH_WINDOW = timedelta(days=7)


def _breached(tenant, since: datetime):
    """Drafts whose target fell in the window and passed before a decision: still pending past
    it, or decided late (the sweep may not have seen a late decision)."""
    return Draft.objects.filter(
        tenant=tenant, sla_due_at__gte=since, sla_due_at__lt=timezone.now()
    ).filter(Q(sla_due_at__lt=Coalesce(F("decided_at"), Now())))


def sla_breaches(*, tenant, since: datetime | None = None) -> dict[str, list[tuple[str, int]]]:
    """{"mailboxes": [(address, n)], "reviewers": [(name, n)]}, most breaches first, over the
    last BREACH_WINDOW: two grouped queries. A breach counts for the reviewer who held the draft
    when it breached, or else for the one who decided it late; one with neither is unowned."""
    since = since or timezone.now() - BREACH_WINDOW
    rows = _breached(tenant, since)
    mailboxes = [
        (r["mailbox__address"], r["n"])
        for r in rows.values("mailbox__address").annotate(n=Count("id")).order_by("-n")[:20]
    ]
    holder = Coalesce(F("sla_breach_holder_id"), F("decided_by_id"))
    grouped = (
        rows.annotate(reviewer=holder)
        .values("reviewer")
        .annotate(n=Count("id"))
        .order_by("-n")[:20]
    )
    names = {
        u.pk: u.display_name
        for u in User.objects.filter(pk__in=[r["reviewer"] for r in grouped if r["reviewer"]])
    }
    reviewers = [(names.get(r["reviewer"], ""), r["n"]) for r in grouped]
    return {"mailboxes": mailboxes, "reviewers": reviewers}
