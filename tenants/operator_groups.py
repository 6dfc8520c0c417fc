"""Audit rows of the operators' groups (Django's ``Group``: a named set of permissions in the
operators' admin), added, changed or deleted there by a superuser, each in the admin's own
transaction. A group's permissions are every member's: giving one to a group gives it to each
staff member in it, so each row names the permissions given or taken and the members they
reach. No tenant holds these rows (an operator belongs to none); the operators' admin lists them.

A person's own groups and permissions, and whether they are staff or superuser, are recorded with
the rest of an edit of their account (``onboarding.account_changed_by_operator``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.contrib.auth.models import Group, Permission

from tenants.models import User
from tenants.services import audit_record

logger = logging.getLogger(__name__)


def _names(permissions: Iterable[Permission]) -> list[str]:
    return sorted(str(permission) for permission in permissions)


def _members(group: Group) -> list[str]:
    return sorted(User.objects.filter(groups=group).values_list("email", flat=True))


def _record(*, action: str, group: Group, actor: User | None, data: dict) -> None:
    audit_record(tenant=None, actor=actor, action=action, obj=group, data=data)
    logger.info(f"tenants.{action}", extra={"group_id": group.pk})


def group_created_recorded(*, group: Group, actor: User | None) -> None:
    """The audit row of a group just added, with its permissions."""
    permissions = _names(group.permissions.select_related("content_type"))
    _record(
        action="group.created",
        group=group,
        actor=actor,
        data={"name": group.name, "permissions": permissions},
    )


def group_changed_recorded(
    *, group: Group, actor: User | None, before_name: str, before: Iterable[Permission]
) -> bool:
    """The audit row of a group just changed (``before_name`` and ``before``: its name and
    permissions as the change found them, its row locked): its name (and the old one, when
    renamed), the permissions added and removed, and its members. Returns whether anything
    changed: a group saved as it was leaves no row."""
    was = set(_names(before))
    now = set(_names(group.permissions.select_related("content_type")))
    added, removed = sorted(now - was), sorted(was - now)
    if not added and not removed and group.name == before_name:
        return False
    data: dict[str, object] = {"name": group.name}
    if group.name != before_name:
        data["previous_name"] = before_name
    data |= {"permissions_added": added, "permissions_removed": removed, "members": _members(group)}
    _record(action="group.changed", group=group, actor=actor, data=data)
    return True


def group_deleted_recorded(*, group: Group, actor: User | None) -> None:
    """The audit row of a group about to be deleted (its row locked, in the deletion's
    transaction): its permissions and the members who lose them with it."""
    permissions = _names(group.permissions.select_related("content_type"))
    _record(
        action="group.deleted",
        group=group,
        actor=actor,
        data={"name": group.name, "permissions": permissions, "members": _members(group)},
    )
