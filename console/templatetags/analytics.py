"""``{% load analytics %}``: ``{{ seconds|duration_words }}`` ("35 min", "2 h 5 min", "3 d 4 h")
for the reviewer analytics page; the CSV and the API carry the seconds."""

from __future__ import annotations

from django import template
from django.utils.translation import gettext as _

register = template.Library()


@register.filter
def duration_words(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes = round(seconds / 60)
    if minutes < 60:
        return _("%(m)s min") % {"m": minutes}
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return _("%(h)s h %(m)s min") % {"h": hours, "m": minutes}
    days, hours = divmod(hours, 24)
    return _("%(d)s d %(h)s h") % {"d": days, "h": hours}
