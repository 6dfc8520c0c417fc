"""Undo send: inside the tenant's undo window after Approve (``SendIntent.hold_until``), an
approver takes the approval back. The intent is cancelled before any provider call and the draft
is pending again on a copy of the approved version (the path ``draft_reopen`` takes: one intent
per version stays true).

Races with the worker are decided by the intent's row lock: the claim takes rows with ``FOR
UPDATE SKIP LOCKED`` and only after ``hold_until``; the undo locks the row, then reads the state,
the attempts and the database clock. Whichever holds the lock first wins; the other sees the
result (a claim skips a locked row; an undo that waited finds it ``sending`` and is refused)."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from config.clock import db_now
from intents import errors
from intents.journal import journal
from intents.models import Draft, IntentEvent, SendAttempt, SendIntent
from intents.selectors.intents import intents_that_may_have_gone_out
from intents.services.common import (
    active_tenant,
    lock_intent,
    person_who_acted,
    require_decider,
)
from intents.services.reopen import reopen_as_new_version

log = logging.getLogger("intents.services")

# The note an undo leaves on the send it cancels, stored as written (the send's page gives it in
# words: intents.reason_words).
UNDONE_NOTE = "Undone inside the undo window."

# Ended, and nothing went out unless the journal shows an unproven outcome (a send cancelled from
# needs_attention may have): refusing an undo of these as "too late, it is on its way" is false.
NOT_SENT_STATES = frozenset(
    {
        SendIntent.State.EXPIRED,
        SendIntent.State.CANCELLED,
        SendIntent.State.BLOCKED,
        SendIntent.State.FAILED,
    }
)


def intent_undo(*, tenant, intent_id, actor) -> Draft:
    """Cancel a just-approved send inside its undo window and put its draft back in review.

    Any approver with the right on the mailbox may undo, not only the one who approved: undoing
    sends nothing and only returns the draft to review, where a fresh approval is needed."""
    tenant = active_tenant(tenant)
    draft_id = (
        SendIntent.objects.filter(tenant=tenant, pk=_intent_pk(intent_id))
        .values_list("draft_id", flat=True)
        .first()
    )
    if draft_id is None:
        raise errors.NotFound("not_found", "No such send.")
    with transaction.atomic():
        # Draft, then intent: the order draft_reopen locks in. The draft is locked FOR NO KEY
        # UPDATE: a claimer holding the intent row writes a journal row naming the draft (a
        # KEY SHARE lock on it), which FOR UPDATE would block: a deadlock with this undo waiting
        # for that claimer's intent row (tests/intents/test_undo.py, the edge race, found it).
        draft = (
            Draft.objects.select_for_update(no_key=True, of=("self",))
            .filter(tenant=tenant, pk=draft_id)
            .get()
        )
        intent = lock_intent(tenant, intent_id)
        assert intent.draft_version is not None  # found through its draft above
        require_decider(tenant, actor, intent.mailbox)
        now = db_now()
        _require_undoable(tenant, intent, draft, now)
        changed = SendIntent.objects.filter(
            pk=intent.pk, state=SendIntent.State.QUEUED, attempts=0, hold_until__gt=Now()
        ).update(
            state=SendIntent.State.CANCELLED,
            resolved_by=actor,
            resolution_note=UNDONE_NOTE,
            updated_at=Now(),
        )
        if not changed:
            raise _too_late(intent)
        version = reopen_as_new_version(tenant, draft, intent.draft_version, now)
        _journal_undo(tenant, draft, intent, version, actor, now)
    log.info(
        "intents.intent.undone",
        extra={"tenant_id": tenant.pk, "draft_id": draft.pk, "intent_id": intent.pk},
    )
    draft.refresh_from_db()
    return draft


def _intent_pk(intent_id) -> int:
    try:
        return int(intent_id)
    except (TypeError, ValueError):
        raise errors.NotFound("not_found", "No such send.") from None


def _too_late(intent: SendIntent) -> errors.IntentError:
    return errors.IntentError(
        "undo_too_late",
        _(
            "Too late to undo send #%(id)s: its undo window has closed and it is on its way. "
            "Follow it in the outbox."
        )
        % {"id": intent.pk},
    )


def _not_sent(intent: SendIntent) -> errors.IntentError:
    """Nothing went out; when a colleague cancelled or undid it first, who and when."""
    first = None
    if intent.state == SendIntent.State.CANCELLED:
        first = person_who_acted(intent=intent, actions=("intent.cancelled", "intent.undone"))
    if first is None:
        message = _("Nothing to undo: send #%(id)s is %(state)s and nothing was sent.") % {
            "id": intent.pk,
            "state": intent.get_state_display().lower(),
        }
    elif first["action"] == "intent.undone":
        message = _("%(who)s undid send #%(id)s at %(when)s: nothing was sent.") % {
            **first,
            "id": intent.pk,
        }
    else:
        message = _("%(who)s cancelled send #%(id)s at %(when)s: nothing was sent.") % {
            **first,
            "id": intent.pk,
        }
    return errors.IntentError("undo_not_sent", message)


def _require_undoable(tenant, intent: SendIntent, draft: Draft, now) -> None:
    """Queued, never attempted, still inside its window, and the draft's live approval."""
    assert intent.draft_version is not None
    if intent.hold_until is None:
        raise errors.IntentError(
            "undo_no_window",
            _(
                "Send #%(id)s was approved without an undo window; cancel it instead if it is queued."
            )
            % {"id": intent.pk},
        )
    if intent.state in NOT_SENT_STATES and not intents_that_may_have_gone_out(
        tenant=tenant, intent_ids=[intent.pk]
    ):
        raise _not_sent(intent)
    attempted = intent.attempts or SendAttempt.objects.filter(intent_id=intent.pk).exists()
    if intent.state != SendIntent.State.QUEUED or attempted or intent.hold_until <= now:
        raise _too_late(intent)
    if (
        draft.status != Draft.Status.APPROVED
        or draft.current_version != intent.draft_version.number
    ):
        # Cannot happen while the intent is queued (reopen refuses a live send); fail closed.
        raise errors.IntentError("undo_not_current", _("This send is not the draft's approval."))


def _journal_undo(tenant, draft: Draft, intent: SendIntent, version, actor, now) -> None:
    assert intent.draft_version is not None
    journal(
        tenant=tenant,
        draft=draft,
        intent=intent,
        action="intent.undone",
        actor_kind=IntentEvent.Actor.PERSON,
        actor_user=actor,
        from_state=SendIntent.State.QUEUED,
        to_state=SendIntent.State.CANCELLED,
        data={
            "hold_until": intent.hold_until.isoformat() if intent.hold_until else None,
            "seconds_left": round((intent.hold_until - now).total_seconds(), 3)
            if intent.hold_until
            else None,
        },
    )
    journal(
        tenant=tenant,
        draft=draft,
        intent=intent,
        action="draft.approval_undone",
        actor_kind=IntentEvent.Actor.PERSON,
        actor_user=actor,
        from_state=Draft.Status.APPROVED,
        to_state=Draft.Status.PENDING,
        data={
            "version": version.number,
            "content_hash": version.content_hash,
            "copied_from_version": intent.draft_version.number,
            "earlier_intent": intent.pk,
        },
    )
