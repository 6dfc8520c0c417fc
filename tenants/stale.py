"""The stale-save guard of the settings forms that several admins may have open at once (a
tenant's policies, own domains, deadlines, two-factor requirement and single sign-on; a
member's role and approve rights; a mailbox's recipient policy).

Each form posts every field it shows, so a save from a page opened before another admin's save
would silently put back what that admin changed. The page carries a fingerprint of the values it
showed (``based_on``: one short digest per field, so a refusal can say which ones changed); the
service compares it, under the row's lock, with the values now stored and refuses when they
differ. Nothing is merged: the admin sees the current values and makes their change again, as a
draft edit based on an old version is refused (intents.errors.VersionConflict).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from django.utils.translation import gettext as _

DIGEST_CHARS = 16


class StaleSave(Exception):
    """A save based on values that changed since the page was opened; nothing was written.
    ``changed`` names the fields, ``message`` says so for people (a 409)."""

    code = "stale"

    def __init__(self, changed: list[str], message: str):
        super().__init__(message)
        self.changed = changed
        self.message = message


def _digest(value: object) -> str:
    canonical = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:DIGEST_CHARS]


def fingerprint(values: Mapping[str, object]) -> str:
    """``name:digest`` of each field's value, comma-separated: what a form is based on."""
    return ",".join(f"{name}:{_digest(value)}" for name, value in values.items())


def changed_since(based_on: str, values: Mapping[str, object]) -> list[str]:
    """The fields whose value is no longer the one ``based_on`` recorded (every field that it
    does not name, when it is malformed)."""
    recorded = dict(part.partition(":")[::2] for part in based_on.split(",") if part)
    return [name for name, value in values.items() if recorded.get(name) != _digest(value)]


def refuse_if_changed(
    *, based_on: str | None, current: Mapping[str, object], labels: Mapping[str, object]
) -> None:
    """Raise StaleSave when ``based_on`` is not the fingerprint of ``current`` (read under the
    row's lock). ``labels`` names each field for people. No ``based_on``: the caller is no
    page (a command, a test) and writes on purpose."""
    if based_on is None:
        return
    changed = changed_since(based_on, current)
    if changed:
        names = ", ".join(str(labels[name]) for name in changed)
        raise StaleSave(
            changed,
            _(
                "Someone changed %(fields)s since you opened this page. Nothing was saved: the "
                "form now shows the current values; make your change again."
            )
            % {"fields": names},
        )
