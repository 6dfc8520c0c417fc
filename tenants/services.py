"""Administrative writes for a tenant: members, rights, policies (invitations are in
tenants.invitations; the suppression list is console.services).

Each function is one named action in one transaction, guarded by the row it changes, and writes a
tenants.AuditEvent row in that same transaction, so the audit log can never miss a change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.db.transaction import TransactionManagementError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tenants.mailbox_rights import tenant_mailbox_ids
from tenants.models import AuditEvent, Invitation, Membership, Tenant, User
from tenants.send_stops import Stopped, sends_in_flight_hold
from tenants.stale import fingerprint, refuse_if_changed
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


class NotAnAdmin(PermissionDenied):
    """The actor is not an active admin of the tenant when their write runs. The role is checked
    when a request starts (``tenants.access.tenant_view``), but another admin may demote or
    deactivate them while it is in flight; every view answers this with a 403 showing the
    message."""

    code = "not_admin"

    def __init__(self, tenant: Tenant):
        self.message = _(
            "You are no longer an admin of %(tenant)s, so nothing was changed. Ask an admin if "
            "you need this done."
        ) % {"tenant": tenant.name}
        super().__init__(self.message)


class TenantSuspended(PermissionDenied):
    """The tenant was suspended by an operator while an admin's write was under way: checked
    when the request started (``tenants.access``) and again inside the write's transaction
    (``require_tenant_open``). Every view answers it with a 403 showing the message, as it
    answers the same refusal at the request's start."""

    code = "tenant_suspended"

    def __init__(self):
        self.message = _("This tenant is suspended; it is read-only.")
        super().__init__(self.message)


def _is_active_admin(membership: Membership | None) -> bool:
    return (
        membership is not None
        and membership.is_active
        and membership.role == Membership.Role.ADMIN
        and membership.user.is_active
    )


def admin_membership_shared(tenant: Tenant, user_id: int | None) -> Membership | None:
    """The user's active admin membership of ``tenant`` or None, read under FOR SHARE in the
    caller's transaction: a demotion or deactivation (which locks the row FOR UPDATE) either
    waits for that transaction or has committed and is seen here."""
    if not connection.in_atomic_block:
        raise TransactionManagementError("an admin check must run inside the write's transaction")
    if user_id is None:
        return None
    # Django's ORM has FOR UPDATE and FOR NO KEY UPDATE only. FOR SHARE lets an admin's
    # simultaneous requests check the same row without waiting for each other.
    rows = Membership.objects.raw(
        f"SELECT m.* FROM {Membership._meta.db_table} m "  # noqa: S608 - table names, not input
        f"JOIN {User._meta.db_table} u ON u.id = m.user_id "
        "WHERE m.tenant_id = %s AND m.user_id = %s AND m.is_active AND m.role = %s "
        "AND u.is_active FOR SHARE OF m",
        [tenant.pk, user_id, Membership.Role.ADMIN],
    )
    return next(iter(rows), None)


def require_admin(
    tenant: Tenant, actor: User, *, open_checked_after_sends: bool = False
) -> Membership:
    """The actor's active admin membership of ``tenant``, re-read and locked inside the caller's
    transaction; raises NotAnAdmin otherwise. The first lock every administrative write takes, so
    it waits behind no row that a demotion, which locks memberships first, may be waiting for.
    Then the tenant's status (``require_tenant_open``), unless ``open_checked_after_sends``: the
    write asks it later itself, after the sends it holds (``sends_in_flight_hold``) or as it
    locks the tenant's row to change it (``tenant_lock_open``)."""
    membership = admin_membership_shared(tenant, actor.pk)
    if membership is None:
        raise NotAnAdmin(tenant)
    if not open_checked_after_sends:
        require_tenant_open(tenant)
    return membership


_TENANT_STATUS = "SELECT status FROM {table} WHERE id = %s FOR KEY SHARE"


def require_tenant_open(tenant: Tenant) -> None:
    """Refuse an administrative write (``TenantSuspended``) when its tenant is not active, read
    again, FOR KEY SHARE, in the write's transaction. The request checked it when it started
    (``tenants.access``); a suspension that committed meanwhile let the write through, answered
    as done, in a tenant that is read-only. A suspension in flight (FOR UPDATE,
    ``tenants.onboarding``) is waited for and seen; a later one waits for the write. KEY SHARE is
    the lock the write's audit row takes on the tenant anyway.

    A suspension holds the tenant's sends before its row (``tenants.send_stops``): a write that
    holds sends too asks this after them, never before, or each would wait for the other."""
    if not connection.in_atomic_block:
        raise TransactionManagementError("the tenant's status is read in the write's transaction")
    with connection.cursor() as cursor:
        cursor.execute(
            _TENANT_STATUS.format(table=connection.ops.quote_name(Tenant._meta.db_table)),
            [tenant.pk],
        )
        row = cursor.fetchone()
    if row is None or row[0] != Tenant.Status.ACTIVE:
        raise TenantSuspended()


