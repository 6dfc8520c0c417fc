"""Ownership of pending drafts: take, hand over, release, automatic assignment, lapsed claims.

Ownership is coordination, not a lock: any approver may still decide a draft someone else holds
(the pages say who holds it). A claim taken by hand lapses after CLAIM_DURATION unless the holder
renews it (taking it again, opening or editing it); an assignment made for someone (handed,
automatic, escalation) has no expiry. Claims are measured on the database clock, like the
deadlines in ``intents.services.deadlines``: set on the web host's clock and read on whichever
host took over or swept, a skew between them moved every claim by its size.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from config.clock import db_now
from intents import errors
from intents.journal import journal
from intents.models import Draft, IntentEvent
from intents.policy import (
    active_membership,
    approver_memberships,
    can_approve,
    may_decide_exists,
    next_in_turn,
    user_may_decide,
)
from intents.services.common import (
    UNHELD,
    active_tenant,
    lock_draft,
    require_pending,
    require_standing,
)
from mailboxes.models import Mailbox

log = logging.getLogger("intents.services")

CLAIM_DURATION = timedelta(minutes=30)

Assigned = Draft.AssignedHow


def claim_lapsed(draft: Draft, now=None) -> bool:
    """True when the draft's holder took it by hand and did not renew the claim in time."""
    expires = draft.claim_expires_at
    return expires is not None and expires <= (now or db_now())


def _require_approver(tenant, user, draft: Draft, *, who: str = "You") -> object:
    membership = active_membership(tenant=tenant, user=user)
    if not can_approve(membership=membership, mailbox=draft.mailbox):
        if who == "You":
            message = _("You may not review drafts of %(mailbox)s.") % {
                "mailbox": draft.mailbox.address
            }
        else:
            message = _("%(name)s may not review drafts of %(mailbox)s.") % {
                "name": who,
                "mailbox": draft.mailbox.address,
            }
        raise errors.NoRight(message=message)
    return membership


def _holder_name(draft: Draft) -> str:
    return draft.assignee.display_name if draft.assignee else ""


def _journal(tenant, draft, action, actor, data, reason="") -> None:
    journal(
        tenant=tenant,
        draft=draft,
        action=action,
        actor_kind=IntentEvent.Actor.PERSON,
        actor_user=actor,
        from_state=Draft.Status.PENDING,
        to_state=Draft.Status.PENDING,
        reason=reason,
        data=data,
    )


def _lock_pending(tenant, draft_id) -> Draft:
    draft = lock_draft(tenant, draft_id)
    require_pending(draft)
    return draft


def draft_take(*, tenant, draft_id, actor) -> Draft:
    """Take a pending draft (a claim for CLAIM_DURATION). The holder taking it again renews the
    claim; a claim of someone else is refused, naming them, until it lapses. A draft assigned to
    the person (handed, automatic, escalated) stays so: a Take from a page shown before the
    assignment turned it into a claim, which the sweep then gave back to the queue."""
    tenant = active_tenant(tenant)
    with transaction.atomic():
        draft = _lock_pending(tenant, draft_id)
        require_standing(tenant, None)
        _require_approver(tenant, actor, draft)
        now = db_now()
        previous = draft.assignee_id
        if previous == actor.pk and draft.claim_expires_at is None:
            return draft
        if (
            previous not in (None, actor.pk)
            and not claim_lapsed(draft, now)
            and _may_still_decide(tenant, draft)
        ):
            raise errors.HeldByOther(
                message=_("%(name)s holds this draft; ask them to hand it to you or release it.")
                % {"name": _holder_name(draft)}
            )
        Draft.objects.filter(pk=draft.pk).update(
            assignee=actor,
            assigned_how=Assigned.TAKEN,
            claim_expires_at=now + CLAIM_DURATION,
            updated_at=Now(),
        )
        if previous != actor.pk:
            data = {"holder": actor.pk, "previous_holder": previous}
            _journal(tenant, draft, "draft.taken", actor, data)
    draft.refresh_from_db()
    return draft


