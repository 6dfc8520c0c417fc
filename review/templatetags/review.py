"""Small display helpers for the review and outbox pages."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def duration(value: timedelta | float | None) -> str:
    """A compact duration: 45 s, 12 min, 3 h 5 min, 2 d 4 h."""
    if value is None:
        return "\u2013"
    seconds = int(value.total_seconds() if isinstance(value, timedelta) else value)
    if seconds < 0:
        seconds = 0
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


@register.filter
def age(value: datetime | None) -> str:
    return duration(timezone.now() - value) if value else "\u2013"


@register.filter
def age_class(value: datetime | None) -> str:
    """Badge colour of a draft's waiting time: calm under an hour, amber after, red after 4 h."""
    if value is None:
        return ""
    waited = timezone.now() - value
    if waited >= timedelta(hours=4):
        return "bad"
    if waited >= timedelta(hours=1):
        return "warn"
    return "ok"


@register.filter
def until(value: datetime | None) -> str:
    if value is None:
        return "\u2013"
    left = value - timezone.now()
    if left.total_seconds() <= 0:
        return "passed"
    return duration(left)


@register.filter
def deadline_class(value: datetime | None) -> str:
    if value is None:
        return ""
    left = value - timezone.now()
    if left <= timedelta(hours=2):
        return "bad"
    if left <= timedelta(hours=8):
        return "warn"
    return "info"


@register.filter
def short_hash(value: str | None) -> str:
    return (value or "")[:12]


STATE_CLASS = {
    "queued": "info",
    "sending": "info",
    "accepted": "ok",
    "uncertain": "warn",
    "needs_attention": "bad",
    "failed": "bad",
    "blocked": "bad",
    "expired": "",
    "cancelled": "",
    "pending": "info",
    "approved": "ok",
    "rejected": "bad",
    "withdrawn": "",
    "sent": "info",
    "delivered": "ok",
    "bounced": "bad",
    "complained": "bad",
    "retry": "warn",
    "permanent": "bad",
    "not_found": "warn",
    "fenced": "warn",
}


@register.filter
def state_class(value: str) -> str:
    return STATE_CLASS.get(value or "", "")


@register.filter
def first(value):
    return value[0] if value else ""


@register.filter
def sla_state(draft) -> str:
    """Where a pending draft stands against its deadline: "breached", "warning" (inside its
    warning window), "ok", or "" without a deadline. Shown as words, not only as a colour."""
    due = getattr(draft, "sla_due_at", None)
    if due is None:
        return ""
    now = timezone.now()
    if due <= now:
        return "breached"
    warn = draft.sla_warn_at
    if warn is not None and warn <= now:
        return "warning"
    return "ok"


@register.filter
def claim_lapsed(draft) -> bool:
    expires = getattr(draft, "claim_expires_at", None)
    return expires is not None and expires <= timezone.now()
