"""Times in the reader's zone, saying which zone it is. For every app's templates:
``{% load zones %}``, then ``{{ draft.created_at|zoned }}`` ("1 Dec 2026, 14:05 CET" for a user
in Europe/Berlin, "… 13:05 UTC" for one without a zone) or ``{{ value|zoned:"j M H:i" }}`` with
any format of Django's ``date`` filter (month names follow the active language), and
``{% current_zone %}`` for a label such as "When (Europe/Berlin)". Django's own ``date`` and
``time`` filters follow the active zone too; these add the zone's name so no page has to write it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.template.defaultfilters import date as date_filter
from django.utils import timezone

register = template.Library()

DEFAULT_FORMAT = "j M Y, H:i"


@register.filter(is_safe=False)
def zoned(value: datetime | None, fmt: str = DEFAULT_FORMAT) -> str:
    if not value:
        return ""
    if timezone.is_aware(value):
        try:
            value = timezone.localtime(value)
        except OverflowError:
            # Next to the calendar's ends (year 1 seen from the west, 9999 from the east) the
            # reader's zone cannot hold the instant: it is shown in UTC rather than failing the page.
            value = value.astimezone(UTC)
    # "T" is the zone's abbreviation at that instant (CET in winter, CEST in summer); zones that
    # have none show their offset ("-03").
    return f"{date_filter(value, fmt)} {date_filter(value, 'T')}"


@register.simple_tag
def current_zone() -> str:
    """The IANA name of the zone times are shown in for this request."""
    return timezone.get_current_timezone_name()
