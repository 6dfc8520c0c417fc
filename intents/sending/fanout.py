"""A broadcast's worker side: the fan-out into one send intent per recipient, in pages, and the
end of a broadcast (the rest cancelled, or all sends settled).

Each page is one transaction under the broadcast's row lock: it reads the next recipients after
``fanout_position``, filters the suppressed and out-of-policy ones (recorded on the recipient,
reported on the page), creates one intent per remaining recipient and advances the position. A
process killed mid-page rolls the page back whole; the next run (the task or the sweep) starts
where the last committed page ended. ``SendIntent.broadcast_recipient`` is unique, so even a
position written wrongly could not make a second send for a recipient.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from config.clock import db_now
from intents import broadcast_content as content
from intents.journal import Entry, journal, journal_many
from intents.models import (
    Broadcast,
    BroadcastRecipient,
    IntentEvent,
    ProviderThrottle,
    SendIntent,
)
from intents.policy import SuppressedAs, normalize_address, tenant_suppressed
from tenants.send_stops import send_births_wait

log = logging.getLogger("intents.sending")

State = Broadcast.State
# Below every reply (drafts' priorities lie in -100..100): the claim takes replies first.
BROADCAST_PRIORITY = -1000


def _lock(broadcast_id: int) -> Broadcast | None:
    return (
        Broadcast.objects.select_for_update(of=("self",))
        .select_related("mailbox")
        .filter(pk=broadcast_id)
        .first()
    )


def _normal_form(address: str) -> str | None:
    try:
        return normalize_address(address)
    except ValueError:
        return None


def _skip_reason(
    broadcast: Broadcast, address: str | None, suppressed: dict[str, SuppressedAs]
) -> str:
    """Why the recipient (``address``: its normal form, None when it has none) is left out, or
    "". ``suppressed``: the entries covering the page's addresses (``tenant_suppressed``: its
    own, or its base address's for a sub-address)."""
    if address is None:
        return BroadcastRecipient.Skip.NOT_ALLOWED
    if address in suppressed:
        return BroadcastRecipient.Skip.SUPPRESSED
    if not broadcast.mailbox.allows_recipient(address):
        return BroadcastRecipient.Skip.NOT_ALLOWED
    return ""


def _born_here(broadcast_id: int) -> Broadcast | None:
    """The broadcast locked for a page of its fan-out, after the tenant's send-births lock; None
    when it has nothing to fan out (gone, in no fan-out state, or inside its undo window)."""
    tenant_id = (
        Broadcast.objects.filter(pk=broadcast_id).values_list("tenant_id", flat=True).first()
    )
    if tenant_id is None:
        return None
    send_births_wait(tenant_id=tenant_id)
    broadcast = _lock(broadcast_id)
    if broadcast is None or broadcast.state not in (
        State.APPROVED,
        State.FANNING_OUT,
        State.PAUSED,
    ):
        return None
    if broadcast.hold_until is not None and broadcast.hold_until > db_now():
        # Inside its undo window: no send exists until it ends. Read under the row lock that
        # broadcast_undo takes too, so an undo either finds no send or is refused.
        return None
    return broadcast