def _may_still_decide(tenant, draft: Draft) -> bool:
    """Whether the draft's holder may still decide it: a holder deactivated, made a viewer or
    stripped of the mailbox's right holds nothing (such a hold, handed or escalated, never
    lapsed, and kept the draft from everyone, off the Unassigned view, for good)."""
    holder = draft.assignee
    return holder is not None and user_may_decide(tenant=tenant, user=holder, mailbox=draft.mailbox)


def draft_claim_renew(*, tenant, draft_id, actor) -> bool:
    """Push the holder's claim forward while they work on the draft (opening or editing it).
    Only a running claim of this person moves, and only while they may still decide it (a holder
    made a viewer kept their claim alive by opening the page); nothing else changes, so nothing
    is journaled."""
    held = (
        Draft.objects.filter(
            tenant=tenant,
            pk=draft_id,
            status=Draft.Status.PENDING,
            assignee=actor,
            assigned_how=Assigned.TAKEN,
            claim_expires_at__gt=Now(),
        )
        .select_related("mailbox")
        .first()
    )
    if held is None or not user_may_decide(tenant=tenant, user=actor, mailbox=held.mailbox):
        return False
    # Guarded again: the claim may have been released or taken over since the read.
    changed = Draft.objects.filter(
        pk=held.pk,
        status=Draft.Status.PENDING,
        assignee=actor,
        claim_expires_at__gt=Now(),
    ).update(claim_expires_at=Now() + CLAIM_DURATION)
    return bool(changed)


def _require_holder_or_admin(draft: Draft, actor, membership) -> None:
    if draft.assignee_id == actor.pk or membership.is_admin:
        return
    if draft.assignee_id is None:
        raise errors.NotHolder(message=_("Nobody holds this draft; take it first."))
    raise errors.NotHolder(
        message=_("%(name)s holds this draft; only they or an admin may pass it on.")
        % {"name": _holder_name(draft)}
    )


# A release or hand-over that names no holder seen (no page asked: a command, a test).
UNSEEN = object()


def _require_holder_seen(draft: Draft, actor, holder_seen: int | object | None) -> None:
    """Refused when the draft now has a holder other than the one the person's page showed
    (``holder_seen``: that holder's id, None for nobody; ``UNSEEN`` when no page asked). An
    admin's Release or Hand over from a page that named Ben passed on Cara's work, which she
    took since: the admin decided about a hold they never saw."""
    if holder_seen is UNSEEN or draft.assignee_id in (None, holder_seen, actor.pk):
        return
    raise errors.HeldByOther(
        message=_(
            "%(name)s holds this draft now, not the holder your page showed: nothing was "
            "changed. Look again, then decide."
        )
        % {"name": _holder_name(draft)}
    )


def draft_hand(
    *, tenant, draft_id, actor, to_user, holder_seen: int | object | None = UNSEEN
) -> Draft:
    """Hand a draft to a colleague who may review its mailbox (an assignment with no expiry).
    ``holder_seen``: see ``_require_holder_seen``."""
    tenant = active_tenant(tenant)
    with transaction.atomic():
        draft = _lock_pending(tenant, draft_id)
        require_standing(tenant, None)
        membership = _require_approver(tenant, actor, draft)
        _require_holder_or_admin(draft, actor, membership)
        _require_holder_seen(draft, actor, holder_seen)
        if to_user is None:
            raise errors.InvalidInput("member_required", _("Choose whom to hand it to."), "to")
        if active_membership(tenant=tenant, user=to_user) is None:
            raise errors.InvalidInput(
                "member_not_active",
                _("%(name)s is not an active member of this tenant.")
                % {"name": to_user.display_name},
                "to",
            )
        _require_approver(tenant, to_user, draft, who=to_user.display_name)
        if draft.assignee_id == to_user.pk:
            raise errors.InvalidInput(
                "already_holder",
                _("%(name)s already holds this draft.") % {"name": to_user.display_name},
                "to",
            )
        previous = draft.assignee_id
        Draft.objects.filter(pk=draft.pk).update(
            assignee=to_user, assigned_how=Assigned.HANDED, claim_expires_at=None, updated_at=Now()
        )
        data = {"holder": to_user.pk, "previous_holder": previous}
        _journal(tenant, draft, "draft.handed", actor, data)
    draft.refresh_from_db()
    return draft


