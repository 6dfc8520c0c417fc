"""Events that arrived before their mailbox recorded its inbox, applied once it does.

AgentMail makes an inbox, answers, and only then does provisioning record its id on the
mailbox (``mailboxes.provisioning.mailbox_provision``); when that answer is lost, the mailbox
stays without it until provisioning runs again, and the recovery of a deleted inbox
(``mailboxes.recovery``) leaves the mailbox without one from the moment it forgets the old
inbox. AgentMail may announce a customer's message to the new inbox in that window: its event
is stored and rejected ("not a mailbox of this tenant"). The backfill finds the message later,
but from AgentMail's listing, which has no Reply-To: the customer's message was recorded
without where they asked replies to go. Deferred delivery events are applied when
a send records their message id; these, when the mailbox records their inbox, and by the sweep
(``events_apply_rejected_due``) when the signal's pass could not see them.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Q, Subquery
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


# The sweep's pass over rejected events takes at most this many mailboxes a run; the rest wait
# for the next run (a minute).
SWEEP_MAILBOXES = 100


def events_apply_rejected_due(*, limit: int = SWEEP_MAILBOXES) -> int:
    """The sweep's fallback for ``events_apply_rejected``: an applier that looked the mailbox up
    just before provisioning committed its inbox, and committed its rejection just after the
    re-apply of ``mailbox_provisioned`` had looked for rejected events (it saw the event still
    pending), left an event no signal would look at again. Each run re-applies, through
    ``events_apply_rejected`` (the same bounds, apply and audit row), the rejected events whose
    inbox a mailbox of their tenant has recorded since, for the mailboxes that have any. An
    applied event is no longer rejected: running it again does nothing. Returns how many events
    were applied."""
    max_age = timedelta(hours=float(settings.WEBHOOK_BACKFILL_MAX_AGE_HOURS))
    # events_apply_rejected's bound, per mailbox: received since it was made or last forgot a
    # lost inbox. An older rejection of the address stays out of every run, not only of its apply.
    owner = (
        Mailbox.objects.filter(
            tenant_id=OuterRef("tenant_id"), inbox_id__iexact=OuterRef("inbox_id")
        )
        .exclude(inbox_id="")
        .filter(
            Q(inbox_lost_at__isnull=True, created_at__lte=OuterRef("received_at"))
            | Q(inbox_lost_at__lte=OuterRef("received_at"))
        )
        .order_by("id")
        .values("pk")[:1]
    )
    mailbox_ids = list(
        WebhookEvent.objects.filter(
            state=State.REJECTED,
            outcome=NOT_A_MAILBOX,
            received_at__gte=Now() - max_age,
            payload__isnull=False,
        )
        .annotate(owner_id=Subquery(owner))
        .exclude(owner_id=None)
        .values_list("owner_id", flat=True)
        .distinct()[:limit]
    )
    return sum(
        len(events_apply_rejected(mailbox=mailbox))
        for mailbox in Mailbox.objects.filter(pk__in=mailbox_ids).order_by("pk")
    )
