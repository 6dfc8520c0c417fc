"""Tenant-scoped reads of the webhooks app, for the review UI, the agent API and the health panel."""

from __future__ import annotations

from intents.models import SendIntent
from webhooks.models import InboundMessage, RecipientDelivery


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


def approved_addresses(recipients: dict | None) -> list[str]:
    """The approved recipients (to, cc, bcc), lower-cased, each once, in that order: whom delivery
    is tracked for (the apply step uses the same list)."""
    recipients = recipients or {}
    seen: dict[str, None] = {}
    for key in ("to", "cc", "bcc"):
        for address in recipients.get(key) or []:
            seen.setdefault(str(address).strip().lower(), None)
    return list(seen)


def delivery_summary(*, intent: SendIntent) -> list[RecipientDelivery]:
    """One row per approved recipient, in approval order (to, cc, bcc). A recipient without any
    event yet is an unsaved ``RecipientDelivery`` with ``state == ""``."""
    rows = {
        row.address: row
        for row in RecipientDelivery.objects.filter(tenant_id=intent.tenant_id, intent=intent)
    }
    summary = [
        (rows.pop(address) if address in rows else None)
        or RecipientDelivery(tenant_id=intent.tenant_id, intent=intent, address=address, state="")
        for address in approved_addresses(intent.recipients)
    ]
    return summary + sorted(rows.values(), key=lambda row: row.address)
