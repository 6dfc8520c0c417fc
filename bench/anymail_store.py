"""Bench-only: django-anymail as a team really runs it, with a `tracking` receiver that stores
each event (an additional row; the issue's anymail row keeps no receiver).

anymail stores nothing itself; its docs have the project connect a receiver to the `tracking`
signal. This one is model-free, like bench/views_floor.py: one INSERT per event through
`connection.cursor()` (autocommit) into a scratch table, UNIQUE on event_id (anymail takes it
from the `svix-id` header), so a redelivered event is stored once.

The receiver is connected for `StoringResendTrackingView` only: anymail sends the signal with
`sender=self.__class__`, so the stock view at /anymail/resend/tracking/ still has no receiver.
"""

from __future__ import annotations

import json

from anymail.signals import tracking
from anymail.webhooks.resend import ResendTrackingWebhookView
from django.db import connection

TABLE = "bench_anymail_event"
CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, event_id text NOT NULL UNIQUE, "
    "event_type text NOT NULL, recipient text, timestamp timestamptz, raw jsonb NOT NULL)"
)


class StoringResendTrackingView(ResendTrackingWebhookView):
    """anymail's Resend tracking view, unchanged; a distinct class only to own the receiver."""


def store_event(sender, event, esp_name, **kwargs) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (event_id, event_type, recipient, timestamp, raw) "  # noqa: S608
            "VALUES (%s, %s, %s, %s, %s::jsonb) ON CONFLICT (event_id) DO NOTHING",
            [
                event.event_id,
                event.event_type,
                event.recipient,
                event.timestamp,
                json.dumps(event.esp_event),
            ],
        )


tracking.connect(store_event, sender=StoringResendTrackingView, dispatch_uid="bench.anymail_store")
