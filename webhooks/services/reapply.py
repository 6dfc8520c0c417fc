"""Events that arrived before their mailbox recorded its inbox, applied once it does.

AgentMail makes an inbox, answers, and only then does provisioning record its id on the
mailbox (``mailboxes.provisioning.mailbox_provision``); when that answer is lost, the mailbox
stays without it until provisioning runs again, and the recovery of a deleted inbox
(``mailboxes.recovery``) leaves the mailbox without one from the moment it forgets the old
inbox. AgentMail may announce a customer's message to the new inbox in that window: its event
is stored and rejected ("not a mailbox of this tenant"). The backfill finds the message later,
but from AgentMail's listing, which has no Reply-To: the customer's message was recorded
without where they asked replies to go. Deferred delivery events are applied when
a send records their message id; these, when the mailbox records their inbox.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now

from mailboxes.models import Mailbox
from mailboxes.provisioning import audit
from webhooks.models import WebhookEvent
from webhooks.normalize import normalize
from webhooks.services.apply import NOT_A_MAILBOX, _apply_guarded

log = logging.getLogger("webhooks.services")

State = WebhookEvent.State


def events_apply_rejected(*, mailbox: Mailbox, actor=None) -> list[int]:
    """Apply the tenant's events of ``mailbox``'s inbox that were rejected because no mailbox
    had it: only those received since the mailbox was made or last forgot a lost inbox (before
    that, the mailbox had no inbox at that address to be news of, or had it and would have
    taken them), and within ``WEBHOOK_BACKFILL_MAX_AGE_HOURS``, the backfill's own reach. Each
    goes through the ordinary apply (delivery state only moves forward, a message is recorded
    once); the tenant's audit log names them. Returns the ids of those applied."""
    mailbox = Mailbox.objects.get(pk=mailbox.pk)
    if not mailbox.inbox_id:
        return []
    since = mailbox.inbox_lost_at or mailbox.created_at
    max_age = timedelta(hours=float(settings.WEBHOOK_BACKFILL_MAX_AGE_HOURS))
    with transaction.atomic():
        events = list(
            WebhookEvent.objects.select_for_update(skip_locked=True)
            .filter(
                tenant_id=mailbox.tenant_id,
                inbox_id__iexact=mailbox.inbox_id,
                state=State.REJECTED,
                outcome=NOT_A_MAILBOX,
                received_at__gte=since,
            )
            .filter(received_at__gte=Now() - max_age)
            .order_by("received_at", "id")
        )
        applied = [
            event.pk
            for event in events
            if event.payload is not None
            and _apply_guarded(event, normalize(event.payload)) == State.APPLIED
        ]
        if applied:
            audit(
                tenant=mailbox.tenant,
                actor=actor,
                action="webhook.events_reapplied",
                obj=mailbox,
                data={"inbox_id": mailbox.inbox_id, "webhook_event_ids": applied},
            )
    if applied:
        log.info(
            "webhooks.event.rejected_applied",
            extra={"tenant_id": mailbox.tenant_id, "mailbox_id": mailbox.pk, "count": len(applied)},
        )
    return applied
