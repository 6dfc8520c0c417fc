"""Tenant-scoped reads of the webhooks app, for the review UI and the health panel."""

from __future__ import annotations

from webhooks.models import InboundMessage


def inbound_for_thread(*, tenant, thread_id: str, limit: int = 20) -> list[InboundMessage]:
    """The customer's messages in a thread, newest first (what a reviewer must see)."""
    if not thread_id:
        return []
    return list(
        InboundMessage.objects.filter(tenant=tenant, thread_id=thread_id)
        .select_related("mailbox")
        .order_by("-received_at", "-id")[:limit]
    )


def inbound_message(*, tenant, mailbox, message_id: str) -> InboundMessage | None:
    """The customer's message with this provider id in this mailbox, or None (also for another
    tenant's or another mailbox's message: a reply may only answer mail of its own mailbox)."""
    if not message_id:
        return None
    return InboundMessage.objects.filter(
        tenant=tenant, mailbox=mailbox, message_id=message_id
    ).first()