def broadcast_fan_out_page(*, broadcast_id: int, page_size: int | None = None) -> bool:
    """One page of the fan-out; True while more pages remain."""
    page_size = page_size or settings.BROADCAST_FANOUT_PAGE
    with transaction.atomic():
        # Its sends are born here: a change that stops the tenant's sends and is running now
        # is waited for, and one that starts now waits for this page (tenants.send_stops).
        # Before the broadcast's row lock: a worker holding sends waits for that row
        # (hold_broadcasts) while the change waits for the worker's sends, so a page that held
        # the row and then waited for the change closed a cycle of three.
        broadcast = _born_here(broadcast_id)
        if broadcast is None:
            return False
        page = list(
            BroadcastRecipient.objects.filter(
                broadcast=broadcast, position__gt=broadcast.fanout_position
            ).order_by("position")[:page_size]
        )
        addresses = {r.pk: _normal_form(r.address) for r in page}
        suppressed = tenant_suppressed(
            broadcast.tenant_id, [a for a in addresses.values() if a is not None]
        )
        now = db_now()
        skipped: dict[str, list[int]] = {}
        intents = []
        for recipient in page:
            reason = _skip_reason(broadcast, addresses[recipient.pk], suppressed)
            if reason:
                skipped.setdefault(reason, []).append(recipient.pk)
                continue
            intents.append(_intent_for(broadcast, recipient, now))
        created = SendIntent.objects.bulk_create(intents)
        for reason, ids in skipped.items():
            BroadcastRecipient.objects.filter(pk__in=ids).update(skip_reason=reason)
        journal_many(
            [
                Entry(
                    tenant_id=broadcast.tenant_id,
                    intent_id=intent.pk,
                    actor_kind=IntentEvent.Actor.WORKER,
                    actor_label="fan-out",
                    action="intent.created",
                    to_state=SendIntent.State.QUEUED,
                    data={"broadcast": broadcast.pk, "idempotency_key": intent.idempotency_key},
                )
                for intent in created
            ]
        )
        last = page[-1].position if page else broadcast.recipient_count - 1
        done = last >= broadcast.recipient_count - 1
        to_state = broadcast.state
        if broadcast.state == State.APPROVED:
            to_state = State.FANNING_OUT
        if done and to_state == State.FANNING_OUT:
            to_state = State.SENDING
        Broadcast.objects.filter(pk=broadcast.pk).update(
            fanout_position=last, state=to_state, updated_at=Now()
        )
        journal(
            tenant=broadcast.tenant_id,
            broadcast=broadcast,
            action="broadcast.fanned_out" if done else "broadcast.fan_out_page",
            actor_kind=IntentEvent.Actor.WORKER,
            actor_label="fan-out",
            from_state=broadcast.state,
            to_state=to_state,
            data={
                "through_position": last,
                "created": len(created),
                "skipped": {reason: len(ids) for reason, ids in skipped.items()},
            },
        )
    return not done


def _intent_for(broadcast: Broadcast, recipient: BroadcastRecipient, now) -> SendIntent:
    # The approval's (the broadcast is approved, see the constraint broadcast_approved_has_approval).
    assert broadcast.approved_by_id is not None and broadcast.approved_at is not None
    return SendIntent(
        tenant_id=broadcast.tenant_id,
        mailbox_id=broadcast.mailbox_id,
        broadcast=broadcast,
        broadcast_recipient=recipient,
        approver_id=broadcast.approved_by_id,
        approved_at=broadcast.approved_at,
        content_hash=content.recipient_message_hash(
            mailbox_id=broadcast.mailbox_id,
            address=recipient.address,
            subject=broadcast.subject,
            text=broadcast.text,
            html=broadcast.html,
            variables=recipient.variables,
        ),
        recipients={"to": [recipient.address], "cc": [], "bcc": []},
        idempotency_key=content.broadcast_idempotency_key(
            tenant_id=broadcast.tenant_id, broadcast_id=broadcast.pk, address=recipient.address
        ),
        state=SendIntent.State.QUEUED,
        priority=BROADCAST_PRIORITY,
        next_attempt_at=now,
    )


def broadcast_cancel_page(*, broadcast_id: int, page_size: int = 500) -> bool:
    """Cancel one page of a cancelled broadcast's queued sends; True while more remain."""
    with transaction.atomic():
        broadcast = _lock(broadcast_id)
        if broadcast is None or broadcast.state != State.CANCELLED:
            return False
        ids = list(
            SendIntent.objects.select_for_update(skip_locked=True)
            .filter(broadcast=broadcast, state=SendIntent.State.QUEUED)
            .values_list("pk", flat=True)[:page_size]
        )
        if not ids:
            # Again here: a claim that read this broadcast's sends just before the cancellation
            # committed may have made the bucket again.
            ProviderThrottle.drop_broadcast_bucket(broadcast.pk)
            return False
        cancelled = list(
            SendIntent.objects.filter(pk__in=ids, state=SendIntent.State.QUEUED).values_list(
                "pk", flat=True
            )
        )
        SendIntent.objects.filter(pk__in=cancelled).update(
            state=SendIntent.State.CANCELLED, updated_at=Now()
        )
        journal_many(
            [
                Entry(
                    tenant_id=broadcast.tenant_id,
                    intent_id=pk,
                    actor_kind=IntentEvent.Actor.WORKER,
                    actor_label="broadcast-cancel",
                    action="intent.cancelled",
                    from_state=SendIntent.State.QUEUED,
                    to_state=SendIntent.State.CANCELLED,
                    reason="The broadcast was cancelled.",
                    data={"broadcast": broadcast.pk},
                )
                for pk in cancelled
            ]
        )
    return len(ids) == page_size