def draft_release(*, tenant, draft_id, actor, holder_seen: int | object | None = UNSEEN) -> Draft:
    """Give a held draft back to the queue (the holder, or an admin for anyone's).
    ``holder_seen``: see ``_require_holder_seen``."""
    tenant = active_tenant(tenant)
    with transaction.atomic():
        draft = _lock_pending(tenant, draft_id)
        require_standing(tenant, None)
        membership = _require_approver(tenant, actor, draft)
        if draft.assignee_id is None:
            raise errors.NotHolder(message=_("Nobody holds this draft."))
        _require_holder_or_admin(draft, actor, membership)
        _require_holder_seen(draft, actor, holder_seen)
        previous = draft.assignee_id
        Draft.objects.filter(pk=draft.pk).update(**UNHELD, updated_at=Now())
        _journal(tenant, draft, "draft.released", actor, {"previous_holder": previous})
    draft.refresh_from_db()
    return draft


def auto_assignee(mailbox: Mailbox):
    """Whom a new draft of this mailbox goes to (call inside the creating transaction): the next
    present approver after the one picked last, or None when the mailbox does not assign or
    nobody is present. The mailbox row is locked so two drafts created at once take turns."""
    if not mailbox.auto_assign:
        return None
    Mailbox.objects.select_for_update().filter(pk=mailbox.pk).values_list("pk").first()
    candidates = approver_memberships(mailbox=mailbox, present_only=True)
    last = (
        Draft.objects.filter(mailbox=mailbox, auto_assigned_to__isnull=False)
        .order_by("-id")
        .values_list("auto_assigned_to_id", flat=True)
        .first()
    )
    picked = next_in_turn(candidates, last)
    return picked.user if picked else None


def drafts_release_lapsed_claims(*, batch: int = 500, now=None) -> int:
    """The sweep: claims nobody renewed go back to the queue ("Unassigned"). Safe on every
    cluster: rows another sweep holds are skipped; the conditional UPDATE decides."""
    return _release_holds(
        Q(claim_expires_at__lte=now or Now()), action="draft.claim_lapsed", batch=batch
    )


def drafts_release_undecidable_holds(*, batch: int = 500) -> int:
    """The sweep: drafts held by someone who may no longer decide them (deactivated, made a
    viewer, stripped of the mailbox's right, account disabled) go back to the queue. A hold
    handed, assigned or escalated has no expiry: it stayed on that person for good, off the
    Unassigned view and without a Take button, though nobody could act on it as its holder.
    Safe on every cluster, as ``drafts_release_lapsed_claims``."""
    cannot_decide = ~may_decide_exists(tenant="tenant_id", user="assignee_id", mailbox="mailbox_id")
    return _release_holds(
        Q(assignee__isnull=False), cannot_decide, action="draft.holder_cannot_decide", batch=batch
    )


def _release_holds(*where, action: str, batch: int) -> int:
    """Give back the pending drafts ``where`` holds (rows another sweep locked are skipped), each
    with a guarded UPDATE that asks ``where`` again (the hold may have been renewed, handed on or
    the rights given back since), and a journal row ``action`` naming the previous holder."""
    released = 0
    with transaction.atomic():
        due = list(
            Draft.objects.select_for_update(skip_locked=True)
            .filter(*where, status=Draft.Status.PENDING)
            .values_list("pk", "tenant_id", "assignee_id")[:batch]
        )
        for draft_id, tenant_id, holder in due:
            changed = Draft.objects.filter(
                *where, pk=draft_id, status=Draft.Status.PENDING, assignee_id=holder
            ).update(**UNHELD, updated_at=Now())
            if changed:
                released += 1
                journal(
                    tenant=tenant_id,
                    draft=draft_id,
                    action=action,
                    actor_kind=IntentEvent.Actor.SWEEP,
                    from_state=Draft.Status.PENDING,
                    to_state=Draft.Status.PENDING,
                    data={"previous_holder": holder},
                )
    return released