def tenant_lock_open(tenant: Tenant) -> Tenant:
    """The tenant's row, locked FOR UPDATE in the caller's transaction, for a write that changes
    it (its policies, its sign-in rules); raises TenantSuspended when it is not active, read
    under that lock. In place of ``require_tenant_open``, never after it: a write that read the
    status FOR KEY SHARE and then asked for this lock waited for every other KEY SHARE holder,
    so two admins' saves at once each waited for the other, and PostgreSQL killed one as a
    deadlock (a 500)."""
    if not connection.in_atomic_block:
        raise TransactionManagementError("the tenant's row is locked in the write's transaction")
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if not locked.is_active:
        raise TenantSuspended()
    return locked


@dataclass
class MemberLocks:
    """The rows ``lock_member_change`` locked: the member acted on, the actor's own membership
    (None when they have none here) and every active admin of the tenant; ``admins`` holds those
    who can act (their account enabled too)."""

    target: Membership
    actor: Membership | None
    admins: list[Membership]

    def other_active_admins(self) -> int:
        return sum(1 for m in self.admins if m.pk != self.target.pk)

    def require_admin_actor(
        self, tenant: Tenant, *, open_checked_after_sends: bool = False
    ) -> None:
        """As ``require_admin`` for a member change."""
        if not _is_active_admin(self.actor):
            raise NotAnAdmin(tenant)
        if not open_checked_after_sends:
            require_tenant_open(tenant)


def lock_member_change(tenant: Tenant, membership_id: int, actor: User) -> MemberLocks:
    """Lock, in one statement and in id order, the member acted on, the actor's membership and
    every active admin membership of the tenant. Two admins acting on each other at once used to
    lock their targets first and then each other's rows, and PostgreSQL killed one of them as a
    deadlock (a 500); in one order, the second waits and then sees the first's change."""
    rows = list(
        Membership.objects.select_for_update(of=("self",))
        .filter(
            Q(role=Membership.Role.ADMIN, is_active=True) | Q(pk=membership_id) | Q(user=actor),
            tenant=tenant,
        )
        .order_by("pk")
    )
    target = next((m for m in rows if m.pk == membership_id), None)
    if target is None:
        raise AdminError("not_found", _("No such member in this tenant."))
    # The accounts in a statement of their own, after the lock: read with the memberships (a
    # join), they were as of the locking statement's snapshot, so an operator's switch-off that
    # the lock waited for (it locks the same admin memberships:
    # onboarding.tenants_left_without_admin) went unseen, and the admin it switched off still
    # removed the tenant's other admin, leaving none.
    accounts = User.objects.in_bulk({m.user_id for m in rows})
    for membership in rows:
        membership.user = accounts[membership.user_id]
    return MemberLocks(
        target=target,
        actor=next((m for m in rows if m.user_id == actor.pk), None),
        # An admin whose account an operator disabled can act nowhere: counting them let the
        # last admin who can act demote themselves or leave, and the tenant had none.
        admins=[m for m in rows if _is_active_admin(m)],
    )


def person_lock(*, user_id: int) -> None:
    """Lock the person's row (FOR NO KEY UPDATE), in the caller's transaction: taken by
    ``belongs_elsewhere`` before it reads the person's other memberships, and by every change
    that makes them a member again (an acceptance, a reactivation) before it writes, so that the
    question and the change are ordered. Without it, A's admin resetting the person's second
    factors while B's invitation was being accepted, or B's admin reactivating them, read the
    membership of B as not there yet, and removed the factors of a member of B. Taken after
    the tenant's membership rows, as a member change takes them."""
    User.objects.select_for_update(no_key=True).filter(pk=user_id).values_list("pk").first()


def belongs_elsewhere(membership: Membership) -> bool:
    """Whether the member also belongs, active, to another tenant. The person's sessions and
    second factors are theirs across tenants: one tenant's admin may cut this tenant's access
    (every tenant page re-reads the membership) but must not reach what another tenant's
    access depends on.

    Asked inside the caller's transaction, under a lock of the person's row: the admins of two
    tenants deactivating the same person at once each saw the other's membership still active,
    and neither ended the sessions of someone who then belonged nowhere (a stolen cookie opened
    a tenant again on a reactivation). With the lock, the second waits for the first to commit
    and reads its change. FOR NO KEY UPDATE: rows that merely name the person (an audit row, a
    membership) take KEY SHARE on it and do not wait. Taken after the caller's membership rows
    and sends (``lock_member_change``, ``sends_in_flight_hold``): an operator switching the
    account off holds the sends before the account's row too."""
    if not connection.in_atomic_block:
        raise TransactionManagementError("ask whether they belong elsewhere inside the change")
    person_lock(user_id=membership.user_id)
    return (
        Membership.objects.filter(user_id=membership.user_id, is_active=True)
        .exclude(tenant_id=membership.tenant_id)
        .exists()
    )


