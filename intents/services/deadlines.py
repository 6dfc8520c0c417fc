"""Deadlines (SLA) of pending drafts: the due time fixed at creation, the warning window and the
escalation of breached drafts, both found by the sweep.

The target is a time to first decision measured from the customer's message (the inbound message
the draft replies to; a draft that is not a reply measures from its creation): the mailbox's
target, or the tenant's when the mailbox sets none. The warning window is the tenant's, or the
last quarter of the target.

The due time is computed, and the sweep compares it, on the database clock, like leases and the
review expiry: computed on the web host's clock and compared with the sweeping host's, a skew
between the two moved every warning and breach by its size (a web host ten minutes behind gave a
five-minute target a due time already passed, breached by the next sweep).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models.functions import Now

from config.clock import db_now
from intents.journal import journal
from intents.models import Draft, IntentEvent
from intents.policy import (
    active_membership,
    approver_memberships,
    can_approve,
    next_in_turn,
)
from tenants.models import Membership, Tenant

log = logging.getLogger("intents.services")

Assigned = Draft.AssignedHow


def sla_minutes(tenant, mailbox) -> int | None:
    """The target in force for a new draft of this mailbox (None: no target)."""
    return mailbox.sla_minutes or tenant.sla_minutes


def deadline_times(tenant, mailbox, measured_from: datetime) -> tuple[datetime | None, ...]:
    """(due, warn) for a draft of this mailbox whose clock started at ``measured_from``."""
    minutes = sla_minutes(tenant, mailbox)
    if not minutes:
        return None, None
    target = timedelta(minutes=minutes)
    window = (
        timedelta(minutes=tenant.sla_warning_minutes) if tenant.sla_warning_minutes else target / 4
    )
    due = measured_from + target
    return due, due - min(window, target)


def _sweep_journal(draft: Draft, action: str, data: dict, reason: str = "") -> None:
    journal(
        tenant=draft.tenant_id,
        draft=draft.pk,
        action=action,
        actor_kind=IntentEvent.Actor.SWEEP,
        from_state=Draft.Status.PENDING,
        to_state=Draft.Status.PENDING,
        reason=reason,
        data=data,
    )


def drafts_warn_due(*, batch: int = 500, now: datetime | None = None) -> int:
    """Journal once, for each pending draft entering its warning window, that its deadline is
    near. Safe on every cluster (SKIP LOCKED; the conditional UPDATE decides)."""
    now = now or db_now()
    with transaction.atomic():
        due = list(
            Draft.objects.select_for_update(skip_locked=True)
            .filter(status=Draft.Status.PENDING, sla_warned_at__isnull=True, sla_warn_at__lte=now)
            .order_by("sla_warn_at")
            .only("pk", "tenant_id", "sla_due_at", "assignee_id")[:batch]
        )
        warned = sum(_warn(draft, now) for draft in due)
    return warned


def _warn(draft: Draft, now: datetime) -> bool:
    changed = Draft.objects.filter(
        pk=draft.pk, status=Draft.Status.PENDING, sla_warned_at__isnull=True
    ).update(sla_warned_at=now)
    if changed:
        data = {"due_at": draft.sla_due_at.isoformat() if draft.sla_due_at else None}
        _sweep_journal(draft, "draft.sla_warning", {**data, "holder": draft.assignee_id})
    return bool(changed)


def _escalation_target(tenant: Tenant, draft: Draft, picked: dict[int, int]):
    """Whom the tenant's rule sends this breached draft to (a user), or None: no rule, or nobody
    the rule names may review this mailbox now. A named member gets it even when away (the
    tenant named them); a role goes round-robin among its present members.

    A named member who can no longer decide this draft (deactivated, made a viewer, without this
    mailbox's right) is passed over for the tenant's admins, round-robin: the draft went to
    nobody, and nothing but the journal said so (the policies page now says it too)."""
    if tenant.escalate_to_id and _named_may_decide(tenant, draft):
        return tenant.escalate_to
    role = Membership.Role.ADMIN if tenant.escalate_to_id else tenant.escalate_to_role
    if not role:
        return None
    candidates = approver_memberships(mailbox=draft.mailbox, role=role, present_only=True)
    # Within one sweep every escalation has the same time, and drafts go by due time, not id:
    # the sweep's own last pick says whose turn it is (reading it back by escalated_at and id
    # gave one approver two of three drafts and another none).
    last = picked.get(tenant.pk) or (
        Draft.objects.filter(tenant=tenant, escalated_to__isnull=False)
        .order_by("-escalated_at", "-id")
        .values_list("escalated_to_id", flat=True)
        .first()
    )
    chosen = next_in_turn(candidates, last)
    if chosen is None:
        return None
    picked[tenant.pk] = chosen.user_id
    return chosen.user


def _named_may_decide(tenant: Tenant, draft: Draft) -> bool:
    membership = active_membership(tenant=tenant, user=tenant.escalate_to)
    return can_approve(membership=membership, mailbox=draft.mailbox)


def _passed_over(tenant: Tenant, target) -> int | None:
    """The member the rule names, when the draft did not go to them."""
    named = tenant.escalate_to_id
    return named if named and (target is None or target.pk != named) else None


def _has_rule(tenant: Tenant) -> bool:
    return bool(tenant.escalate_to_id or tenant.escalate_to_role)


def drafts_escalate_due(*, batch: int = 200, now: datetime | None = None) -> int:
    """Pending drafts past their deadline: marked breached (remembering who held them) and, by
    the tenant's rule, escalated (reassigned to the rule's member, listed as escalated). Each is
    journaled once. Safe on every cluster at once: rows another sweep holds are skipped, the
    conditional UPDATE on ``sla_breached_at`` decides, and a role's round-robin takes its turn
    under the tenant's row lock."""
    now = now or db_now()
    breached = 0
    with transaction.atomic():
        due = list(
            Draft.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("mailbox")
            .filter(status=Draft.Status.PENDING, sla_breached_at__isnull=True, sla_due_at__lte=now)
            .order_by("sla_due_at")[:batch]
        )
        # Locked: two sweeps escalating to a role must not both pick the same member. In id
        # order, so that two sweeps whose batches span the same tenants cannot deadlock. FOR NO
        # KEY UPDATE: every row that names the tenant (a draft, a journal or audit row) takes a
        # KEY SHARE lock on it as it is written, which FOR UPDATE would make wait for the sweep.
        tenants = {
            t.pk: t
            for t in Tenant.objects.select_for_update(of=("self",), no_key=True)
            .select_related("escalate_to")
            .filter(pk__in={d.tenant_id for d in due})
            .order_by("pk")
        }
        picked: dict[int, int] = {}  # tenant id -> the user this sweep escalated to last
        for draft in due:
            if _breach(tenants[draft.tenant_id], draft, now, picked):
                breached += 1
    return breached


