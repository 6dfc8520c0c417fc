"""Reopening an approved draft whose send did not go out (a new version in review, a fresh
deadline), and closing a reopened draft whose earlier send a person then proved sent."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from config.clock import db_now
from intents import errors
from intents.hashing import content_hash as compute_content_hash
from intents.journal import journal
from intents.models import Draft, DraftVersion, IntentEvent, SendIntent
from intents.selectors.intents import REOPENABLE_STATES, intents_that_may_have_gone_out
from intents.services.attachments import attach, hash_entries, planned_copy
from intents.services.common import (
    UNHELD,
    active_tenant,
    clean_reason,
    lock_draft,
    require_active_mailbox,
    require_decider,
    require_standing,
)
from intents.services.deadlines import deadline_times

log = logging.getLogger("intents.services")


def draft_reopen(*, tenant, draft_id, actor, reason, from_intent: int | None = None) -> Draft:
    """Put an approved draft whose send did not go out back into review, as a new version.
    ``from_intent``: the send whose page asked (refused unless it is the draft's latest send).

    The new version is a copy of the approved one under its author's name (``_copy_version``: a
    reopen writes nothing), so only a fresh approval of that exact version (and its hash) can
    send it, and that approval creates a new intent with a new idempotency key. The old version
    keeps its intent: one intent per version stays true. Refused while the latest send is live (it may still go out) or once any
    send of the draft was accepted.
    """
    tenant = active_tenant(tenant)
    reason = clean_reason(reason, required=True)
    with transaction.atomic():
        # FOR NO KEY UPDATE, then the send's row (as intent_undo): a cancel or a sweep holding
        # that row checks, as it commits, the draft its journal row names (a KEY SHARE lock),
        # which FOR UPDATE would block while this waits for the row: a deadlock.
        draft = lock_draft(tenant, draft_id, no_key=True)
        require_decider(tenant, actor, draft.mailbox)
        _require_approved(draft)
        intent = _lock_reopenable_intent(tenant, draft)
        # Both read again, locked: the tenant was read before the transaction, the mailbox by
        # the draft's statement before its wait for the row.
        require_standing(tenant, None)
        require_active_mailbox(draft.mailbox)
        if from_intent is not None and str(from_intent) != str(intent.pk):
            # Reopened from an older send's page: the copy would be of the latest send's
            # version, which that page did not show.
            raise errors.IntentError(
                "not_latest_send",
                _(
                    "Send #%(old)s is not this draft's latest send: open send #%(latest)s and "
                    "re-approve from there."
                )
                % {"old": from_intent, "latest": intent.pk},
            )
        source = intent.draft_version
        assert source is not None  # the draft's own intent
        may_have_gone_out = intent.state == SendIntent.State.NEEDS_ATTENTION or (
            intent.pk in intents_that_may_have_gone_out(tenant=tenant, intent_ids=[intent.pk])
        )
        now = db_now()
        version = reopen_as_new_version(tenant, draft, source, now)
        not_after_cleared = _clear_passed_not_after(draft, now)
        sla_due_at = _restart_deadline(tenant, draft, now)
        journal(
            tenant=tenant,
            draft=draft,
            intent=intent,
            action="draft.reopened",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=Draft.Status.APPROVED,
            to_state=Draft.Status.PENDING,
            reason=reason,
            data={
                "version": version.number,
                "content_hash": version.content_hash,
                "copied_from_version": source.number,
                "earlier_intent": intent.pk,
                "earlier_intent_state": intent.state,
                "earlier_may_have_gone_out": may_have_gone_out,
                "not_after_cleared": not_after_cleared,
                "sla_due_at": sla_due_at.isoformat() if sla_due_at else None,
            },
        )
    log.info(
        "intents.draft.reopened",
        extra={
            "tenant_id": tenant.pk,
            "draft_id": draft.pk,
            "earlier_intent_id": intent.pk,
            "earlier_state": intent.state,
        },
    )
    draft.refresh_from_db()
    return draft


def draft_close_as_sent(*, tenant, draft_id, intent: SendIntent, actor) -> bool:
    """A reopened draft whose earlier send a person has just proven sent (call in that
    transaction, the draft locked): back to ``approved`` on the version that went out, with the
    approval that sent it. Left pending, it could be neither approved nor edited
    (``already_sent``), yet it sat in the review queue until its deadline expired it, and the
    agent could withdraw a reply that went out. Returns whether it moved (a draft that is not
    pending keeps its state)."""
    assert intent.draft_version is not None  # a reply's send
    pending_version = (
        Draft.objects.filter(pk=draft_id, tenant=tenant, status=Draft.Status.PENDING)
        .values_list("current_version", flat=True)
        .first()
    )
    if pending_version is None:
        return False
    Draft.objects.filter(pk=draft_id, status=Draft.Status.PENDING).update(
        status=Draft.Status.APPROVED,
        current_version=intent.draft_version.number,
        decided_by_id=intent.approver_id,
        decided_at=intent.approved_at,
        updated_at=Now(),
        **UNHELD,
    )
    journal(
        tenant=tenant,
        draft=draft_id,
        intent=intent,
        action="draft.closed_as_sent",
        actor_kind=IntentEvent.Actor.PERSON,
        actor_user=actor,
        from_state=Draft.Status.PENDING,
        to_state=Draft.Status.APPROVED,
        data={"version": intent.draft_version.number, "pending_version": pending_version},
    )
    return True


def _require_approved(draft: Draft) -> None:
    if draft.status == Draft.Status.PENDING:
        raise errors.NotPending(
            "already_pending",
            _("This draft is already back in the review queue (version %(n)s).")
            % {"n": draft.current_version},
        )
    if draft.status != Draft.Status.APPROVED:
        raise errors.NotPending(
            "not_approved",
            _(
                "This draft was %(status)s, never sent; "
                "only an approved draft whose send did not go out can be re-approved."
            )
            % {"status": draft.get_status_display().lower()},
        )


def _lock_reopenable_intent(tenant, draft: Draft) -> SendIntent:
    """The draft's latest send, locked, if it certainly did not go out and its approved version
    can be copied (call with the draft locked)."""
    # Locking the latest intent too serialises against a person resolving or cancelling it
    # (those take the intent row lock) and against a worker claiming it.
    intent = (
        SendIntent.objects.select_for_update(of=("self",))
        .select_related("draft_version")
        .filter(tenant=tenant, draft=draft)
        .order_by("-id")
        .first()
    )
    if intent is None:
        raise errors.IntentError("no_send", _("This draft has no send to re-approve."))
    if intent.state == SendIntent.State.ACCEPTED or (
        SendIntent.objects.filter(draft=draft, state=SendIntent.State.ACCEPTED).exists()
    ):
        raise errors.IntentError(
            "intent_accepted",
            _(
                "Send #%(send)s of this draft was accepted by AgentMail: it went out. "
                "Write a new reply instead of sending this one again."
            )
            % {"send": intent.pk},
        )
    if intent.state not in REOPENABLE_STATES:
        raise errors.IntentError(
            "intent_live",
            _(
                "Send #%(send)s is still %(state)s and may still "
                "go out. Wait for its outcome, or cancel it, before re-approving."
            )
            % {"send": intent.pk, "state": intent.get_state_display().lower()},
        )
    assert intent.draft_version is not None  # selected by draft
    if intent.draft_version.body_purged_at is not None:
        raise errors.DraftError(
            "body_purged",
            _("The approved body was purged by the retention policy; it cannot be sent again."),
        )
    return intent


def _copy_version(tenant, draft: Draft, source: DraftVersion) -> DraftVersion:
    """The next version of the draft: the approved content, by whoever wrote it (an undo or a
    reopen writes nothing, so four-eyes keeps that author, not the person bringing it back,
    from approving it alone)."""
    content: dict[str, Any] = {
        "to": list(source.to),
        "cc": list(source.cc),
        "bcc": list(source.bcc),
        "subject": source.subject,
        "text": source.text,
        "html": source.html,
    }
    files = planned_copy(source)
    version = DraftVersion.objects.create(
        draft=draft,
        tenant=tenant,
        number=draft.current_version + 1,
        content_hash=compute_content_hash(
            mailbox_id=draft.mailbox_id,
            in_reply_to=draft.in_reply_to,
            attachments=hash_entries(files),
            **content,
        ),
        author_kind=source.author_kind,
        author_user=source.author_user,
        author_token=source.author_token,
        **content,
    )
    attach(tenant, version, files)
    return version


def reopen_as_new_version(tenant, draft: Draft, source: DraftVersion, now) -> DraftVersion:
    """The one way back to review for an approved draft (call with the draft locked): a copy
    of ``source`` as the next version, the draft pending on it. The agent's send-before time
    (``not_after``) stays: only a person's reopen may decide to send past it
    (``_clear_passed_not_after``); an undo stops a send, it does not extend its deadline."""
    version = _copy_version(tenant, draft, source)
    Draft.objects.filter(pk=draft.pk, status=Draft.Status.APPROVED).update(
        status=Draft.Status.PENDING,
        current_version=version.number,
        decided_by=None,
        decided_at=None,
        # A fresh review window: the old deadline has usually passed and the sweep would
        # expire the draft before anyone could approve it.
        review_deadline=now + timedelta(hours=tenant.review_deadline_hours),
        updated_at=Now(),
    )
    return version


def _restart_deadline(tenant, draft: Draft, now):
    """A fresh deadline (SLA) for a reopened draft, measured from the reopen: a new review round.
    Keeping the first one escalated the draft at the next sweep whenever it had passed, often the
    case for a send that failed or waited for a person. Earlier warning, breach and escalation
    marks go with it (the journal keeps them), so the new round warns and escalates again.
    ``now``: the database clock, as at creation (``intents.services.deadlines``)."""
    sla_due_at, sla_warn_at = deadline_times(tenant, draft.mailbox, now)
    Draft.objects.filter(pk=draft.pk).update(
        sla_due_at=sla_due_at,
        sla_warn_at=sla_warn_at,
        sla_warned_at=None,
        sla_breached_at=None,
        sla_breach_holder=None,
        # Both: the round-robin reads its last pick by escalated_at among rows naming
        # escalated_to, and a NULL time would sort first.
        escalated_at=None,
        escalated_to=None,
        updated_at=Now(),
    )
    return sla_due_at


def _clear_passed_not_after(draft: Draft, now) -> str | None:
    """Clear the draft's send-before time if it passed; returns the cleared value for the
    journal. The person reopening decides to send after it: keeping it would make the new
    version impossible to approve."""
    if draft.not_after is None or draft.not_after > now:
        return None
    Draft.objects.filter(pk=draft.pk).update(not_after=None, updated_at=Now())
    return draft.not_after.isoformat()
