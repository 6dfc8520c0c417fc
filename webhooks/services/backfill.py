"""Backfill: ask AgentMail for what webhooks should have told us, and apply it the same way.

Two questions per mailbox with an inbox and a key, active or disabled (a disabled mailbox still
receives mail), of every tenant, suspended ones too (their webhooks are applied), with the
mailbox's own inbox-scoped key:

- deliveries: an accepted send older than ``WEBHOOK_BACKFILL_AFTER_SECONDS`` with no recipient
  delivered yet (and no event of it waiting to be applied) is looked up
  (``lookups.get_message``); a ``delivered`` or ``rejected`` label becomes an event;
- inbound mail: the inbox's messages since its last complete listing reached
  (``InboundBackfillMark``; ``lookups.list_messages_since``) that carry ``received`` and that we
  have not recorded become ``message.received`` events, recorded in the inbox asked about.

What is found is stored in the ledger as an event of the tenant's endpoint, with a svix-id of its
own (``backfill:<kind>:<digest of the message id>``, and of the inbox for a received message, so
a second run stores nothing new), and goes
through the batch applier like any webhook: delivery state only moves forward, an inbound message
is recorded once, and a real webhook arriving later changes nothing. The journal row of an applied
backfill says so (actor ``sweep``, ``data.source = "backfill"``).

Bounds: at most ``WEBHOOK_BACKFILL_CALLS_PER_KEY`` provider calls per key and run, spaced by
``1 / WEBHOOK_BACKFILL_CALLS_PER_SECOND`` on the same key (rate limits are per key), at most
``WEBHOOK_BACKFILL_MAX_CALLS`` per run, calls begun only while they can end inside the task's
time limit (``backfill_bounds.run_window``), mailboxes turned to longest ago first
(``InboundBackfillMark.turn_at``), none whose key AgentMail refused, and a mailbox's questions end
at the first refusal of its key or the first 429 (its sends share the key's rate limit), and one
run at a time per tenant: a run that finds another asking about a tenant (the schedule's and an operator's command at once) skips it
(``backfill_lease``), or the key got the budget twice. No provider call is made inside a transaction. An answer that cannot be right is refused, logged
with its reason, and changes nothing: a page with more messages than asked (``page_oversized``), a
next page token already followed (``page_token_repeated``), a message larger than a webhook could
carry (``message_oversized``).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from itertools import groupby
from operator import attrgetter

from django.conf import settings
from django.db import DataError, transaction
from django.db.models import Exists, F, OuterRef, Subquery, Window
from django.db.models.functions import Now, RowNumber
from django.utils import timezone

from intents.models import SendIntent
from mailboxes.models import Mailbox
from mailboxes.provider import lookups, refuses_key
from webhooks.models import (
    InboundBackfillMark,
    InboundMessage,
    RecipientDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from webhooks.normalize import bounded_id, normalize, parsed_timestamp, storable
from webhooks.services.applier import applier_wake
from webhooks.services.apply import UNAPPLIED, backfill_svix_id
from webhooks.services.backfill_bounds import BackfillReport, Budget
from webhooks.services.backfill_lease import backfill_tenant_held
from webhooks.services.receive import event_store

log = logging.getLogger("webhooks.backfill")

# A sent message's labels that say what its delivery webhook would have said, and the event it
# stands for. Bounces and complaints name recipients the label does not: those wait for their
# webhook (or a person), rather than suppress every recipient of the message.
_DELIVERY_LABELS = {"delivered": "message.delivered", "rejected": "message.rejected"}
_EVENT_KEYS = {"message.delivered": "delivery", "message.rejected": "reject"}
_DELIVERED_OR_LATER = [s for s, rank in RecipientDelivery.RANK.items() if rank >= 2]


def webhooks_backfill(*, tenant_id: int | None = None) -> BackfillReport:
    """One backfill run over every mailbox with an inbox and a key, active or disabled, of
    every tenant, active or suspended (or of one tenant)."""
    report = BackfillReport()
    budget = Budget(int(settings.WEBHOOK_BACKFILL_MAX_CALLS))
    # Disabled ones too: disabling stops a mailbox's sends, not its mail. AgentMail still
    # receives it and its webhooks are applied; with them lost (the receiver down), a customer's
    # message to a mailbox disabled longer than WEBHOOK_BACKFILL_MAX_AGE_HOURS was recorded by
    # nothing. A disabled mailbox keeps its key (and gets a new one with a recovered inbox or
    # pod); one whose inbox is being made again has neither inbox nor key yet. A key AgentMail
    # refused is not used again until an admin shows it works, as for sends.
    # Suspended tenants too: a suspension makes the tenant read-only for its people and stops
    # its sends, not its mail. Their webhooks are stored and applied (README, "A suspended tenant
    # is read-only"); with them lost during a suspension, a customer's message or the delivery
    # of a send accepted before it was recorded by nothing, and once the suspension had lasted
    # longer than WEBHOOK_BACKFILL_MAX_AGE_HOURS, by nothing ever. The backfill only reads.
    mailboxes = (
        Mailbox.objects.filter(
            status__in=[Mailbox.Status.ACTIVE, Mailbox.Status.DISABLED],
            key_refused_at__isnull=True,
        )
        .exclude(inbox_id="")
        .exclude(api_key_sealed="")
    )
    if tenant_id is not None:
        mailboxes = mailboxes.filter(tenant_id=tenant_id)
    turn = InboundBackfillMark.objects.filter(mailbox=OuterRef("pk")).values("turn_at")
    ordered = (
        mailboxes.select_related("tenant")
        .annotate(backfill_turn_at=Subquery(turn))
        .order_by(F("backfill_turn_at").asc(nulls_first=True), "tenant_id", "id")
    )
    for tenant_pk, group in groupby(ordered, key=attrgetter("tenant_id")):
        endpoint = (
            WebhookEndpoint.objects.filter(tenant_id=tenant_pk)
            .exclude(status=WebhookEndpoint.Status.DISABLED)
            .order_by("id")
            .first()
        )
        if endpoint is None:
            continue
        with backfill_tenant_held(tenant_pk) as held:
            if not held:
                report.skipped_tenants.append(tenant_pk)
                log.info("webhooks.backfill.tenant_held", extra={"tenant_id": tenant_pk})
                continue
            _backfill_tenant(tenant_pk, list(group), endpoint, budget, report)
    if report.deliveries or report.inbound:
        applier_wake(force=True)
    log.info(
        "webhooks.backfill.done",
        extra={
            "mailboxes": report.mailboxes,
            "calls": report.calls,
            "deliveries": report.deliveries,
            "inbound": report.inbound,
            "errors": report.errors,
            "limited": len(report.limited),
            "skipped_tenants": len(report.skipped_tenants),
        },
    )
    return report


def _backfill_tenant(
    tenant_pk: int, boxes: list, endpoint, budget: Budget, report: BackfillReport
) -> None:
    unconfirmed = _unconfirmed_sends(tenant_pk, [m.pk for m in boxes])
    for mailbox in boxes:
        try:
            _backfill_mailbox(mailbox, endpoint, unconfirmed.get(mailbox.pk, []), budget, report)
        except Exception:
            # One mailbox's failure (a message the ledger cannot hold, a provider answer we
            # cannot read) must not keep the others, and the tenants after it, from their run.
            report.errors += 1
            log.exception(
                "webhooks.backfill.mailbox_failed",
                extra={"tenant_id": tenant_pk, "mailbox_id": mailbox.pk},
            )


def _backfill_mailbox(
    mailbox, endpoint, candidates: list, budget: Budget, report: BackfillReport
) -> None:
    """Both questions for one mailbox, within its key's budget; one not reached keeps its turn."""
    report.mailboxes += 1
    if budget.run_over():
        report.limited.append(mailbox.pk)
        return
    InboundBackfillMark.objects.update_or_create(
        mailbox=mailbox,
        defaults={"turn_at": Now()},
        # What a missing mark means (_listing_start): listed from the mailbox's creation.
        create_defaults={"covered_until": mailbox.created_at, "turn_at": Now()},
    )
    budget.for_key()
    before = budget.run_left
    try:
        complete = _deliveries(mailbox, endpoint, candidates, budget, report) and _inbound(
            mailbox, endpoint, budget, report
        )
    finally:  # a mailbox that failed made its calls too
        report.calls += before - budget.run_left
    if not complete:
        report.limited.append(mailbox.pk)


