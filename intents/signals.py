"""Signals intents sends to the apps above it, which connect in their AppConfig.ready.

intents never imports webhooks' services: webhooks sits on intents (it changes intents only
through intents' services), so work of webhooks that intents must trigger goes through here.
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent after the commit that recorded provider message ids, with ``messages``: a list of
# (tenant id, provider message id). Webhook events for those ids that beat the commit are waiting
# (DESIGN.md, Webhooks); webhooks applies them. Receivers may raise: the sender logs it, and the
# sweep replays what was missed.
message_ids_recorded = Signal()
