"""Administrative writes for a tenant: members, rights, policies (invitations are in
tenants.invitations; the suppression list is console.services).

Each function is one named action in one transaction, guarded by the row it changes, and writes a
tenants.AuditEvent row in that same transaction, so the audit log can never miss a change.
"""

from __future__ import annotations

import logging
import re

from django.db import transaction
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from tenants.mailbox_rights import tenant_mailbox_ids
from tenants.models import AuditEvent, Invitation, Membership, Tenant, User
from tenants.user_sessions import sessions_end_all

logger = logging.getLogger(__name__)

# The undo window after Approve (Tenant.send_hold_seconds); the database refuses more too.
MAX_SEND_HOLD_SECONDS = 300


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
        raise AdminError("not_found", _("No such member in this tenant.")) from None


def _other_active_admins(tenant: Tenant, membership: Membership) -> int:
    # Locks every admin row so two admins demoting each other at once cannot both succeed.
    admins = list(
        Membership.objects.select_for_update()
        .filter(tenant=tenant, role=Membership.Role.ADMIN, is_active=True)
        .exclude(pk=membership.pk)
        .values_list("pk", flat=True)
    )
    return len(admins)


def belongs_elsewhere(membership: Membership) -> bool:
    """Whether the member also belongs, active, to another tenant. The person's sessions and
    second factors are theirs across tenants: one tenant's admin may cut this tenant's access
    (every tenant page re-reads the membership) but must not reach what another tenant's
    access depends on."""
    return (
        Membership.objects.filter(user_id=membership.user_id, is_active=True)
        .exclude(tenant_id=membership.tenant_id)
        .exists()
    )


def member_set_role(*, tenant: Tenant, membership_id: int, role: str, actor: User) -> Membership:
    if role not in Membership.Role.values:
        raise AdminError("invalid_role", _("Choose admin, approver or viewer."), "role")
    with transaction.atomic():
        membership = _lock_member(tenant, membership_id)
        old = membership.role
        if old == role:
            return membership
        if old == Membership.Role.ADMIN and _other_active_admins(tenant, membership) == 0:
            raise AdminError(
                "last_admin", _("A tenant needs at least one active admin; promote someone first.")
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
        if old == Membership.Role.ADMIN:
            _withdraw_invitations_sent_by(tenant, membership, actor, "inviter_no_longer_admin")
    return membership


def _withdraw_invitations_sent_by(tenant: Tenant, membership: Membership, actor, why: str) -> int:
    """Pending invitations this member sent as an admin go when they stop being one: the offer
    was theirs to make, and a demoted or deactivated admin could otherwise keep a link that
    makes a new account an admin again."""
    return invitations_revoke_pending(
        tenant=tenant, actor=actor, reason=why, invited_by=membership.user
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
        raise AdminError("unknown_mailbox", _("One of those mailboxes is not in this tenant."))
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
                "last_admin", _("This is the last active admin; promote someone else first.")
            )
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
            data={"email": membership.user.email, "sessions_ended": ended},
        )
        _withdraw_invitations_sent_by(tenant, membership, actor, "inviter_deactivated")
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