def _after() -> timedelta:
    return timedelta(seconds=float(settings.WEBHOOK_BACKFILL_AFTER_SECONDS))


def _unconfirmed_sends(tenant_id: int, mailbox_ids: list[int]) -> dict[int, list]:
    """Per mailbox, its oldest accepted sends with no recipient delivered yet and no event of
    theirs waiting to be applied: one query for the tenant, not one per mailbox (each would read
    the tenant's whole window of accepted sends), at most one more per mailbox than a key may
    look up in a run (the extra one tells a run cut short)."""
    delivered = RecipientDelivery.objects.filter(
        intent_id=OuterRef("pk"), state__in=_DELIVERED_OR_LATER
    )
    waiting = WebhookEvent.objects.filter(
        tenant_id=OuterRef("tenant_id"),
        message_id=OuterRef("provider_message_id"),
        state__in=UNAPPLIED,
    )
    max_age = timedelta(hours=float(settings.WEBHOOK_BACKFILL_MAX_AGE_HOURS))
    rows = (
        SendIntent.objects.filter(
            tenant_id=tenant_id,
            mailbox_id__in=mailbox_ids,
            state=SendIntent.State.ACCEPTED,
            updated_at__lte=Now() - _after(),
            updated_at__gte=Now() - max_age,
        )
        .exclude(provider_message_id="")
        .exclude(Exists(delivered))
        .exclude(Exists(waiting))
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("mailbox_id")],
                order_by=[F("updated_at").asc(), F("id").asc()],
            )
        )
        .filter(rank__lte=int(settings.WEBHOOK_BACKFILL_CALLS_PER_KEY) + 1)
        .order_by("mailbox_id", "rank")
        .values_list("mailbox_id", "provider_message_id", "recipients")
    )
    found: dict[int, list] = {}
    for mailbox_id, message_id, recipients in rows:
        found.setdefault(mailbox_id, []).append((message_id, recipients))
    return found


