"""Tenant-scoped reads of the webhooks app, for the review UI, the agent API and the health panel
(and operator reads across tenants, for metrics)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, Exists, Max, OuterRef, Q

from intents.models import SendIntent
from webhooks.models import InboundMessage, RecipientDelivery, WebhookEndpoint, WebhookEvent


@dataclass(frozen=True)
class Unapplied:
    """A tenant's stored but not yet applied events: how many (pending or deferred), and the age
    of the oldest pending one in seconds (database clock; 0 when none is pending)."""

    count: int
    lag_seconds: float


def unapplied_events_by_tenant() -> dict[int, Unapplied]:
    """Unapplied events per tenant id, across all tenants: for operators only (metrics). Reads the
    partial index of pending and deferred events, never the applied history."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tenant_id, count(*), "  # noqa: S608
            "EXTRACT(EPOCH FROM statement_timestamp() - min(received_at) FILTER (WHERE state = %s)) "
            f"FROM {WebhookEvent._meta.db_table} WHERE state IN (%s, %s) GROUP BY tenant_id",
            [WebhookEvent.State.PENDING, WebhookEvent.State.PENDING, WebhookEvent.State.DEFERRED],
        )
        rows = cursor.fetchall()
    return {tenant_id: Unapplied(int(n), max(0.0, float(lag or 0))) for tenant_id, n, lag in rows}