# What the stale-save refusal names (tenants.stale).
ROLE_LABELS = {"role": gettext_lazy("their role")}


def member_role_fingerprint(membership: Membership) -> str:
    """What a role form is based on: its ``based_on`` for ``member_set_role``."""
    return fingerprint({"role": membership.role})


def member_set_role(
    *,
    tenant: Tenant,
    membership_id: int,
    role: str,
    actor: User,
    based_on: str | None = None,
) -> Stopped[Membership]:
    """``based_on``: the fingerprint (``member_role_fingerprint``) of the role the admin's page
    showed; a save based on a role that changed since is refused (StaleSave)."""
    if role not in Membership.Role.values:
        raise AdminError("invalid_role", _("Choose admin, approver or viewer."), "role")
    with transaction.atomic():
        locked = lock_member_change(tenant, membership_id, actor)
        membership = locked.target
        old = membership.role
        # Before the actor's own check: of two admins demoting each other, the second learns
        # that the other is now the last admin.
        if old == Membership.Role.ADMIN and role != old and locked.other_active_admins() == 0:
            raise AdminError(
                "last_admin", _("A tenant needs at least one active admin; promote someone first.")
            )
        locked.require_admin_actor(tenant, open_checked_after_sends=True)
        refuse_if_changed(based_on=based_on, current={"role": old}, labels=ROLE_LABELS)
        if old == role:
            require_tenant_open(tenant)
            return Stopped(membership)
        data: dict[str, object] = {"from": old, "to": role, "email": membership.user.email}
        in_flight = 0
        if role not in Membership.DECIDING_ROLES:
            in_flight = sends_in_flight_hold(tenant_id=tenant.pk, approver_id=membership.user_id)
            data["sends_in_flight"] = in_flight
        require_tenant_open(tenant)
        Membership.objects.filter(pk=membership.pk, role=old).update(role=role)
        membership.role = role
        audit_record(
            tenant=tenant, actor=actor, action="member.role_changed", obj=membership, data=data
        )
        if old == Membership.Role.ADMIN:
            _withdraw_invitations_sent_by(tenant, membership, actor, "inviter_no_longer_admin")
    return Stopped(membership, in_flight)


def _withdraw_invitations_sent_by(tenant: Tenant, membership: Membership, actor, why: str) -> int:
    """Pending invitations this member sent as an admin go when they stop being one: the offer
    was theirs to make, and a demoted or deactivated admin could otherwise keep a link that
    makes a new account an admin again."""
    return invitations_revoke_pending(
        tenant=tenant, actor=actor, reason=why, invited_by=membership.user
    )