def _deliveries(
    mailbox, endpoint, candidates: list, budget: Budget, report: BackfillReport
) -> bool:
    """Look up the mailbox's accepted sends with no delivery yet; False if the budget ran out."""
    if not candidates:
        return True
    api_key = mailbox.api_key()
    for message_id, recipients in candidates:
        if not budget.take():
            return False
        found = lookups.get_message(
            api_key=api_key, inbox_id=mailbox.inbox_id, message_id=message_id
        )
        if not found.ok:
            _provider_failed(mailbox, "a delivery lookup", found, report)
            if refuses_key(found.http_status, found.error_code):
                # Every other call with this key would be refused alike. Not marked refused:
                # a key may be denied reading and still send (mailboxes.key_health marks sends').
                log.warning("webhooks.backfill.key_refused", extra={"mailbox_id": mailbox.pk})
                return True
            if _rate_limited(mailbox, found):
                return False
            continue
        for message in found.messages:
            if _oversized(mailbox, message, report) or _another(
                mailbox, message, message_id, report
            ):
                continue
            labels = {str(label).lower() for label in message.get("labels") or []}
            for label, event_type in _DELIVERY_LABELS.items():
                if label in labels:
                    everyone = recipients.get("to", []) + recipients.get("cc", [])
                    everyone += recipients.get("bcc", [])
                    payload = _delivery_payload(event_type, mailbox, message, message_id, everyone)
                    if _store(endpoint, payload, event_type, message_id):
                        report.deliveries += 1
    return True


def _inbound(mailbox, endpoint, budget: Budget, report: BackfillReport) -> bool:
    """List the inbox from where the last listing reached; False if the budget ran out. When
    the listing ends, everything up to the backfill delay's horizon is covered; cut short, it
    resumes next time from AgentMail's time of the newest message it got through (oldest first,
    so nothing before it is left): every run gets further."""
    horizon = timezone.now() - _after()
    mark = InboundBackfillMark.objects.filter(mailbox=mailbox).first()
    covered, after = _listing_start(mailbox, mark)
    reached: datetime | None = None
    token: str | None = None
    api_key = mailbox.api_key()
    page_size = int(settings.AGENTMAIL_LOOKUP_PAGE_SIZE)
    followed: set[str] = set()
    while True:
        if not budget.take():
            _resume_at(mailbox, covered, after, reached)
            return False
        page = lookups.list_messages_since(
            api_key=api_key,
            inbox_id=mailbox.inbox_id,
            after=after,
            limit=page_size,
            page_token=token,
        )
        refused = "" if page.ok else page.error_code
        if page.ok and len(page.messages) > page_size:
            refused = "page_oversized"
        if not refused:
            for message in _received(mailbox, page.messages, report):
                _store_received(mailbox, endpoint, message, report)
            reached = _newest_old_enough(page.messages, reached)
            if page.next_page_token in followed:
                refused = "page_token_repeated"
        if refused:
            if page.ok:
                report.errors += 1
                log.warning(
                    f"webhooks.backfill.{refused}",
                    extra={"mailbox_id": mailbox.pk, "messages": len(page.messages)},
                )
            else:
                _provider_failed(mailbox, "the inbox listing", page, report)
            _resume_at(mailbox, covered, after, reached)
            return page.ok or not _rate_limited(mailbox, page)
        if not page.next_page_token:
            InboundBackfillMark.objects.update_or_create(
                mailbox=mailbox, defaults={"covered_until": horizon, "resume_at": None}
            )
            return True
        token = page.next_page_token
        followed.add(token)