def failed_events_by_tenant() -> dict[int, int]:
    """Events set aside as ``failed`` per tenant id (their apply raised too often; an operator
    retries them), across all tenants: for operators only (metrics). Reads their partial
    index."""
    rows = (
        WebhookEvent.objects.filter(state=WebhookEvent.State.FAILED)
        .values_list("tenant_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    return dict(rows)


def last_received_by_tenant() -> dict[int, float]:
    """When each tenant's receiver last took a delivery from AgentMail (Unix seconds; the
    receiver notes it at most once a minute), for tenants it ever took one for: for operators
    only (metrics). The backfill's findings do not count, so an unreachable receiver shows
    however much the backfill catches up. One aggregate over the endpoints, a row per tenant."""
    rows = (
        WebhookEndpoint.objects.filter(last_event_at__isnull=False)
        .values_list("tenant_id")
        .annotate(last=Max("last_event_at"))
        .order_by()
    )
    return {tenant_id: last.timestamp() for tenant_id, last in rows}


def ledger_rows_estimate() -> int:
    """The planner's estimate of the ledger's size (``pg_class.reltuples``, kept by autovacuum):
    counting the rows would read the whole history on every scrape."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
            [WebhookEvent._meta.db_table],
        )
        row = cursor.fetchone()
    return max(0, int(row[0])) if row else 0


def inbound_for_thread(
    *,
    tenant,
    mailbox,
    thread_id: str,
    limit: int = 20,
    also: Collection[int] = (),
    answering: str = "",
) -> list[InboundMessage]:
    """The customer's messages in a thread of ``mailbox``, newest first (what a reviewer must
    see): the ``limit`` newest, and those of ``also`` (ids) that are older, since an approval asks
    whether its page showed every message ``customer_messages_after`` names, and the one whose
    provider id is ``answering`` (the message a draft answers) wherever it lies: a reply to the
    first of twelve messages was reviewed on a page that showed neither it nor that the reply
    answered an older message than the newest. Of that mailbox only: a draft's thread id is the
    agent's word when the draft answers no message, and must not show a reviewer another
    mailbox's customers."""
    if not thread_id:
        return []
    thread = (
        InboundMessage.objects.filter(tenant=tenant, mailbox=mailbox, thread_id=thread_id)
        .select_related("mailbox")
        .order_by("-received_at", "-id")
    )
    newest = list(thread[:limit])
    missing = set(also) - {m.pk for m in newest}
    answered_missing = bool(answering) and all(m.message_id != answering for m in newest)
    if not missing and not answered_missing:
        return newest
    wanted = Q(pk__in=missing)
    if answered_missing:
        wanted |= Q(message_id=answering)
    older = list(thread.filter(wanted))
    return sorted(newest + older, key=lambda m: (m.received_at, m.pk), reverse=True)


def _newer_than(moment) -> Q:
    """Written (the message's own time) or recorded (ours) after ``moment``: a message written
    earlier but delivered to us late was seen by no one."""
    return Q(received_at__gt=moment) | Q(recorded_at__gt=moment)


def customer_messages_after(
    *, tenant, mailbox, thread_id: str, after, answering: str, limit: int = 100
) -> list[int]:
    """Ids of the customer's messages in a thread of ``mailbox`` written or recorded after
    ``after`` (a draft's creation, the database's clock), the message the draft answers
    excepted, oldest first: those a reply approved without seeing them may no longer fit (the
    rule of ``intents_hold_stale``)."""
    if not thread_id:
        return []
    return list(
        InboundMessage.objects.filter(tenant=tenant, mailbox=mailbox, thread_id=thread_id)
        .filter(_newer_than(after))
        .exclude(message_id=answering)
        .order_by("received_at", "id")
        .values_list("pk", flat=True)[:limit]
    )


def customer_messages_after_draft(*, tenant, draft) -> list[int]:
    """``customer_messages_after`` for ``draft`` (an intents Draft): the messages an approval of
    it, or a release of its held send, asks the page to have shown."""
    return customer_messages_after(
        tenant=tenant,
        mailbox=draft.mailbox_id,
        thread_id=draft.thread_id,
        after=draft.created_at,
        answering=draft.in_reply_to,
    )


def customer_wrote_after_draft() -> Exists:
    """For a query of drafts: whether ``customer_messages_after`` would find a message for the
    draft (its thread, mailbox and creation), so that a queue row says what the approval will
    refuse."""
    return Exists(
        InboundMessage.objects.filter(
            tenant=OuterRef("tenant"), mailbox=OuterRef("mailbox"), thread_id=OuterRef("thread_id")
        )
        .exclude(thread_id="")
        .filter(_newer_than(OuterRef("created_at")))
        .exclude(message_id=OuterRef("in_reply_to"))
    )


def customer_wrote_after_read() -> Exists:
    """For a query of draft sends annotated with ``read_until`` (when a person last read the
    thread for the send, the database's clock): whether a customer's message of the draft's
    thread, the message it answers excepted, was recorded after it. Recorded, not written: a
    message recorded before was on that person's page (the approval and the release refuse one
    that was not), even one whose own time lies ahead of ours (a sender's clock running fast)."""
    return Exists(
        InboundMessage.objects.filter(
            tenant=OuterRef("tenant"),
            mailbox=OuterRef("mailbox"),
            thread_id=OuterRef("draft__thread_id"),
            recorded_at__gt=OuterRef("read_until"),
        )
        .exclude(thread_id="")
        .exclude(message_id=OuterRef("draft__in_reply_to"))
    )


def inbound_message(*, tenant, mailbox, message_id: str) -> InboundMessage | None:
    """The customer's message with this provider id in this mailbox, or None (also for another
    tenant's or another mailbox's message: a reply may only answer mail of its own mailbox)."""
    if not message_id:
        return None
    return InboundMessage.objects.filter(
        tenant=tenant, mailbox=mailbox, message_id=message_id
    ).first()


def inbound_messages(*, tenant, mailbox, message_ids: Collection[str]) -> dict[str, InboundMessage]:
    """The customer's messages with these provider ids in this mailbox, by id, in one query
    (those a draft answers or forwarded files from; a missing one is left out)."""
    wanted = {message_id for message_id in message_ids if message_id}
    if not wanted:
        return {}
    return {
        m.message_id: m
        for m in InboundMessage.objects.filter(
            tenant=tenant, mailbox=mailbox, message_id__in=wanted
        )
    }


def senders_by_thread(*, tenant, threads: Collection[tuple[int, str]]) -> dict[tuple, list[str]]:
    """``thread_senders`` for many threads at once, keyed by (mailbox id, thread id), in one
    query whatever their number (a queue page's rows)."""
    threads = {(mailbox, thread) for mailbox, thread in threads if thread}
    if not threads:
        return {}
    rows = (
        InboundMessage.objects.filter(
            tenant=tenant,
            mailbox_id__in={mailbox for mailbox, _ in threads},
            thread_id__in={thread for _, thread in threads},
        )
        .values_list("mailbox_id", "thread_id", "sender")
        .distinct()
    )
    found: dict[tuple, set[str]] = {}
    for mailbox, thread, sender in rows:
        if (mailbox, thread) in threads:
            found.setdefault((mailbox, thread), set()).add(sender.lower())
    return {key: sorted(senders) for key, senders in found.items()}


def senders_of_messages(*, tenant, messages: Collection[tuple[int, str]]) -> dict[tuple, str]:
    """The sender (as recorded) of each of these customer messages, keyed by (mailbox id,
    provider message id), in one query: the authors of the messages a queue page's drafts
    answer."""
    messages = {(mailbox, message_id) for mailbox, message_id in messages if message_id}
    if not messages:
        return {}
    rows = InboundMessage.objects.filter(
        tenant=tenant,
        mailbox_id__in={mailbox for mailbox, _ in messages},
        message_id__in={message_id for _, message_id in messages},
    ).values_list("mailbox_id", "message_id", "sender")
    return {(m, i): sender for m, i, sender in rows if (m, i) in messages}


def thread_senders(*, tenant, mailbox, thread_id: str) -> list[str]:
    """The senders of every customer message in a thread of ``mailbox``, lower-cased, each once
    (none for no thread): who a reply in it may go to without a reviewer's look."""
    if not thread_id:
        return []
    senders = (
        InboundMessage.objects.filter(tenant=tenant, mailbox=mailbox, thread_id=thread_id)
        .values_list("sender", flat=True)
        .distinct()
    )
    return sorted({sender.lower() for sender in senders})


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
