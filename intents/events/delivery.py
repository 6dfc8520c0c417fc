"""The agent events worker: claim an endpoint's oldest unfinished delivery, commit, POST it signed,
record the answer. No network inside a transaction.

Order: each endpoint has at most one delivery in flight (the claim locks the endpoint row, and a
``sending`` head with a live lease blocks the next), and its deliveries go out oldest first, so
events of one draft arrive in the order their changes committed. A delivery that waits for a
retry holds back the endpoint's later ones: that is the price of order, as with Svix's FIFO.

Retries: ``AGENT_EVENTS_RETRY_DELAYS`` (jittered +/-10 %), about 27 hours in all by default;
after the last the delivery is ``failed`` and the endpoint is disabled with the reason in words
(every attempt for a day failed), so an admin sees it and re-enables it when the receiver is
back. An attempt has ``AGENT_EVENTS_TOTAL_TIMEOUT`` in all, however the receiver paces its
answer. The receiver's answer is read as Standard Webhooks' retry schedule asks: a 410 Gone
disables the endpoint at once (it wants no more events; the delivery waits, due, for an admin to
enable it again), and a ``Retry-After`` is the earliest next attempt, up to ``RETRY_AFTER_MAX``,
so that a receiver cannot push its retries far past the day after which it is disabled. A lease
that expires (the worker died mid-request) counts as a failed attempt and the delivery is
retried at its next delay, so a receiver may see a delivery twice: it dedupes on
``webhook-id``, as the specification says.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
import uuid
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from itertools import zip_longest

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F, OuterRef, Q, Subquery
from django.db.models.functions import Now
from standardwebhooks import Webhook

from common.egress import DeadlinePassed, EgressRefused, PinnedTransport
from config.clock import db_now
from intents.models import AgentEvent, AgentEventDelivery, AgentEventEndpoint
from intents.models_events import GONE_REASON
from tenants.models import AuditEvent

log = logging.getLogger("intents.events")

Status = AgentEventDelivery.Status
USER_AGENT = "Countersign-Webhooks/1"
# Time a claimed delivery may take before another worker may take it over.
LEASE_SECONDS = 120
# The longest wait a receiver's Retry-After may ask for: with the default schedule, a receiver
# asking more each time is still disabled after about 31 hours, not after nine times its wish.
RETRY_AFTER_MAX = 3600.0
LEASE_EXPIRED = "no answer recorded within the lease (the worker stopped or the receiver stalled)"


@dataclass(frozen=True)
class Claim:
    delivery_id: int
    lease_token: uuid.UUID | None  # the column is nullable; a sending row always has one
    attempt: int
    endpoint: AgentEventEndpoint
    event: AgentEvent


@dataclass(frozen=True)
class Answer:
    ok: bool
    status_code: int | None
    error: str
    # Seconds the receiver asked us to wait (its Retry-After header), already bounded.
    retry_after: float | None = None


def due_endpoint_ids(*, limit: int = 500) -> list[int]:
    """Enabled endpoints whose oldest unfinished delivery may be attempted now: each tenant's
    first, then each tenant's second, and so on, so that no tenant's endpoints go all first.

    ``limit`` counts due endpoints. Applied to the endpoints with anything unfinished before the
    due ones were kept, 500 endpoints waiting for a retry (receivers down for a day, registered
    first) hid every later endpoint's due delivery. Each endpoint's head is found through the
    partial index on (endpoint, id): the work grows with the endpoints, not with the history."""
    head = AgentEventDelivery.objects.filter(
        endpoint_id=OuterRef("pk"), status__in=AgentEventDelivery.UNFINISHED
    ).order_by("id")[:1]
    waiting = AgentEventDelivery.objects.filter(status__in=AgentEventDelivery.UNFINISHED)
    due = (
        # Only endpoints with something unfinished (the partial index holds nothing else), not
        # every enabled one: idle endpoints cost nothing here.
        AgentEventEndpoint.objects.filter(enabled=True, pk__in=waiting.values("endpoint_id"))
        .annotate(
            head_status=Subquery(head.values("status")),
            head_next_attempt_at=Subquery(head.values("next_attempt_at")),
            head_lease_expires_at=Subquery(head.values("lease_expires_at")),
        )
        .filter(head_next_attempt_at__lte=Now())
        .filter(
            ~Q(head_status=Status.SENDING)
            | Q(head_lease_expires_at__isnull=True)
            | Q(head_lease_expires_at__lte=Now())
        )
        # The longest waiting first: in id order, 500 endpoints always due (backed-up receivers)
        # would keep every later one out of the round.
        .order_by("head_next_attempt_at", "pk")
        .values_list("pk", "tenant_id")[:limit]
    )
    by_tenant: dict[int, list[int]] = {}
    for endpoint_id, tenant_id in due:
        by_tenant.setdefault(tenant_id, []).append(endpoint_id)
    turns = zip_longest(*by_tenant.values())
    return [endpoint_id for turn in turns for endpoint_id in turn if endpoint_id is not None]


def delivery_claim(*, endpoint_id: int) -> Claim | None:
    """Take the endpoint's head delivery if it is due and nobody holds it; commits at once."""
    with transaction.atomic():
        endpoint = (
            AgentEventEndpoint.objects.select_for_update(no_key=True, skip_locked=True)
            .filter(pk=endpoint_id, enabled=True)
            .first()
        )
        if endpoint is None:
            return None
        head = (
            AgentEventDelivery.objects.filter(
                endpoint_id=endpoint_id, status__in=AgentEventDelivery.UNFINISHED
            )
            .select_related("event")
            .order_by("id")
            .first()
        )
        now = db_now()
        if head is None or head.next_attempt_at > now:
            return None
        if head.status == Status.SENDING and head.lease_expires_at and head.lease_expires_at > now:
            return None
        if head.status == Status.SENDING:
            # The last attempt never recorded an answer: its worker died, or the receiver held
            # the request past the task's time limit (an answer trickled one byte at a time
            # resets the read timeout). Posting again at once made such a receiver get the event
            # every two minutes for ever, never failing and never disabled: it is a failed
            # attempt, retried at its delay like any other.
            stalled = Claim(head.pk, head.lease_token, head.attempts, endpoint, head.event)
            if delivery_record(claim=stalled, answer=Answer(False, None, LEASE_EXPIRED)) != (
                Status.PENDING
            ):
                return None
            head.refresh_from_db()
            if head.next_attempt_at > db_now():
                return None
        token = uuid.uuid4()
        AgentEventDelivery.objects.filter(pk=head.pk, status=head.status).update(
            status=Status.SENDING,
            lease_token=token,
            lease_expires_at=Now() + timedelta(seconds=LEASE_SECONDS),
            attempts=F("attempts") + 1,
            last_attempt_at=Now(),
        )
    return Claim(head.pk, token, head.attempts + 1, endpoint, head.event)


