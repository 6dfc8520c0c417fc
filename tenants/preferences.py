"""A person's language and time zone: the rules for them, the one writer, and what a request uses.

The staff UI speaks the user's chosen language, else the browser's (Accept-Language), else
English; times are shown in the user's time zone, else UTC. Only the staff UI's own text is
translated: the customer's mail and the drafts are shown exactly as they were written.
"""

from __future__ import annotations

import importlib.resources
import zoneinfo
from datetime import tzinfo
from functools import cache

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from tenants.models import AuditEvent, User
from tenants.services import AdminError


def language_codes() -> list[str]:
    return [code for code, _name in settings.LANGUAGES]


# Names that are files of a zone tree but not zones anyone lives in: "localtime" is the host's
# /etc/localtime (times would follow however the server is configured, labelled "localtime"),
# "posixrules" a template for POSIX TZ strings, "Factory" a placeholder whose abbreviation is "-00".
NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


@cache
def time_zone_names() -> frozenset[str]:
    """The IANA zone names a person may choose (the list offered and the check are this one set).

    The tzdata package's own list when it is installed (python-dateutil brings it), so the choice
    does not depend on the host: zoneinfo.available_timezones() also walks the system's tree,
    which has files such as "localtime" that are not IANA zones.
    """
    try:
        listed = (importlib.resources.files("tzdata") / "zones").read_text(encoding="utf-8")
    except (ModuleNotFoundError, OSError):
        names = set(zoneinfo.available_timezones())
    else:
        names = set(listed.split())
    return frozenset(names - NOT_ZONES)


def check_language(value: str) -> str:
    """The language code to store ("" for the browser's), or a refusal naming the choices."""
    value = (value or "").strip()
    if value and value not in language_codes():
        choices = ", ".join(f"{name} ({code})" for code, name in settings.LANGUAGES)
        raise AdminError(
            "unknown_language",
            _("“%(value)s” is not a language Countersign offers. Choose one of: %(choices)s.")
            % {"value": value, "choices": choices},
            "language",
        )
    return value


def check_time_zone(value: str) -> str:
    """The IANA zone name to store ("" for UTC), or a refusal that says what a name looks like."""
    value = (value or "").strip()
    if value and value not in time_zone_names():
        raise AdminError(
            "unknown_time_zone",
            _(
                "“%(value)s” is not a time zone name. Use an IANA name such as Europe/Berlin, "
                "America/Mexico_City or UTC (the list offers them as you type)."
            )
            % {"value": value},
            "time_zone",
        )
    return value


def user_set_preferences(*, user: User, language: str, time_zone: str) -> User:
    """Store a user's language and time zone, both checked first (a refusal changes nothing)."""
    language = check_language(language)
    time_zone = check_time_zone(time_zone)
    with transaction.atomic():
        before = User.objects.select_for_update().values("language", "time_zone").get(pk=user.pk)
        User.objects.filter(pk=user.pk).update(language=language, time_zone=time_zone)
        AuditEvent.objects.create(
            tenant=None,
            actor=user,
            action="user.preferences_changed",
            object_type="user",
            object_id=str(user.pk),
            data={"before": before, "after": {"language": language, "time_zone": time_zone}},
        )
    user.language, user.time_zone = language, time_zone
    return user


def zone_for(user: User) -> tzinfo | None:
    """The user's zone, or None (UTC) when they chose none or the name is no longer a zone.

    A name written behind check_time_zone's back (a shell, a data fix, an older release that took
    "localtime") must not break every page of that person, the preferences page included: a folder
    of the zone tree ("Europe") raises IsADirectoryError, an unreadable file another OSError, a
    malformed one ValueError.
    """
    if not user.time_zone or user.time_zone not in time_zone_names():
        return None
    try:
        return zoneinfo.ZoneInfo(user.time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, OSError, ValueError):
        return None
