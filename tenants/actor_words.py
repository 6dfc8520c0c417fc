"""A person named in a journal as they were when they acted, with today's address when it has
changed since: the console's audit log and the review pages' send journal say it alike."""

from __future__ import annotations

from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _

SINCE_RENAMED = _("%(then)s (now %(now)s)")


def then_and_now(then: str, now: str) -> SafeString:
    """``then`` (the address they acted under) and ``now`` (theirs today), each escaped."""
    values = {"then": conditional_escape(then), "now": conditional_escape(now)}
    return mark_safe(conditional_escape(str(SINCE_RENAMED)) % values)  # noqa: S308 - escaped