def tenant_update_policies(
    *,
    tenant: Tenant,
    review_deadline_hours: int,
    second_approver_on_edit: bool,
    retention_days: int,
    actor: User,
    send_hold_seconds: int | None = None,
) -> Tenant:
    if not 1 <= review_deadline_hours <= 24 * 14:
        raise AdminError(
            "invalid_deadline",
            _("The review deadline must be between 1 and 336 hours (14 days)."),
            "review_deadline_hours",
        )
    if not 1 <= retention_days <= 3650:
        raise AdminError(
            "invalid_retention",
            _("Retention must be between 1 and 3650 days."),
            "retention_days",
        )
    if send_hold_seconds is not None and not 0 <= send_hold_seconds <= MAX_SEND_HOLD_SECONDS:
        raise AdminError(
            "invalid_send_hold",
            _("The undo hold must be between 0 and %(max)d seconds.")
            % {"max": MAX_SEND_HOLD_SECONDS},
            "send_hold_seconds",
        )
    fields = (
        "review_deadline_hours",
        "second_approver_on_edit",
        "retention_days",
        "send_hold_seconds",
    )
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        before = {f: getattr(locked, f) for f in fields}
        after = {
            "review_deadline_hours": review_deadline_hours,
            "second_approver_on_edit": second_approver_on_edit,
            "retention_days": retention_days,
            "send_hold_seconds": (
                locked.send_hold_seconds if send_hold_seconds is None else send_hold_seconds
            ),
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


MAX_OWN_DOMAINS = 50
_DOMAIN_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def own_domains_parse(raw: str) -> list[str]:
    """The domains of a comma-, space- or line-separated list, lower-cased, without duplicates,
    in the order given; raises AdminError naming the first one that is not a domain name."""
    domains: list[str] = []
    for item in re.split(r"[\s,;]+", raw.strip()):
        if not item:
            continue
        domain = item.lower().removeprefix("@").rstrip(".")
        labels = domain.split(".")
        if (
            len(domain) > 253
            or len(labels) < 2
            or not all(_DOMAIN_LABEL.match(label) for label in labels)
        ):
            raise AdminError(
                "invalid_domain",
                _("“%(item)s” is not a domain name (like example.com).") % {"item": item[:80]},
                "own_domains",
            )
        if domain not in domains:
            domains.append(domain)
    if len(domains) > MAX_OWN_DOMAINS:
        raise AdminError(
            "too_many_domains",
            _("At most %(n)d domains.") % {"n": MAX_OWN_DOMAINS},
            "own_domains",
        )
    return domains


def tenant_set_own_domains(*, tenant: Tenant, domains: list[str], actor: User) -> Tenant:
    """Replace the organisation's own mail domains (already parsed by ``own_domains_parse``)."""
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        before = list(locked.own_domains)
        if before == domains:
            return locked
        Tenant.objects.filter(pk=tenant.pk).update(own_domains=domains)
        locked.own_domains = tenant.own_domains = domains
        audit_record(
            tenant=tenant,
            actor=actor,
            action="tenant.policies_changed",
            obj=locked,
            data={"before": {"own_domains": before}, "after": {"own_domains": domains}},
        )
    return locked


ESCALATION_ROLES = (Membership.Role.ADMIN, Membership.Role.APPROVER)
MAX_SLA_MINUTES = 60 * 24 * 14


def _check_minutes(value: int | None, field: str, message: str) -> None:
    """``message`` is the whole refusal with %(most)d (no sentence is pieced together)."""
    if value is not None and not 1 <= value <= MAX_SLA_MINUTES:
        raise AdminError("invalid_minutes", message % {"most": MAX_SLA_MINUTES}, field)


def _escalation_member(tenant: Tenant, user_id: int | None) -> User | None:
    if user_id is None:
        return None
    membership = (
        Membership.objects.select_related("user").filter(tenant=tenant, user_id=user_id).first()
    )
    if membership is None:
        raise AdminError(
            "not_member", _("That person is not a member of this tenant."), "escalate_to"
        )
    if not membership.is_active or not membership.user.is_active:
        raise AdminError(
            "member_inactive",
            _("%(name)s is not an active member; choose an active one.")
            % {"name": membership.user.display_name},
            "escalate_to",
        )
    if membership.role not in ESCALATION_ROLES:
        raise AdminError(
            "member_cannot_decide",
            _("%(name)s is a viewer and cannot decide drafts; choose an admin or approver.")
            % {"name": membership.user.display_name},
            "escalate_to",
        )
    return membership.user


def tenant_update_deadlines(
    *,
    tenant: Tenant,
    sla_minutes: int | None,
    sla_warning_minutes: int | None,
    escalate_to_id: int | None,
    escalate_to_role: str,
    actor: User,
) -> Tenant:
    """The tenant's deadline target, its warning window and the escalation rule (one member, or
    a role round-robin, or none)."""
    _check_minutes(
        sla_minutes,
        "sla_minutes",
        _("The target must be between 1 and %(most)d minutes (14 days)."),
    )
    _check_minutes(
        sla_warning_minutes,
        "sla_warning_minutes",
        _("The warning window must be between 1 and %(most)d minutes (14 days)."),
    )
    if sla_minutes and sla_warning_minutes and sla_warning_minutes >= sla_minutes:
        raise AdminError(
            "warning_too_long",
            _("The warning window must be shorter than the target."),
            "sla_warning_minutes",
        )
    if escalate_to_role not in ("", *ESCALATION_ROLES):
        raise AdminError("invalid_role", _("Choose admin or approver."), "escalate_to_role")
    if escalate_to_id is not None and escalate_to_role:
        raise AdminError(
            "two_rules",
            _("Escalate to a member or to a role, not both."),
            "escalate_to_role",
        )
    fields = ("sla_minutes", "sla_warning_minutes", "escalate_to_id", "escalate_to_role")
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        member = _escalation_member(locked, escalate_to_id)
        before = {f: getattr(locked, f) for f in fields}
        after = {
            "sla_minutes": sla_minutes,
            "sla_warning_minutes": sla_warning_minutes,
            "escalate_to_id": member.pk if member else None,
            "escalate_to_role": escalate_to_role,
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
            action="tenant.deadlines_changed",
            obj=locked,
            data={"before": before, "after": after},
        )
    return locked


def member_set_away(*, tenant: Tenant, membership_id: int, away: bool, actor: User) -> Membership:
    """Mark a member away (automatic assignment and escalation to a role skip them) or back. A
    member sets it for themselves; an admin for anyone of the tenant."""
    with transaction.atomic():
        membership = _lock_member(tenant, membership_id)
        if membership.user_id != actor.pk:
            actor_membership = Membership.objects.filter(
                tenant=tenant, user=actor, is_active=True, role=Membership.Role.ADMIN
            ).first()
            if actor_membership is None:
                raise AdminError("not_allowed", _("Only an admin may set someone else away."))
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