def _breach(
    tenant: Tenant, draft: Draft, now: datetime, picked: dict[int, int] | None = None
) -> bool:
    target = (
        _escalation_target(tenant, draft, {} if picked is None else picked)
        if _has_rule(tenant)
        else None
    )
    updates: dict = {"sla_breached_at": now, "sla_breach_holder_id": draft.assignee_id}
    if _has_rule(tenant):
        updates["escalated_at"] = now
    if target is not None:
        updates.update(
            assignee=target,
            assigned_how=Assigned.ESCALATED,
            claim_expires_at=None,
            escalated_to=target,
            updated_at=Now(),
        )
    changed = Draft.objects.filter(
        pk=draft.pk, status=Draft.Status.PENDING, sla_breached_at__isnull=True
    ).update(**updates)
    if not changed:
        return False
    due_at = draft.sla_due_at.isoformat() if draft.sla_due_at else None
    _sweep_journal(draft, "draft.sla_breached", {"due_at": due_at, "holder": draft.assignee_id})
    if _has_rule(tenant):
        _journal_escalation(tenant, draft, target)
    log.info("intents.draft.sla_breached", extra={"tenant_id": tenant.pk, "draft_id": draft.pk})
    return True


# The escalation's reasons, stored as written (intents.reason_words gives them in words).
NOBODY_TO_ESCALATE_TO = "nobody the escalation rule names may review this mailbox and is not away"
PASSED_OVER_FOR_AN_ADMIN = (
    "the member the escalation rule names can no longer decide it: to an admin"
)


def _journal_escalation(tenant: Tenant, draft: Draft, target) -> None:
    passed_over = _passed_over(tenant, target)
    if target is None:
        # No one may review it, or everyone who may is marked away (present_only).
        reason = NOBODY_TO_ESCALATE_TO
    elif passed_over:
        reason = PASSED_OVER_FOR_AN_ADMIN
    else:
        reason = ""
    data = {"to": target.pk if target else None, "previous_holder": draft.assignee_id}
    if passed_over:
        data["passed_over"] = passed_over
    _sweep_journal(draft, "draft.escalated", data, reason)