# Where a listing resumes before the last message it got through: a millisecond (AgentMail's
# timestamps are to the millisecond), so that whatever its ``after`` means, strictly after or
# from, messages of that same instant beyond the page it ended on are listed again.
RESUME_OVERLAP = timedelta(milliseconds=1)


def _listing_start(mailbox, mark: InboundBackfillMark | None) -> tuple[datetime, datetime]:
    """(what is covered, where the listing starts): the mark less the clock margin, or where a
    listing cut short got to if later; for a first run the mailbox's creation. Never further
    back than ``WEBHOOK_BACKFILL_MAX_AGE_HOURS`` (the run stays bounded)."""
    oldest = timezone.now() - timedelta(hours=float(settings.WEBHOOK_BACKFILL_MAX_AGE_HOURS))
    covered = max(mark.covered_until if mark is not None else mailbox.created_at, oldest)
    after = covered - lookups.LOOKUP_CLOCK_MARGIN
    if mark is not None and mark.resume_at is not None:
        after = max(after, mark.resume_at - RESUME_OVERLAP)
    return covered, after


def _resume_at(mailbox, covered: datetime, after: datetime, reached: datetime | None) -> None:
    """A listing cut short: the next one resumes where this one got to, if it got anywhere."""
    if reached is None or reached <= after:
        return
    InboundBackfillMark.objects.update_or_create(
        mailbox=mailbox, defaults={"covered_until": covered, "resume_at": reached}
    )


def _store_received(mailbox, endpoint, message: dict, report: BackfillReport) -> None:
    """Store one found message; one that can never be stored (what it holds: a value the
    normaliser or a column refuses) is counted and logged, and the listing goes on past it (it
    would fail the same way on every run, and hold back every later one). Any other database
    error ends the mailbox's run before its mark moves: that one may pass, and the message must
    be listed again."""
    if _oversized(mailbox, message, report):
        return
    try:
        stored = _store(
            endpoint,
            _received_payload(mailbox, message),
            "message.received",
            message["message_id"],
            mailbox,
        )
    except (ValueError, TypeError, KeyError, DataError):
        report.errors += 1
        log.exception(
            "webhooks.backfill.message_failed",
            extra={"tenant_id": endpoint.tenant_id, "mailbox_id": mailbox.pk},
        )
        return
    if stored:
        report.inbound += 1


def _received(mailbox, messages: list[dict], report: BackfillReport) -> list[dict]:
    """The page's received messages old enough, of this inbox, not recorded yet."""
    received = []
    for m in messages:
        labels = {str(label).lower() for label in m.get("labels") or []}
        if "received" not in labels or not isinstance(m.get("message_id"), str):
            continue
        if not m["message_id"] or not _old_enough(parsed_timestamp(m.get("timestamp"))):
            continue
        # The inbox asked about, whatever the answer says: a listing that named another inbox
        # (of this tenant or none) would record the message where that inbox's people see it.
        owner = m.get("inbox_id")
        if owner is not None and str(owner).lower() != mailbox.inbox_id.lower():
            report.errors += 1
            log.warning("webhooks.backfill.other_inbox", extra={"mailbox_id": mailbox.pk})
            continue
        received.append(m)
    # Compare the ids as stored: NUL and lone surrogates replaced (normalize.storable; a NUL in
    # the query itself failed the mailbox's run, every run) and cut to what an index holds.
    ids = [bounded_id(storable(m["message_id"])[0]) for m in received]
    recorded = set(
        InboundMessage.objects.filter(mailbox=mailbox, message_id__in=ids).values_list(
            "message_id", flat=True
        )
    )
    return [m for m, stored_id in zip(received, ids, strict=True) if stored_id not in recorded]