def body_of(event: AgentEvent) -> str:
    """The Standard Webhooks body: ``type``, ``timestamp`` (when the event was written), ``data``."""
    return json.dumps(
        {
            "type": event.type,
            "timestamp": event.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "data": event.payload,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def signed_headers(claim: Claim, body: str, at: datetime) -> dict[str, str]:
    signatures = " ".join(
        Webhook(secret).sign(claim.event.public_id, at, body)
        for secret in claim.endpoint.secrets(at)
    )
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": claim.event.public_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signatures,
    }


def client() -> httpx.Client:
    return httpx.Client(
        transport=PinnedTransport(
            allow_private=settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS,
            allow_loopback=settings.EGRESS_ALLOW_LOOPBACK,
            deadline=settings.AGENT_EVENTS_TOTAL_TIMEOUT,
        ),
        timeout=httpx.Timeout(
            settings.AGENT_EVENTS_READ_TIMEOUT, connect=settings.AGENT_EVENTS_CONNECT_TIMEOUT
        ),
        follow_redirects=False,
        trust_env=False,
    )


def post(claim: Claim) -> Answer:
    """One signed POST; a 2xx is success, anything else (a 3xx too: redirects are not
    followed) is a failed attempt. The response body is never read."""
    body = body_of(claim.event)
    headers = signed_headers(claim, body, datetime.now(UTC))
    with client() as http:
        try:
            request = http.build_request(
                "POST", claim.endpoint.url, content=body.encode(), headers=headers
            )
        except (httpx.InvalidURL, UnicodeError) as exc:
            # A URL registered before validate_url refused what httpx and idna cannot build.
            return Answer(False, None, f"url_invalid: {exc}")
        except Exception as exc:
            log.exception(
                "intents.events.request_unbuildable", extra={"delivery_id": claim.delivery_id}
            )
            return Answer(False, None, f"url_invalid: {type(exc).__name__}")
        try:
            response = http.send(request, stream=True)
            try:
                code = response.status_code
                retry_after = retry_after_seconds(response.headers.get("retry-after", ""))
            finally:
                response.close()
        except EgressRefused as exc:
            return Answer(False, None, f"{exc.code}: {exc.message}")
        except DeadlinePassed as exc:
            return Answer(False, None, f"timeout: {exc}")
        except httpx.TimeoutException as exc:
            return Answer(False, None, f"timeout: {type(exc).__name__}")
        except httpx.HTTPError as exc:
            return Answer(False, None, f"connection: {type(exc).__name__}")
    if 200 <= code < 300:
        return Answer(True, code, "")
    return Answer(False, code, f"HTTP {code}", retry_after)


def retry_after_seconds(value: str) -> float | None:
    """A Retry-After header (RFC 9110: seconds, or an HTTP date) as seconds from now, at most
    ``RETRY_AFTER_MAX``; None if absent, unreadable or already past."""
    value = value.strip()
    if value.isascii() and value.isdigit():
        # Its first 12 significant digits (int() refuses a number of over 4300): cut before its
        # leading zeros were dropped, "0000000000003600" read as 0 and asked no wait at all.
        digits = value.lstrip("0")[:12] or "0"
        seconds = float(min(int(digits), int(RETRY_AFTER_MAX)))
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds) or seconds <= 0:
        return None
    return min(seconds, RETRY_AFTER_MAX)


