"""Person-driven (and webhook-driven) transitions of a send intent: cancel, resolve, hold,
release. The worker-side transitions live in ``intents/sending/``."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest, Now
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from common.text import unsafe_in_name
from intents import errors
from intents.journal import journal
from intents.models import Draft, IntentEvent, SendIntent
from intents.services.common import (
    active_tenant,
    clean_reason,
    enqueue_execution,
    lock_draft_of_intent,
    lock_intent,
    person_who_acted,
    require_decider,
)
from intents.services.reopen import draft_close_as_sent
from intents.signals import message_ids_recorded
from webhooks.models import MESSAGE_ID_BYTES
from webhooks.selectors import customer_messages_after_draft, inbound_message

log = logging.getLogger("intents.services")


def intent_cancel(*, tenant, intent_id, actor, reason="") -> SendIntent:
    """Cancel before anything was sent: only from queued (not yet claimed) or needs_attention."""
    tenant = active_tenant(tenant)
    reason = clean_reason(reason, required=False)
    with transaction.atomic():
        intent = lock_intent(tenant, intent_id)
        require_decider(tenant, actor, intent.mailbox)
        allowed = (SendIntent.State.QUEUED, SendIntent.State.NEEDS_ATTENTION)
        if intent.state not in allowed:
            raise errors.IntentError("not_cancellable", _not_cancellable(intent))
        from_state = intent.state
        SendIntent.objects.filter(pk=intent.pk, state=from_state).update(
            state=SendIntent.State.CANCELLED,
            resolved_by=actor,
            resolution_note=reason,
            lease_token=None,
            lease_owner="",
            lease_expires_at=None,
            updated_at=Now(),
        )
        journal(
            tenant=tenant,
            draft=intent.draft_id,
            intent=intent,
            action="intent.cancelled",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=from_state,
            to_state=SendIntent.State.CANCELLED,
            reason=reason,
        )
    intent.refresh_from_db()
    return intent


def _not_cancellable(intent: SendIntent) -> str:
    """Why a send cannot be cancelled; when a colleague cancelled it first, or undid its
    approval, who and when."""
    first = None
    if intent.state == SendIntent.State.CANCELLED:
        first = person_who_acted(intent=intent, actions=("intent.cancelled", "intent.undone"))
    if first is None:
        return _("A send that is %(state)s cannot be cancelled.") % {
            "state": intent.get_state_display().lower()
        }
    if first["action"] == "intent.undone":
        return _("%(who)s undid the approval of this send at %(when)s: nothing was sent.") % first
    return _("%(who)s cancelled this send at %(when)s.") % first


# A send in one of these never went out and never will.
_ENDED_UNSENT = [
    SendIntent.State.CANCELLED,
    SendIntent.State.FAILED,
    SendIntent.State.BLOCKED,
    SendIntent.State.EXPIRED,
]


def intent_resolve_accepted(
    *, tenant, intent_id, actor, provider_message_id, evidence
) -> SendIntent:
    """A person confirms, with evidence, that a needs-attention send did go out."""
    tenant = active_tenant(tenant)
    provider_message_id = _typed_message_id(provider_message_id)
    evidence = clean_reason(evidence, required=True)
    with transaction.atomic():
        # The draft's lock first: a new approval of the reopened draft at this moment either
        # committed (and is the newer send refused below) or waits and finds this one accepted.
        # Without it, each missed the other's uncommitted row and the reply went out twice.
        lock_draft_of_intent(tenant, intent_id)
        intent = lock_intent(tenant, intent_id)
        require_decider(tenant, actor, intent.mailbox)
        if intent.state != SendIntent.State.NEEDS_ATTENTION:
            raise errors.IntentError(
                "not_needs_attention",
                _("Only a send that needs attention can be resolved by hand."),
            )
        _require_resolvable(tenant, intent, provider_message_id)
        SendIntent.objects.filter(pk=intent.pk, state=SendIntent.State.NEEDS_ATTENTION).update(
            state=SendIntent.State.ACCEPTED,
            provider_message_id=provider_message_id,
            resolved_by=actor,
            resolution_note=evidence,
            updated_at=Now(),
        )
        if intent.draft_id is not None:
            # Before the send's journal row: its agent event reads the draft as it now is.
            draft_close_as_sent(tenant=tenant, draft_id=intent.draft_id, intent=intent, actor=actor)
        journal(
            tenant=tenant,
            draft=intent.draft_id,
            intent=intent,
            action="intent.resolved_accepted",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=SendIntent.State.NEEDS_ATTENTION,
            to_state=SendIntent.State.ACCEPTED,
            reason=evidence,
            data={"provider_message_id": provider_message_id},
        )
        tenant_id = tenant.pk
        transaction.on_commit(lambda: apply_deferred_events([(tenant_id, provider_message_id)]))
    intent.refresh_from_db()
    return intent


def _typed_message_id(provider_message_id) -> str:
    """The provider message id a person typed to resolve a send by hand, stripped; refused when
    missing, longer than the ledger records, or not one word."""
    provider_message_id = (provider_message_id or "").strip()
    if not provider_message_id:
        raise errors.InvalidInput(
            "message_id_required",
            _("Give the provider message id that proves the send."),
            "provider_message_id",
        )
    # In bytes, as the webhook ledger stores a message id whole: one of 998 characters or fewer
    # but more bytes was recorded, while its delivery events were stored under the id cut.
    size = len(provider_message_id.encode("utf-8", "surrogatepass"))
    if size > MESSAGE_ID_BYTES:
        raise errors.InvalidInput(
            "message_id_invalid",
            _(
                "The message id is %(size)s bytes in UTF-8, more than the %(limit)s a message "
                "id is recorded with."
            )
            % {"size": size, "limit": MESSAGE_ID_BYTES},
            "provider_message_id",
        )
    # One header line with no spaces (RFC 5322 msg-id): an id typed with a control character,
    # a tab or a space inside matches no webhook and no lookup, and the send would wait for a
    # delivery event that never names it.
    odd = unsafe_in_name(provider_message_id) or next(
        (f"U+{ord(ch):04X}" for ch in provider_message_id if ch.isspace()), None
    )
    if odd:
        raise errors.InvalidInput(
            "message_id_invalid",
            _(
                "A message id is one word with no spaces or control characters, like "
                "<abc123@agentmail.to>; this one holds %(char)s."
            )
            % {"char": odd},
            "provider_message_id",
        )
    return provider_message_id


def _require_resolvable(tenant, intent: SendIntent, provider_message_id: str) -> None:
    """Refuse marking ``intent`` sent when a later send of its draft is queued or went out, or
    when another send already has ``provider_message_id`` (under the caller's locks)."""
    newer = (
        SendIntent.objects.filter(draft_id=intent.draft_id, pk__gt=intent.pk)
        .exclude(state__in=_ENDED_UNSENT)
        .order_by("pk")
        .first()
        if intent.draft_id is not None
        else None
    )
    if newer is not None:
        # The draft was reopened and approved again: that send is queued or went out.
        # Recording this one as sent too would leave two sends of one reply (the approval
        # refuses a draft with an accepted send; the worker does not look again).
        raise errors.IntentError(
            "superseded",
            _(
                "Send #%(newer)s of this draft came after this one and is %(state)s: cancel "
                "it first if this one went out."
            )
            % {"newer": newer.pk, "state": newer.get_state_display().lower()},
        )
    if inbound_message(tenant=tenant, mailbox=intent.mailbox_id, message_id=provider_message_id):
        # The customer's message (the one the reply answers, shown on the draft's page, or a
        # later one): proof of nothing we sent, and the reply would be closed as sent unsent.
        raise errors.InvalidInput(
            "message_id_received",
            _(
                "%(id)s is a message this mailbox received from a customer, not one it sent: "
                "give the id of the message that went out, carrying the label %(label)s."
            )
            % {"id": provider_message_id, "label": intent.label},
            "provider_message_id",
        )
    if (
        SendIntent.objects.filter(tenant=tenant, provider_message_id=provider_message_id)
        .exclude(pk=intent.pk)
        .exists()
    ):
        # Delivery events find their send by this id: a second send with it would take
        # the other's deliveries and bounces (or give it this one's).
        raise errors.InvalidInput(
            "message_id_taken",
            _("Another send already has this message id; check which message proves this one."),
            "provider_message_id",
        )


def intent_hold(*, tenant, intent_id, reason) -> SendIntent:
    """Keep a queued send from being claimed (the customer wrote again after approval)."""
    reason = clean_reason(reason, required=True)
    with transaction.atomic():
        intent = lock_intent(tenant, intent_id)
        if intent.state != SendIntent.State.QUEUED:
            raise errors.IntentError("not_queued", _("Only a queued send can be held."))
        SendIntent.objects.filter(pk=intent.pk, state=SendIntent.State.QUEUED).update(
            held_reason=reason[:200], updated_at=Now()
        )
        journal(
            tenant=tenant,
            draft=intent.draft_id,
            intent=intent,
            action="intent.held",
            actor_kind=IntentEvent.Actor.WEBHOOK,
            from_state=SendIntent.State.QUEUED,
            to_state=SendIntent.State.QUEUED,
            reason=reason,
        )
    intent.refresh_from_db()
    return intent


def intent_release(
    *, tenant, intent_id, actor, messages_seen: Collection[int] | None = None
) -> SendIntent:
    """Let a held send go again (released inside its undo window, it still waits for its end).

    ``messages_seen``: the ids of the customer's messages the send's page showed. A message
    written in the thread after the draft and not among them refuses the release: the send was
    held so that a person reads what the customer wrote, and a message that came after the page
    was loaded (which holds nothing more: the send is already held) was read by no one. None: a
    caller that showed no messages (a command, a test), refused by any such message, as
    ``draft_approve`` refuses one that saw none. The journal row records the messages checked.
    """
    tenant = active_tenant(tenant)
    with transaction.atomic():
        # The draft's lock first, the order of intent_undo and draft_reopen.
        lock_draft_of_intent(tenant, intent_id)
        intent = lock_intent(tenant, intent_id)
        require_decider(tenant, actor, intent.mailbox)
        if intent.state != SendIntent.State.QUEUED or not intent.held_reason:
            raise errors.IntentError("not_held", _("This send is not on hold."))
        seen = _require_customer_messages_seen(tenant, intent, messages_seen)
        SendIntent.objects.filter(pk=intent.pk, state=SendIntent.State.QUEUED).update(
            # Released inside its undo window, it still waits for the window's end.
            held_reason="",
            next_attempt_at=Greatest(Now(), F("hold_until")),
            updated_at=Now(),
        )
        journal(
            tenant=tenant,
            draft=intent.draft_id,
            intent=intent,
            action="intent.released",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=SendIntent.State.QUEUED,
            to_state=SendIntent.State.QUEUED,
            reason=intent.held_reason,
            data={"messages_seen": seen},
        )
        intent_pk = intent.pk
        transaction.on_commit(lambda: enqueue_execution(intent_pk))
    intent.refresh_from_db()
    return intent


def _require_customer_messages_seen(
    tenant, intent: SendIntent, seen: Collection[int] | None
) -> list[int]:
    """The ids of the customer's messages written in the thread after the send's draft; refuses
    when one is not in ``seen``. Under the send's lock: the webhook applier locks the thread's
    queued sends before it looks for sends to hold, so a message stored at the same moment is
    either seen here or finds this send released and holds it again."""
    draft = intent.draft
    if draft is None:
        return []  # a broadcast's send answers no thread
    newer = customer_messages_after_draft(tenant=tenant, draft=draft)
    unread = [pk for pk in newer if seen is None or pk not in seen]
    if not unread:
        return newer
    if seen is None:
        message = _(
            "The customer wrote again after this reply was written: open the send, read the "
            "new message and release it there if the reply still fits."
        )
    else:
        message = ngettext(
            "The customer wrote again since this page was loaded: read the new message below, "
            "then release again if the reply still fits.",
            "The customer wrote again since this page was loaded: read the %(count)d new "
            "messages below, then release again if the reply still fits.",
            len(unread),
        ) % {"count": len(unread)}
    raise errors.CustomerWroteAgain(message=message)


def apply_deferred_events(messages: list[tuple[int, str]]) -> None:
    """Announce these (tenant id, provider message id) pairs as recorded, so that webhook events
    that beat our commit are applied (call after that commit; webhooks receives the signal)."""
    try:
        message_ids_recorded.send(sender=SendIntent, messages=messages)
    except Exception:
        # The sweep replays stored-but-unapplied events, so a failure here is not lost.
        log.exception("intents.intent.deferred_events_failed", extra={"count": len(messages)})


@dataclass(frozen=True)
class Holds:
    """What ``intents_hold_stale`` did: the sends it held, and those that left ``queued`` before
    it could (id, refusal code)."""

    held: list[int]
    skipped: list[tuple[int, str]]


def intents_hold_stale(
    *, mailbox, thread_id: str, message_id: str, written_at, reason: str, recorded_at=None
) -> Holds:
    """A reply approved before the customer wrote again may no longer fit: hold it for a person.

    Only messages written after the draft count (the agent had the earlier ones), or recorded
    after it (``recorded_at``, the database's clock: a message delivered to us late was seen by
    no one), and never the message the draft answers (``message_id``; empty for another message
    under an id already recorded, which a draft answering that id no longer names alone). Each
    send is held by ``intent_hold`` (its own transition). The mailbox names the tenant: the
    caller found it in the tenant of a verified event.
    """
    newer_than = max(written_at, recorded_at) if recorded_at is not None else written_at
    if not thread_id:
        return Holds([], [])
    held: list[int] = []
    skipped: list[tuple[int, str]] = []
    # In the caller's transaction (the one that stores the message), or in one of its own.
    with transaction.atomic():
        intents_lock_threads([(mailbox.pk, thread_id)])
        stale = (
            SendIntent.objects.filter(
                tenant_id=mailbox.tenant_id,
                mailbox=mailbox,
                state=SendIntent.State.QUEUED,
                held_reason="",
                draft__created_at__lt=newer_than,
            )
            .filter(Q(draft__thread_id=thread_id) | Q(provider_thread_id=thread_id))
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if message_id:
            stale = stale.exclude(draft__in_reply_to=message_id)
        for intent_id in list(stale):
            try:
                intent_hold(tenant=mailbox.tenant, intent_id=intent_id, reason=reason)
            except errors.DraftError as exc:
                # It left `queued` meanwhile (claimed, cancelled): nothing to hold any more.
                skipped.append((intent_id, exc.code))
                continue
            held.append(intent_id)
    return Holds(held, skipped)


def intents_lock_threads(threads: Iterable[tuple[int, str]]) -> None:
    """Lock, until the caller's commit, the pending drafts of these (mailbox id, thread id)
    threads, then their queued sends (held or not), each in id order: what
    ``intents_hold_stale`` locks for its thread, for every thread a webhook batch's received
    messages name, taken before the batch applies the first of them.

    Why all at once: a batch applying its messages one by one locked each thread's rows in the
    order its messages came. A change that stops sends locks the sends in id order
    (``intents.sending.stops``), and another batch locked the threads in its own messages' order:
    the batch held the first thread's reply and waited for the second's while the other held the
    second's and waited for the first's, and PostgreSQL cancelled one of them. Drafts before
    sends, each in id order, is the order every other locker of both takes them in.

    The pending drafts: an approval at this moment either waits for the message's commit and
    then sees it (``draft_approve`` refuses a message its page did not show), or committed first
    and its send is among the queued ones to hold. FOR NO KEY UPDATE conflicts with the
    approval's FOR UPDATE. The queued sends: a release at this moment either waits for the
    message's commit and then sees it (``intent_release`` refuses a message its page did not
    show), or committed first and its send, queued again and unheld, is held anew. Without
    that, a message that came while the send was held added no hold and no release saw it. FOR
    UPDATE, as ``intent_hold`` locks each of them after.
    """
    by_mailbox: dict[int, set[str]] = {}
    for mailbox_id, thread_id in threads:
        if thread_id:
            by_mailbox.setdefault(mailbox_id, set()).add(thread_id)
    if not by_mailbox:
        return
    drafts = Q()
    sends = Q()
    for mailbox_id, thread_ids in by_mailbox.items():
        drafts |= Q(mailbox_id=mailbox_id, thread_id__in=sorted(thread_ids))
        sends |= Q(mailbox_id=mailbox_id) & (
            Q(draft__thread_id__in=sorted(thread_ids))
            | Q(provider_thread_id__in=sorted(thread_ids))
        )
    list(
        Draft.objects.select_for_update(no_key=True)
        .filter(drafts, status=Draft.Status.PENDING)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    list(
        SendIntent.objects.select_for_update(of=("self",))
        .filter(sends, state=SendIntent.State.QUEUED)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
