"""Retention of the webhook ledger: payloads and inbound previews go, the rows stay."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Value
from django.db.models.functions import Now

from webhooks.models import InboundMessage, WebhookEvent
from webhooks.services.apply import UNAPPLIED

# The name of the module this came from: log routing and filters keep working.
log = logging.getLogger("webhooks.services")

State = WebhookEvent.State


def events_purge_payloads() -> int:
    """Drop payloads (and inbound previews) older than each tenant's retention period.

    The ledger row itself stays: it is tiny, and its svix-id must outlive every redelivery.
    Events still waiting to be applied are closed as ignored, since nothing could apply them.
    """
    cutoff = ExpressionWrapper(
        Now() - F("tenant__retention_days") * Value(timedelta(days=1)),
        output_field=DateTimeField(),
    )
    with transaction.atomic():
        old = WebhookEvent.objects.filter(payload__isnull=False, received_at__lt=cutoff)
        old.filter(state__in=UNAPPLIED).update(
            state=State.IGNORED,
            outcome="payload purged after the retention period before it could be applied",
            applied_at=Now(),
        )
        purged = old.update(payload=None)
        InboundMessage.objects.filter(received_at__lt=cutoff).exclude(preview="").update(preview="")
    if purged:
        log.info("webhooks.event.payloads_purged", extra={"count": purged})
    return purged