def _retry_delay(attempt: int) -> float | None:
    delays = settings.AGENT_EVENTS_RETRY_DELAYS
    if attempt > len(delays):
        return None
    return delays[attempt - 1] * random.uniform(0.9, 1.1)


def delivery_record(*, claim: Claim, answer: Answer) -> str:
    """Record an attempt's answer, fenced by the lease; returns the delivery's new status ("" if
    the lease was lost and nothing was written)."""
    fence = AgentEventDelivery.objects.filter(
        pk=claim.delivery_id, status=Status.SENDING, lease_token=claim.lease_token
    )
    done = {"lease_token": None, "lease_expires_at": None, "last_status_code": answer.status_code}
    with transaction.atomic():
        if answer.ok:
            if not fence.update(status=Status.DELIVERED, delivered_at=Now(), last_error="", **done):
                return ""
            AgentEventEndpoint.objects.filter(pk=claim.endpoint.pk).update(
                consecutive_failures=0, last_success_at=Now()
            )
            return Status.DELIVERED
        gone = answer.status_code == 410
        delay = _retry_delay(claim.attempt)
        status = Status.FAILED if delay is None else Status.PENDING
        if gone:
            # Due again as soon as an admin enables the endpoint, first in its order.
            delay = 0.0 if delay is not None else None
        elif delay is not None and answer.retry_after is not None:
            delay = max(delay, answer.retry_after)
        retry = {} if delay is None else {"next_attempt_at": Now() + timedelta(seconds=delay)}
        if not fence.update(status=status, last_error=answer.error[:500], **done, **retry):
            return ""
        AgentEventEndpoint.objects.filter(pk=claim.endpoint.pk).update(
            consecutive_failures=F("consecutive_failures") + 1, last_failure_at=Now()
        )
        if status == Status.FAILED or gone:
            _disable_failing(claim, answer, gone=gone)
    log.info(
        "intents.events.delivery_failed",
        extra={
            "delivery_id": claim.delivery_id,
            "attempt": claim.attempt,
            "status": str(status),
            "code": answer.status_code,
        },
    )
    return status