def address_lock(*, tenant: Tenant, email: str) -> None:
    """Hold, to the end of the caller's transaction, the lock of an address in a tenant: taken
    by an invitation's write before it checks for a member (tenants.invitations) and by single
    sign-on's newcomer before it becomes one (tenants.oidc_signin), which then closes the
    pending invitations to the address. Without it, an invitation written at the moment of the
    join checked before the membership committed, the join looked for invitations before the
    invitation committed, and it stayed pending. An advisory lock: there is no row to lock
    until one of them writes it. Transaction-scoped, so it holds behind PgBouncer's
    transaction mode."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [f"tenants.address:{tenant.pk}:{email}"],
        )


def invitations_revoke_pending(*, tenant: Tenant, actor, reason: str, **match) -> int:
    """Revoke this tenant's pending invitations that ``match`` (in the caller's transaction,
    locked), each audited with ``reason``; returns how many."""
    pending = list(
        Invitation.objects.select_for_update().filter(
            tenant=tenant, state=Invitation.State.PENDING, **match
        )
    )
    for invitation in pending:
        Invitation.objects.filter(pk=invitation.pk, state=Invitation.State.PENDING).update(
            state=Invitation.State.REVOKED, closed_at=Now(), closed_by=actor
        )
        audit_record(
            tenant=tenant,
            actor=actor,
            action="invitation.revoked",
            obj=invitation,
            data={"email": invitation.email, "reason": reason},
        )
    return len(pending)


# What the stale-save refusal names (tenants.stale), by field, in the form's order.
RIGHTS_LABELS = {
    "approve_all_mailboxes": gettext_lazy("whether they may approve for every mailbox"),
    "mailboxes": gettext_lazy("the mailboxes they may approve for"),
}


def _rights(membership: Membership, mailbox_ids: list[int]) -> dict:
    return {"approve_all_mailboxes": membership.approve_all_mailboxes, "mailboxes": mailbox_ids}


def member_rights_fingerprint(membership: Membership) -> str:
    """What a rights form is based on: its ``based_on`` for ``member_set_mailbox_rights``."""
    mailbox_ids = sorted(membership.approve_mailboxes.values_list("pk", flat=True))
    return fingerprint(_rights(membership, mailbox_ids))


def member_set_mailbox_rights(
    *,
    tenant: Tenant,
    membership_id: int,
    approve_all_mailboxes: bool,
    mailbox_ids: list[int],
    actor: User,
    based_on: str | None = None,
) -> Stopped[Membership]:
    """``based_on``: the fingerprint (``member_rights_fingerprint``) of the rights the admin's
    page showed; a save based on rights that changed since is refused (StaleSave)."""
    wanted = set(mailbox_ids)
    mailboxes = tenant_mailbox_ids(tenant, wanted)
    if len(mailboxes) != len(wanted):
        raise AdminError("unknown_mailbox", _("One of those mailboxes is not in this tenant."))
    with transaction.atomic():
        locked = lock_member_change(tenant, membership_id, actor)
        locked.require_admin_actor(tenant, open_checked_after_sends=True)
        membership = locked.target
        before = sorted(membership.approve_mailboxes.values_list("pk", flat=True))
        refuse_if_changed(
            based_on=based_on, current=_rights(membership, before), labels=RIGHTS_LABELS
        )
        in_flight = 0
        if not approve_all_mailboxes:
            in_flight = sends_in_flight_hold(
                tenant_id=tenant.pk, approver_id=membership.user_id, keep_mailboxes=mailboxes
            )
        require_tenant_open(tenant)
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
                "sends_in_flight": in_flight,
            },
        )
    return Stopped(membership, in_flight)


def member_deactivate(*, tenant: Tenant, membership_id: int, actor: User) -> Stopped[Membership]:
    with transaction.atomic():
        locked = lock_member_change(tenant, membership_id, actor)
        membership = locked.target
        if (
            membership.role == Membership.Role.ADMIN
            and membership.is_active
            and locked.other_active_admins() == 0
        ):
            raise AdminError(
                "last_admin", _("This is the last active admin; promote someone else first.")
            )
        locked.require_admin_actor(tenant, open_checked_after_sends=True)
        in_flight = sends_in_flight_hold(tenant_id=tenant.pk, approver_id=membership.user_id)
        require_tenant_open(tenant)
        changed = Membership.objects.filter(pk=membership.pk, is_active=True).update(
            is_active=False
        )
        if not changed:
            raise AdminError("not_active", _("This member is already deactivated."))
        membership.is_active = False
        # Signed out everywhere at once, unless another tenant still counts them as a member:
        # their sessions serve it too, and this tenant's pages refuse them from the next request.
        ended = 0 if belongs_elsewhere(membership) else sessions_end_all(user=membership.user)
        audit_record(
            tenant=tenant,
            actor=actor,
            action="member.deactivated",
            obj=membership,
            data={
                "email": membership.user.email,
                "sessions_ended": ended,
                "sends_in_flight": in_flight,
            },
        )
        _withdraw_invitations_sent_by(tenant, membership, actor, "inviter_deactivated")
    logger.info(
        "tenants.member.deactivated",
        extra={"tenant_id": tenant.pk, "membership_id": membership.pk},
    )
    return Stopped(membership, in_flight)


def member_reactivate(*, tenant: Tenant, membership_id: int, actor: User) -> Membership:
    with transaction.atomic():
        locked = lock_member_change(tenant, membership_id, actor)
        locked.require_admin_actor(tenant)
        membership = locked.target
        person_lock(user_id=membership.user_id)
        changed = Membership.objects.filter(pk=membership.pk, is_active=False).update(
            is_active=True
        )
        if not changed:
            raise AdminError("already_active", _("This member is already active."))
        membership.is_active = True
        audit_record(
            tenant=tenant,
            actor=actor,
            action="member.reactivated",
            obj=membership,
            data={"email": membership.user.email},
        )
    return membership


def member_set_away(*, tenant: Tenant, membership_id: int, away: bool, actor: User) -> Membership:
    """Mark a member away (automatic assignment and escalation to a role skip them) or back. A
    member sets it for themselves; an admin for anyone of the tenant."""
    with transaction.atomic():
        locked = lock_member_change(tenant, membership_id, actor)
        membership = locked.target
        if membership.user_id != actor.pk and not _is_active_admin(locked.actor):
            raise AdminError("not_allowed", _("Only an admin may set someone else away."))
        require_tenant_open(tenant)
        changed = Membership.objects.filter(pk=membership.pk, is_away=not away).update(is_away=away)
        membership.is_away = away
        if changed:
            audit_record(
                tenant=tenant,
                actor=actor,
                action="member.away" if away else "member.back",
                obj=membership,
                data={"email": membership.user.email},
            )
    return membership
