"""Groups (permission sets of the operators' admin) added, changed and deleted there leave an
audit row naming the operator and the permissions given or taken: a superuser could give a group
of staff members every permission, and nothing recorded it."""

import pytest
from django.contrib.auth.models import Group, Permission

from tenants.models import AuditEvent, User

pytestmark = pytest.mark.django_db

GROUPS = "/ops/admin/auth/group/"


def perms(*codenames: str) -> list[Permission]:
    return sorted(Permission.objects.filter(codename__in=codenames), key=lambda p: p.codename)


def names(permissions: list[Permission]) -> list[str]:
    return sorted(str(p) for p in permissions)


def rows(action: str):
    return AuditEvent.objects.filter(action=action).order_by("pk")


def test_a_group_added_here_is_audited_with_its_permissions(operator):
    given = perms("view_user", "view_tenant")

    response = operator.post(
        f"{GROUPS}add/", {"name": "support", "permissions": [p.pk for p in given]}
    )

    assert response.status_code == 302
    group = Group.objects.get(name="support")
    row = rows("group.created").get()
    assert (row.tenant, row.actor.email, row.object_type, row.object_id) == (
        None,
        "ops@countersign.test",
        "group",
        str(group.pk),
    )
    assert row.data == {"name": "support", "permissions": names(given)}


def test_a_group_changed_here_is_audited_with_the_permissions_added_and_removed(operator):
    group = Group.objects.create(name="support")
    group.permissions.set(perms("view_user", "view_tenant"))
    member = User.objects.create_user("staff@countersign.test", "staff-pass-1", is_staff=True)
    member.groups.add(group)

    response = operator.post(
        f"{GROUPS}{group.pk}/change/",
        {"name": "helpdesk", "permissions": [p.pk for p in perms("view_user", "change_user")]},
    )

    assert response.status_code == 302
    row = rows("group.changed").get()
    assert (row.actor.email, row.object_id) == ("ops@countersign.test", str(group.pk))
    assert row.data == {
        "name": "helpdesk",
        "previous_name": "support",
        "permissions_added": names(perms("change_user")),
        "permissions_removed": names(perms("view_tenant")),
        "members": ["staff@countersign.test"],
    }


def test_a_group_saved_unchanged_leaves_no_row(operator):
    group = Group.objects.create(name="support")
    group.permissions.set(perms("view_user"))

    response = operator.post(
        f"{GROUPS}{group.pk}/change/",
        {"name": "support", "permissions": [p.pk for p in perms("view_user")]},
    )

    assert response.status_code == 302
    assert not rows("group.changed").exists()


def test_a_group_deleted_here_is_audited_with_what_its_members_lost(operator):
    group = Group.objects.create(name="support")
    group.permissions.set(perms("view_user"))
    member = User.objects.create_user("staff@countersign.test", "staff-pass-1", is_staff=True)
    member.groups.add(group)
    pk = group.pk

    response = operator.post(f"{GROUPS}{pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Group.objects.filter(pk=pk).exists()
    row = rows("group.deleted").get()
    assert (row.actor.email, row.object_id) == ("ops@countersign.test", str(pk))
    assert row.data == {
        "name": "support",
        "permissions": names(perms("view_user")),
        "members": ["staff@countersign.test"],
    }


def test_groups_deleted_from_the_list_are_audited_each(operator):
    first = Group.objects.create(name="first")
    second = Group.objects.create(name="second")

    response = operator.post(
        GROUPS,
        {"action": "delete_selected", "_selected_action": [first.pk, second.pk], "post": "yes"},
    )

    assert response.status_code == 302
    assert not Group.objects.exists()
    assert sorted(rows("group.deleted").values_list("data__name", flat=True)) == [
        "first",
        "second",
    ]
