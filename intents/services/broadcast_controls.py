"""A broadcast stopped or let go on its way by a person: pause, resume, cancel, and the undo of
its approval inside the undo window (the rest of its life as a person or an agent drives it is
``broadcasts``)."""

from __future__ import annotations

from django.db import transaction
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from config.clock import db_now
from intents import errors
from intents.journal import journal
from intents.models import Broadcast, IntentEvent, ProviderThrottle, SendAttempt, SendIntent
from intents.services.broadcasts import (
    enqueue_fan_out,
    lock_broadcast,
    require_broadcast_approver,
    require_broadcast_state,
)
from intents.services.common import active_tenant, clean_reason
from tenants.send_stops import Stopped

State = Broadcast.State


def _sends_in_flight(broadcast: Broadcast) -> int:
    """The broadcast's sends past their pre-call check whose call has no answer yet (an attempt
    row committed, still pending). Read under the broadcast's row lock, which waited for every
    check that had read the broadcast as sendable (``hold_broadcasts``): these calls go out after
    a pause or a cancellation, and the person who made it is told so; a later check sees it."""
    return (
        SendAttempt.objects.filter(
            intent__broadcast=broadcast,
            intent__state__in=[SendIntent.State.SENDING, SendIntent.State.UNCERTAIN],
            outcome=SendAttempt.Outcome.PENDING,
        )
        # A label lookup only reads: nothing of it goes out after the pause or cancellation.
        .exclude(kind=SendAttempt.Kind.LOOKUP)
        .values("intent_id")
        .distinct()
        .count()
    )


def _move(
    *,
    tenant,
    broadcast_id,
    actor,
    allowed: set[str],
    target,
    action: str,
    reason="",
    stops=False,
    check=None,
) -> Stopped[Broadcast]:
    """``stops``: the move stops the broadcast's sends, and counts those already on their way.
    ``check``: called with the locked broadcast, after its state and the actor's right, to refuse
    the move (raises)."""
    tenant = active_tenant(tenant)
    with transaction.atomic():
        broadcast = lock_broadcast(tenant, broadcast_id)
        require_broadcast_state(broadcast, allowed)
        require_broadcast_approver(tenant, broadcast, actor)
        if check is not None:
            check(broadcast)
        in_flight = _sends_in_flight(broadcast) if stops else 0
        to_state = target(broadcast) if callable(target) else target
        Broadcast.objects.filter(pk=broadcast.pk, state=broadcast.state).update(
            state=to_state, updated_at=Now()
        )
        if to_state in Broadcast.FINISHED:
            ProviderThrottle.drop_broadcast_bucket(broadcast.pk)
        journal(
            tenant=tenant,
            broadcast=broadcast,
            action=action,
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=broadcast.state,
            to_state=to_state,
            reason=reason,
            data={"sends_in_flight": in_flight} if stops else None,
        )
    broadcast.refresh_from_db()
    return Stopped(broadcast, in_flight)


def fan_out_done(broadcast: Broadcast) -> bool:
    return broadcast.fanout_position >= broadcast.recipient_count - 1


def _sends_left(refusal: str):
    """A ``_move`` check refusing to stop a broadcast with nothing left to send: its fan-out done
    and every send settled (the sweep marks it completed within its interval). Cancelled then,
    every customer had the message and the broadcast and its journal said otherwise; paused, it
    held nothing and was never completed."""

    def check(broadcast: Broadcast) -> None:
        if not fan_out_done(broadcast):
            return
        unsettled = SendIntent.objects.filter(broadcast=broadcast).exclude(
            state__in=SendIntent.SETTLED
        )
        if not unsettled.exists():
            raise errors.NotPending("broadcast_done", refusal)

    return check


def broadcast_pause(*, tenant, broadcast_id, actor) -> Stopped[Broadcast]:
    """No new provider call for this broadcast after this commits: the claim skips its sends and
    the pre-call check hands a send claimed just before back to the queue, unsent. The calls
    already past that check go out; the result counts them."""
    return _move(
        tenant=tenant,
        broadcast_id=broadcast_id,
        actor=actor,
        allowed={State.APPROVED, State.FANNING_OUT, State.SENDING},
        target=State.PAUSED,
        action="broadcast.paused",
        stops=True,
        check=_sends_left(
            _("Nothing is left to pause: every message of this broadcast was sent or settled.")
        ),
    )