def broadcast_complete_if_done(*, broadcast_id: int) -> bool:
    """``sending`` → ``completed`` once every send of the broadcast is settled."""
    with transaction.atomic():
        broadcast = _lock(broadcast_id)
        if broadcast is None or broadcast.state != State.SENDING:
            return False
        if broadcast.fanout_position < broadcast.recipient_count - 1:
            return False
        if (
            SendIntent.objects.filter(broadcast=broadcast)
            .exclude(state__in=SendIntent.SETTLED)
            .exists()
        ):
            return False
        Broadcast.objects.filter(pk=broadcast.pk, state=State.SENDING).update(
            state=State.COMPLETED, updated_at=Now()
        )
        ProviderThrottle.drop_broadcast_bucket(broadcast.pk)
        journal(
            tenant=broadcast.tenant_id,
            broadcast=broadcast,
            action="broadcast.completed",
            actor_kind=IntentEvent.Actor.WORKER,
            from_state=State.SENDING,
            to_state=State.COMPLETED,
        )
    return True


def broadcast_run(broadcast_id: int, *, between: Callable[[], object] | None = None) -> None:
    """Everything the worker owes a broadcast now: the fan-out's remaining pages, the rest
    cancelled, or its completion. Safe to run twice, and concurrently (the row lock).

    ``between`` runs after every page, outside its transaction: the queue tasks pass a round of
    reply sends, so a reply approved while a 10,000-recipient fan-out holds a queue worker for
    seconds waits for one page, not for the whole fan-out (BENCHMARKS.md, broadcasts)."""
    pause = settings.BROADCAST_FANOUT_PAGE_PAUSE_SECONDS
    while broadcast_fan_out_page(broadcast_id=broadcast_id):
        if between is not None:
            between()
        if pause:
            time.sleep(pause)
    while broadcast_cancel_page(broadcast_id=broadcast_id):
        if between is not None:
            between()
    broadcast_complete_if_done(broadcast_id=broadcast_id)


def broadcasts_due(limit: int = 50) -> list[int]:
    """Broadcasts the sweep should run: a fan-out not finished (a dead process's included), a
    cancellation with queued sends left, or sends that may all be settled."""
    unfinished = Q(state__in=(State.APPROVED, State.FANNING_OUT)) | Q(
        state=State.PAUSED, fanout_position__lt=F("recipient_count") - 1
    )
    cancelling = Q(state=State.CANCELLED, intents__state=SendIntent.State.QUEUED)
    # Those with work left first: fifty long broadcasts in ``sending`` (each drains for an hour
    # or more) used to fill the whole list, and a lost fan-out or a cancellation waited for them.
    needs_work = list(
        Broadcast.objects.filter(unfinished | cancelling)
        .values_list("pk", flat=True)
        .distinct()
        .order_by("pk")[:limit]
    )
    settling = list(
        Broadcast.objects.filter(state=State.SENDING)
        .exclude(pk__in=needs_work)
        .values_list("pk", flat=True)
        .order_by("pk")[: max(0, limit - len(needs_work))]
    )
    return needs_work + settling


def broadcasts_sweep(limit: int = 50, *, between: Callable[[], object] | None = None) -> int:
    ran = 0
    for broadcast_id in broadcasts_due(limit):
        broadcast_run(broadcast_id, between=between)
        ran += 1
    return ran
