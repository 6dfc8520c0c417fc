"""Retention of the webhook ledger: payloads and inbound previews go, the rows stay."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import DateTimeField, Exists, ExpressionWrapper, F, OuterRef, Q, Value
from django.db.models.functions import Now

from intents.models import Draft, SendIntent
from intents.retention import OPEN_INTENT_STATES
from webhooks.models import InboundMessage, WebhookEvent
from webhooks.services.apply import UNAPPLIED

# The name of the module this came from: log routing and filters keep working.
log = logging.getLogger("webhooks.services")

State = WebhookEvent.State

# A send in these states may have gone out without our knowing its message id: an event waiting
# for a message id in its inbox may be the one that tells its delivery, bounce or complaint.
_UNRESOLVED_SENDS = (
    SendIntent.State.SENDING,
    SendIntent.State.UNCERTAIN,
    SendIntent.State.NEEDS_ATTENTION,
)


def events_purge_payloads() -> int:
    """Drop payloads (and inbound previews) older than each tenant's retention period.

    The ledger row itself stays: it is tiny, and its svix-id must outlive every redelivery.
    Events still waiting to be applied, or failed (an operator's retry would find no payload),
    are closed as ignored, since nothing could apply them;
    except an event deferred for its message id in an inbox with a send still unresolved: that
    send may be the message (it is recorded when a reconciliation or a person finds it), and a
    bounce or complaint closed unapplied would never suppress the address. It keeps its payload
    until no such send is left. An inbound message in a thread a pending draft of its mailbox
    answers, or a draft whose send is still open, keeps its preview too: the reviewer reads it
    to decide (the review deadline ends the wait; a send's outcome or a person's decision).
    """
    cutoff = ExpressionWrapper(
        Now() - F("tenant__retention_days") * Value(timedelta(days=1)),
        output_field=DateTimeField(),
    )
    with transaction.atomic():
        unresolved = SendIntent.objects.filter(
            tenant=OuterRef("tenant"),
            # The ledger holds the inbox id lower-cased (normalize); the mailbox as AgentMail gave it.
            mailbox__inbox_id__iexact=OuterRef("inbox_id"),
            state__in=_UNRESOLVED_SENDS,
        )
        old = WebhookEvent.objects.filter(payload__isnull=False, received_at__lt=cutoff).exclude(
            Exists(unresolved.filter(provider_message_id="")), state=State.DEFERRED
        )
        # A failed event too: its retry could only find no payload, and it would stay failed.
        old.filter(state__in=(*UNAPPLIED, State.FAILED)).update(
            state=State.IGNORED,
            outcome="payload purged after the retention period before it could be applied",
            applied_at=Now(),
        )
        purged = old.update(payload=None)
        # A send still open decides on the thread too: a held one is released only once a
        # person has read what the customer wrote after the approval.
        open_send = SendIntent.objects.filter(draft=OuterRef("pk"), state__in=OPEN_INTENT_STATES)
        in_review = (
            Draft.objects.filter(mailbox=OuterRef("mailbox"))
            .filter(Q(status=Draft.Status.PENDING) | Exists(open_send))
            .filter(
                Q(in_reply_to=OuterRef("message_id"))
                | (~Q(thread_id="") & Q(thread_id=OuterRef("thread_id")))
            )
        )
        InboundMessage.objects.filter(received_at__lt=cutoff).exclude(preview="").exclude(
            Exists(in_review)
        ).update(preview="")
    if purged:
        log.info("webhooks.event.payloads_purged", extra={"count": purged})
    return purged
