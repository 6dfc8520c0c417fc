"""What becomes of a mailbox's sends when its inbox, gone at AgentMail, is made again
(``mailboxes.recovery``, through ``mailboxes.signals.mailbox_inbox_lost``).

- ``queued``: kept. AgentMail refused their key before processing anything (the worker held
  them: ``record.hold_for_refused_key``), so none went out; each is sent from the new inbox once,
  with its own idempotency key.
- ``uncertain``: handed to a person (``needs_attention``). Its first call may have sent from the
  old inbox, and what could tell (a replay answered from AgentMail's record of the key, a
  lookup of the inbox's messages by label) went with that inbox, or may have: whether AgentMail
  keeps a deleted inbox's idempotency keys is unknown, and a replay it no longer recognises
  would send the reply a second time from the new inbox.
- ``sending``: a call is on its way; the recovery refuses until it is recorded (the worker's
  lease ends it within ``SEND_LEASE_SECONDS`` if the worker died).
"""

from __future__ import annotations

from django.db.models.functions import Now

from intents.journal import journal
from intents.models import IntentEvent, SendIntent

State = SendIntent.State

INBOX_LOST_CODE = "inbox_lost"
INBOX_LOST_REASON = (
    "Outcome unknown: the mailbox's inbox was deleted at AgentMail, with the messages that could "
    "show whether this send went out, and is being made again; a person must decide."
)


def intents_end_with_lost_inbox(*, tenant_id: int, mailbox_id: int, actor=None) -> dict:
    """Inside the caller's transaction, before it locks the mailbox: lock the mailbox's sending
    and uncertain sends (id order, as every locker of intents), and, unless one is sending, move
    the uncertain ones to ``needs_attention`` with a journal row each. Returns
    ``{"sending": n, "needs_attention": [ids]}``."""
    locked = list(
        SendIntent.objects.select_for_update()
        .filter(
            tenant_id=tenant_id,
            mailbox_id=mailbox_id,
            state__in=[State.SENDING, State.UNCERTAIN],
        )
        .order_by("pk")
        .only("pk", "state", "draft_id", "tenant_id")
    )
    sending = sum(1 for intent in locked if intent.state == State.SENDING)
    if sending:
        return {"sending": sending, "needs_attention": []}
    moved = []
    for intent in locked:
        changed = SendIntent.objects.filter(pk=intent.pk, state=State.UNCERTAIN).update(
            state=State.NEEDS_ATTENTION,
            last_error_code=INBOX_LOST_CODE,
            last_error_detail=INBOX_LOST_REASON,
            updated_at=Now(),
        )
        if changed:
            journal(
                tenant=tenant_id,
                intent=intent.pk,
                draft=intent.draft_id,
                action="intent.needs_attention",
                actor_kind=IntentEvent.Actor.PERSON if actor else IntentEvent.Actor.SWEEP,
                actor_user=actor,
                actor_label="" if actor else "agentmail_recover",
                from_state=State.UNCERTAIN,
                to_state=State.NEEDS_ATTENTION,
                reason=INBOX_LOST_REASON,
                data={"code": INBOX_LOST_CODE, "mailbox_id": mailbox_id},
            )
            moved.append(intent.pk)
    return {"sending": 0, "needs_attention": moved}


def on_mailbox_inbox_lost(sender, **scope) -> dict:
    """The receiver of ``mailboxes.signals.mailbox_inbox_lost``."""
    return intents_end_with_lost_inbox(
        tenant_id=scope["tenant_id"], mailbox_id=scope["mailbox_id"], actor=scope.get("actor")
    )