def last_pause(broadcast: Broadcast) -> str:
    """Which pause the broadcast is in (its journal row's id; "" when never paused): what a
    Resume button was shown for (``broadcast_resume``'s ``seen_pause``)."""
    found = (
        IntentEvent.objects.filter(broadcast_id=broadcast.pk, action="broadcast.paused")
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    return str(found or "")


def broadcast_resume(*, tenant, broadcast_id, actor, seen_pause: str | None = None) -> Broadcast:
    """``seen_pause``: the pause the person's page showed (``last_pause``; None: no page asked,
    a command or a test). A resume from a page older than the last pause is refused: someone
    resumed it and paused it again since, for a reason this person has not read."""

    def same_pause(broadcast: Broadcast) -> None:
        if seen_pause is not None and seen_pause != last_pause(broadcast):
            raise errors.StaleVersion(
                "paused_again",
                _(
                    "It was resumed and paused again since this page was loaded: read why it "
                    "was paused, then resume it if it may go on."
                ),
            )

    broadcast = _move(
        tenant=tenant,
        broadcast_id=broadcast_id,
        actor=actor,
        allowed={State.PAUSED},
        target=lambda b: State.SENDING if fan_out_done(b) else State.FANNING_OUT,
        action="broadcast.resumed",
        check=same_pause,
    ).changed
    transaction.on_commit(lambda: enqueue_fan_out(broadcast.pk))
    return broadcast


def broadcast_cancel(*, tenant, broadcast_id, actor, reason="") -> Stopped[Broadcast]:
    """Cancel the rest: no more sends are created or claimed; the queued ones are cancelled (in
    pages, journaled, by ``broadcasts_cancel_remaining``, which the sweep also runs). The calls
    already past their pre-call check go out; the result counts them."""
    reason = clean_reason(reason, required=False)
    stopped = _move(
        tenant=tenant,
        broadcast_id=broadcast_id,
        actor=actor,
        allowed={State.APPROVED, State.FANNING_OUT, State.SENDING, State.PAUSED},
        target=State.CANCELLED,
        action="broadcast.cancelled",
        reason=reason,
        stops=True,
        check=_sends_left(
            _("Nothing is left to cancel: every message of this broadcast was sent or settled.")
        ),
    )
    transaction.on_commit(lambda: enqueue_fan_out(stopped.changed.pk))
    return stopped


# The states an approval inside its undo window may be in: paused, or paused and resumed, before
# the window ended (no send exists in any of them until it ends).
UNDOABLE: set[str] = {State.APPROVED, State.FANNING_OUT, State.PAUSED}


def broadcast_undo(*, tenant, broadcast_id, actor) -> Broadcast:
    """Take a broadcast's approval back inside its undo window: it is pending review again, as
    it was before the approval, and a fresh approval is needed. Any approver of the mailbox may.

    Races with the fan-out are decided by the broadcast's row lock, which every page of the
    fan-out takes and under which it reads the window (``broadcast_fan_out_page``): a page that
    ran first made sends after the window, and this undo then finds them and is refused; one
    that runs after finds the broadcast pending review and makes nothing."""
    tenant = active_tenant(tenant)
    with transaction.atomic():
        broadcast = lock_broadcast(tenant, broadcast_id)
        require_broadcast_approver(tenant, broadcast, actor)
        if broadcast.state not in UNDOABLE | {State.SENDING}:
            require_broadcast_state(broadcast, UNDOABLE)
        if broadcast.hold_until is None:
            raise errors.NotPending(
                "undo_no_window",
                _(
                    "This broadcast was approved without an undo window: pause or cancel it "
                    "instead."
                ),
            )
        now = db_now()
        sends_made = (
            broadcast.fanout_position >= 0
            or SendIntent.objects.filter(broadcast_id=broadcast.pk).exists()
        )
        if broadcast.state == State.PAUSED and broadcast.hold_until <= now:
            # Paused, nothing more of it goes out until someone resumes it: the refusal for one
            # on its way ("its sends are on their way... pause it") was untrue of it.
            raise errors.NotPending(
                "undo_too_late",
                _(
                    "Too late to undo: the undo window of this broadcast has closed. It is "
                    "paused: cancel it to send nothing more, or resume it to send the rest."
                ),
            )
        if broadcast.state == State.SENDING or sends_made or broadcast.hold_until <= now:
            raise errors.NotPending(
                "undo_too_late",
                _(
                    "Too late to undo: the undo window of this broadcast has closed and its "
                    "sends are on their way. Pause or cancel it instead."
                ),
            )
        Broadcast.objects.filter(pk=broadcast.pk, state=broadcast.state).update(
            state=State.PENDING_REVIEW,
            approved_by=None,
            approved_at=None,
            approved_hash="",
            hold_until=None,
            decided_by=None,
            updated_at=Now(),
        )
        journal(
            tenant=tenant,
            broadcast=broadcast,
            action="broadcast.approval_undone",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=broadcast.state,
            to_state=State.PENDING_REVIEW,
            data={
                "content_hash": broadcast.approved_hash,
                "hold_until": broadcast.hold_until.isoformat(),
                "seconds_left": round((broadcast.hold_until - now).total_seconds(), 3),
            },
        )
    broadcast.refresh_from_db()
    return broadcast
