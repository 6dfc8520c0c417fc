"""Administrative writes for a tenant: members, rights, policies (invitations are in
tenants.invitations; the suppression list is console.services).

Each function is one named action in one transaction, guarded by the row it changes, and writes a
tenants.AuditEvent row in that same transaction, so the audit log can never miss a change.
"""

from __future__ import annotations

import logging

from django.db import transaction

from tenants.mailbox_rights import tenant_mailbox_ids
from tenants.models import AuditEvent, Membership, Tenant, User
from tenants.user_sessions import sessions_end_all

logger = logging.getLogger(__name__)


class AdminError(Exception):
    """A refused administrative action: ``code`` is a stable slug, ``message`` is for people."""

    def __init__(self, code: str, message: str, field: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


def audit_record(*, tenant, actor, action, obj, data=None) -> AuditEvent:
    """The audit row of one administrative action; written inside that action's transaction."""
    return AuditEvent.objects.create(
        tenant=tenant,
        actor=actor,
        action=action,
        object_type=obj._meta.model_name,
        object_id=str(obj.pk),
        data=data or {},
    )


def _lock_member(tenant: Tenant, membership_id: int) -> Membership:
    try:
        return (
            Membership.objects.select_for_update()
            .select_related("user")
            .get(tenant=tenant, pk=membership_id)
        )
    except Membership.DoesNotExist:
        raise AdminError("not_found", "No such member in this tenant.") from None


def _other_active_admins(tenant: Tenant, membership: Membership) -> int:
    # Locks every admin row so two admins demoting each other at once cannot both succeed.
    admins = list(
        Membership.objects.select_for_update()
        .filter(tenant=tenant, role=Membership.Role.ADMIN, is_active=True)
        .exclude(pk=membership.pk)
        .values_list("pk", flat=True)
    )
    return len(admins)


def member_set_role(*, tenant: Tenant, membership_id: int, role: str, actor: User) -> Membership:
    if role not in Membership.Role.values:
        raise AdminError("invalid_role", "Choose admin, approver or viewer.", "role")
    with transaction.atomic():
        membership = _lock_member(tenant, membership_id)
        old = membership.role
        if old == role:
            return membership
        if old == Membership.Role.ADMIN and _other_active_admins(tenant, membership) == 0:
            raise AdminError(
                "last_admin", "A tenant needs at least one active admin; promote someone first."
            )
        Membership.objects.filter(pk=membership.pk, role=old).update(role=role)
        membership.role = role
        audit_record(
            tenant=tenant,
            actor=actor,
            action="member.role_changed",
            obj=membership,
            data={"from": old, "to": role, "email": membership.user.email},
        )
    return membership


def member_set_mailbox_rights(
    *,
    tenant: Tenant,
    membership_id: int,
    approve_all_mailboxes: bool,
    mailbox_ids: list[int],
    actor: User,
) -> Membership:
    wanted = set(mailbox_ids)
    mailboxes = tenant_mailbox_ids(tenant, wanted)
    if len(mailboxes) != len(wanted):
        raise AdminError("unknown_mailbox", "One of those mailboxes is not in this tenant.")
    with transaction.atomic():
        membership = _lock_member(tenant, membership_id)
        before = sorted(membership.approve_mailboxes.values_list("pk", flat=True))
        Membership.objects.filter(pk=membership.pk).update(
            approve_all_mailboxes=approve_all_mailboxes
        )
        membership.approve_all_mailboxes = approve_all_mailboxes
        membership.approve_mailboxes.set(mailboxes)
        audit_record(
            tenant=tenant,
            actor=actor,
            action="member.rights_changed",
            obj=membership,
            data={
                "email": membership.user.email,
                "approve_all_mailboxes": approve_all_mailboxes,
                "mailboxes_before": before,
                "mailboxes_after": sorted(wanted),
            },
        )
    return membership


def member_deactivate(*, tenant: Tenant, membership_id: int, actor: User) -> Membership:
    with transaction.atomic():
        membership = _lock_member(tenant, membership_id)
        if (
            membership.role == Membership.Role.ADMIN
            and membership.is_active
            and _other_active_admins(tenant, membership) == 0
        ):
            raise AdminError(
                "last_admin", "This is the last active admin; promote someone else first."
            )
        changed = Membership.objects.filter(pk=membership.pk, is_active=True).update(
            is_active=False
        )
        if not changed:
            raise AdminError("not_active", "This member is already deactivated.")
        membership.is_active = False
        # Signed out everywhere at once: no browser of theirs keeps a session past this point.
        ended = sessions_end_all(user=membership.user)
        audit_record(
            tenant=tenant,
            actor=actor,
            action="member.deactivated",
            obj=membership,
            data={"email": membership.user.email, "sessions_ended": ended},
        )
    logger.info(
        "tenants.member.deactivated",
        extra={"tenant_id": tenant.pk, "membership_id": membership.pk},
    )
    return membership


def member_reactivate(*, tenant: Tenant, membership_id: int, actor: User) -> Membership:
    with transaction.atomic():
        membership = _lock_member(tenant, membership_id)
        changed = Membership.objects.filter(pk=membership.pk, is_active=False).update(
            is_active=True
        )
        if not changed:
            raise AdminError("already_active", "This member is already active.")
        membership.is_active = True
        audit_record(
            tenant=tenant,
            actor=actor,
            action="member.reactivated",
            obj=membership,
            data={"email": membership.user.email},
        )
    return membership


def tenant_update_policies(
    *,
    tenant: Tenant,
    review_deadline_hours: int,
    second_approver_on_edit: bool,
    retention_days: int,
    actor: User,
) -> Tenant:
    if not 1 <= review_deadline_hours <= 24 * 14:
        raise AdminError(
            "invalid_deadline",
            "The review deadline must be between 1 and 336 hours (14 days).",
            "review_deadline_hours",
        )
    if not 1 <= retention_days <= 3650:
        raise AdminError(
            "invalid_retention",
            "Retention must be between 1 and 3650 days.",
            "retention_days",
        )
    fields = ("review_deadline_hours", "second_approver_on_edit", "retention_days")
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        before = {f: getattr(locked, f) for f in fields}
        after = {
            "review_deadline_hours": review_deadline_hours,
            "second_approver_on_edit": second_approver_on_edit,
            "retention_days": retention_days,
        }
        if before == after:
            return locked
        Tenant.objects.filter(pk=tenant.pk).update(**after)
        for name, value in after.items():
            setattr(locked, name, value)
            setattr(tenant, name, value)
        audit_record(
            tenant=tenant,
            actor=actor,
            action="tenant.policies_changed",
            obj=locked,
            data={"before": before, "after": after},
        )
    return locked