def _disable_failing(claim: Claim, answer: Answer, *, gone: bool = False) -> None:
    # The page says in the reader's language that every attempt failed for a day, or that the
    # receiver answered 410 Gone; the reason kept is the last error, as technical as the
    # receiver's answer.
    reason = GONE_REASON if gone else (answer.error[:500] or "failed")
    changed = AgentEventEndpoint.objects.filter(pk=claim.endpoint.pk, enabled=True).update(
        enabled=False, disabled_automatically=True, disabled_reason=reason, disabled_at=Now()
    )
    action = "agent_events.endpoint_gone" if gone else "agent_events.endpoint_auto_disabled"
    if changed:
        AuditEvent.objects.create(
            tenant_id=claim.endpoint.tenant_id,
            actor=None,
            action=action,
            object_type="agenteventendpoint",
            object_id=str(claim.endpoint.pk),
            data={"url": claim.endpoint.url, "delivery_id": claim.delivery_id, "reason": reason},
        )
        log.warning(
            "intents.events.endpoint_disabled",
            extra={"endpoint_id": claim.endpoint.pk, "tenant_id": claim.endpoint.tenant_id},
        )


def _claim(endpoint_id: int) -> Claim | None:
    try:
        return delivery_claim(endpoint_id=endpoint_id)
    except Exception:
        log.exception("intents.events.endpoint_failed", extra={"endpoint_id": endpoint_id})
        return None


def _post(claim: Claim) -> Answer:
    """``post`` in a pool thread (HTTP only, no database): an unexpected error is the attempt's
    failure."""
    try:
        return post(claim)
    except Exception as exc:
        log.exception("intents.events.attempt_crashed", extra={"delivery_id": claim.delivery_id})
        return Answer(False, None, f"internal error: {type(exc).__name__}")


def _record(claim: Claim, answer: Answer) -> None:
    try:
        delivery_record(claim=claim, answer=answer)
    except Exception:  # the lease expires and the attempt counts as a failed one
        log.exception("intents.events.endpoint_failed", extra={"endpoint_id": claim.endpoint.pk})


def claim_window() -> float:
    """Seconds after a run starts during which it may begin attempts: each may last
    ``AGENT_EVENTS_TOTAL_TIMEOUT``, and all must end inside the task's time limit (``Q_TIMEOUT``,
    with a tenth to spare). A task killed at its limit left every attempt in flight, other
    tenants' too, ``sending`` until its lease ran out, and then counted it as failed."""
    limit = float(settings.Q_CLUSTER.get("timeout", 120))
    return max(0.0, 0.9 * limit - settings.AGENT_EVENTS_TOTAL_TIMEOUT)


def deliver_due(*, limit: int = 200) -> int:
    """Deliver what is due, at most ``AGENT_EVENTS_CONCURRENCY`` attempts at once, until nothing
    is due, ``limit`` attempts were made or the claim window closed; returns the number of
    attempts. Safe on several workers at once.

    Claims and records run in this thread, the POSTs in a pool (no database there). When an
    attempt is recorded, the endpoints newly due join the end of the waiting line (its own next
    delivery too), one endpoint per tenant in turn (``due_endpoint_ids``): a receiver
    that holds each request to the deadline occupies one slot, never the round. One after the
    other, an endpoint answering in 30 s held every other tenant's events 30 s per delivery.
    One endpoint's failure is its own: an error claiming or recording is logged and the run
    goes on; a delivery left ``sending`` is taken over when its lease expires, as a failed
    attempt."""
    width = max(1, int(settings.AGENT_EVENTS_CONCURRENCY))
    closes = time.monotonic() + claim_window()
    waiting = deque(due_endpoint_ids())
    running: dict[Future[Answer], Claim] = {}
    attempts = 0
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="agent-events") as pool:
        while True:
            while waiting and len(running) < width and attempts < limit:
                if attempts and time.monotonic() >= closes:
                    break
                claim = _claim(waiting.popleft())
                if claim is not None:
                    attempts += 1
                    running[pool.submit(_post, claim)] = claim
            if not running:
                return attempts
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                claim = running.pop(future)
                _record(claim, future.result())
            busy = {c.endpoint.pk for c in running.values()} | set(waiting)
            waiting.extend(i for i in due_endpoint_ids() if i not in busy)