def _provider_failed(mailbox, call: str, answer, report: BackfillReport) -> None:
    """A call AgentMail failed (an error status, no answer): counted, logged and said in the
    report with what it answered. It was counted and nothing more, so an operator running the
    command after an outage read 'errors 1' and no log line said which mailbox or why."""
    report.errors += 1
    said = (
        f"AgentMail answered {answer.http_status} {answer.error_code}"
        if answer.http_status
        else f"AgentMail did not answer ({answer.error_code})"
    )
    report.problems.append(f"{mailbox.address} ({mailbox.tenant.slug}): {said} to {call}")
    log.warning(
        "webhooks.backfill.provider_failed",
        extra={
            "tenant_id": mailbox.tenant_id,
            "mailbox_id": mailbox.pk,
            "call": call,
            "http_status": answer.http_status,
            "error_code": answer.error_code,
        },
    )


def _another(mailbox, message: dict, message_id: str, report: BackfillReport) -> bool:
    """A looked-up message that is not the one asked for (another message id, or inbox):
    refused. Its labels say nothing of our send, and a 'rejected' one was stored as our send's
    rejection, which suppressed every one of its recipients."""
    owner = message.get("inbox_id")
    if message.get("message_id") == message_id and (
        owner is None or str(owner).lower() == mailbox.inbox_id.lower()
    ):
        return False
    report.errors += 1
    log.warning("webhooks.backfill.other_message", extra={"mailbox_id": mailbox.pk})
    return True


def _rate_limited(mailbox, answer) -> bool:
    """Whether AgentMail answered 429: the key is over its rate limit, which the mailbox's sends
    share (limits are per key), so the run asks nothing more with it (the next run asks again).
    A run went on to every other unconfirmed send up to the key's budget, and then listed the
    inbox, each call answered 429 again and each one more against the limit the sends were
    waiting out."""
    if answer.http_status != 429:
        return False
    log.warning("webhooks.backfill.key_rate_limited", extra={"mailbox_id": mailbox.pk})
    return True


def _oversized(mailbox, message: dict, report: BackfillReport) -> bool:
    """A listed message larger than the largest webhook body the receiver takes: refused (a
    10 MB subject was stored whole in the ledger, a hundred to a page)."""
    size = len(json.dumps(message, ensure_ascii=False, default=str).encode("utf-8", "replace"))
    if size <= int(settings.WEBHOOK_BODY_MAX_BYTES):
        return False
    report.errors += 1
    log.warning(
        "webhooks.backfill.message_oversized", extra={"mailbox_id": mailbox.pk, "bytes": size}
    )
    return True


def _newest_old_enough(messages: list[dict], reached: datetime | None) -> datetime | None:
    for m in messages:
        at = parsed_timestamp(m.get("timestamp"))
        if at is not None and _old_enough(at) and (reached is None or at > reached):
            reached = at
    return reached


def _old_enough(at: datetime | None) -> bool:
    """A message younger than the backfill delay may still have its webhook in flight; one
    without a time we can read counts as old enough."""
    return at is None or not _after() or at <= timezone.now() - _after()


def _delivery_payload(event_type, mailbox, message: dict, message_id: str, recipients) -> dict:
    obj = {
        "inbox_id": mailbox.inbox_id,
        "thread_id": message.get("thread_id") or "",
        "message_id": message_id,
        "timestamp": message.get("timestamp"),
    }
    if event_type == "message.delivered":
        obj["recipients"] = list(recipients)
    else:
        obj["reason"] = "backfill: the provider's message lookup says rejected"
    return {
        "type": "event",
        "event_type": event_type,
        "event_id": backfill_svix_id(event_type, message_id),
        _EVENT_KEYS[event_type]: obj,
    }


def _received_payload(mailbox, message: dict) -> dict:
    message = {**message, "inbox_id": mailbox.inbox_id}
    return {
        "type": "event",
        "event_type": "message.received",
        "event_id": backfill_svix_id("message.received", message["message_id"], mailbox.inbox_id),
        "message": message,
        "thread": {"inbox_id": mailbox.inbox_id, "thread_id": message.get("thread_id")},
    }


def _store(
    endpoint: WebhookEndpoint, payload: dict, event_type: str, message_id: str, mailbox=None
) -> bool:
    """Store a found event in the ledger, pending for the applier; False if a run stored it."""
    inbox_id = mailbox.inbox_id if mailbox is not None else ""
    with transaction.atomic():
        stored = event_store(
            tenant=endpoint.tenant,
            endpoint=endpoint,
            svix_id=backfill_svix_id(event_type, message_id, inbox_id),
            event=normalize(payload),
        )
    if stored is not None:
        log.info(
            "webhooks.backfill.found",
            extra={"tenant_id": endpoint.tenant_id, "event_type": event_type},
        )
    return stored is not None
