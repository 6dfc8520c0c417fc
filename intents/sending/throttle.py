"""Throughput controls: a token bucket per AgentMail key (rate limits are per key), shared through
the database (``ProviderThrottle`` rows, locked in key order), and a circuit breaker per key that
pauses a failing provider and then lets exactly one request probe it."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from config.clock import db_now
from intents.models import ProviderThrottle
from intents.sending.lease import lease_duration
from mailboxes import provider

log = logging.getLogger("intents.sending")


def _circuit_failures() -> int:
    # Settings win; the environment fallback stands in until config/settings.py names them.
    return int(settings.SEND_CIRCUIT_FAILURES)


def _circuit_cooldown() -> timedelta:
    return timedelta(seconds=float(settings.SEND_CIRCUIT_COOLDOWN_SECONDS))


def throttle_key(mailbox) -> str:
    return key_ref_for(mailbox.provider_api_key_id, mailbox.pk)


def key_ref_for(provider_api_key_id: str, mailbox_id: int) -> str:
    # Rate limits are per AgentMail key; each mailbox sends with its own inbox-scoped key.
    return f"key:{provider_api_key_id}" if provider_api_key_id else f"mailbox:{mailbox_id}"


def broadcast_bucket(broadcast_id: int) -> str:
    return ProviderThrottle.broadcast_key(broadcast_id)


def broadcast_rate(rate: float | None) -> float:
    """A broadcast's sends per second: its own rate or the default, and never more than
    ``BROADCAST_KEY_SHARE`` of the key's rate, so replies from the mailbox keep the rest."""
    wanted = rate if rate else settings.BROADCAST_RATE_PER_SECOND
    ceiling = settings.SEND_RATE_PER_KEY * settings.BROADCAST_KEY_SHARE
    return max(0.001, min(wanted, ceiling))


def take_broadcast_token(row: ProviderThrottle, now: datetime, rate: float | None) -> float:
    """0 when the broadcast's own bucket has a token (taken), else seconds to wait. Its burst is
    a quarter second of its rate: a claim takes few broadcast sends at a time, so the batch a
    reply approved meanwhile waits behind stays short (BENCHMARKS.md, broadcasts)."""
    rate = broadcast_rate(rate)
    burst = max(1.0, rate / 4)
    elapsed = max(0.0, (now - row.refilled_at).total_seconds())
    row.tokens = min(burst, row.tokens + elapsed * rate)
    row.refilled_at = max(row.refilled_at, now)
    if row.tokens < 1:
        return max(0.02, (1 - row.tokens) / rate)
    row.tokens -= 1
    return 0.0


def lock_throttles(keys: set[str], now: datetime) -> dict[str, ProviderThrottle]:
    if not keys:
        return {}

    def lock(wanted):
        # Sorted: two claimers locking several keys always do it in the same order (no deadlock).
        rows = ProviderThrottle.objects.select_for_update().filter(key_ref__in=wanted)
        return {row.key_ref: row for row in rows.order_by("key_ref")}

    rows = lock(keys)
    missing = keys - rows.keys()
    if missing:
        # A key's first claim creates its bucket (full); a concurrent first claim's row wins.
        # Sorted too: an insert waits for another claimer's uncommitted insert of the same key,
        # and a set's order differs from process to process (string hashes are salted), so two
        # claimers making the same two buckets in opposite orders would deadlock.
        ProviderThrottle.objects.bulk_create(
            [
                ProviderThrottle(key_ref=k, tokens=settings.SEND_BURST_PER_KEY, refilled_at=now)
                for k in sorted(missing)
            ],
            ignore_conflicts=True,
        )
        rows |= lock(missing)
    return rows


def take_token(row: ProviderThrottle, now: datetime, probe: uuid.UUID) -> float:
    """0 when this claim may call the provider (token taken), else seconds to wait."""
    if (
        row.circuit != ProviderThrottle.Circuit.CLOSED
        and row.opened_until is not None
        and row.opened_until > now
    ):
        wait = (row.opened_until - now).total_seconds()
        if row.circuit == ProviderThrottle.Circuit.HALF_OPEN:
            # A probe is in flight. Its opened_until is the probe's lease expiry (for a lost
            # probe), but the probe answers within one provider call: re-check soon, or a
            # recovered provider's backlog waits a whole lease (BENCHMARKS.md, recovery).
            return max(0.05, min(wait, _circuit_cooldown().total_seconds(), 1.0))
        return max(0.5, wait)
    rate = max(settings.SEND_RATE_PER_KEY, 0.001)
    if row.refilled_at > now:
        # A 429 emptied the bucket until its Retry-After.
        return (row.refilled_at - now).total_seconds() + 1 / rate
    elapsed = (now - row.refilled_at).total_seconds()
    row.tokens = min(settings.SEND_BURST_PER_KEY, row.tokens + elapsed * rate)
    row.refilled_at = now
    if row.tokens < 1:
        return max(0.05, (1 - row.tokens) / rate)
    row.tokens -= 1
    if row.circuit != ProviderThrottle.Circuit.CLOSED:
        # Cool-down over (or the last probe was lost): exactly this request probes the provider.
        row.circuit = ProviderThrottle.Circuit.HALF_OPEN
        row.probe_token = probe
        row.opened_until = now + lease_duration()
    return 0.0


def throttle_feedback(key_ref: str, result: provider.SendResult) -> None:
    clean = result.http_status != 429 and result.outcome in (
        provider.Outcome.ACCEPTED,
        provider.Outcome.PERMANENT,
    )
    if clean:
        throttles_clean([key_ref])
        return
    row = ProviderThrottle.objects.select_for_update().filter(key_ref=key_ref).first()
    if row is None:
        return
    now = db_now()
    fields = ["consecutive_failures", "circuit", "opened_until", "probe_token"]
    if result.http_status == 429:
        # The key is out of budget: nothing from it until Retry-After has passed.
        row.tokens = 0
        row.refilled_at = now + timedelta(seconds=result.retry_after or 1)
        fields += ["tokens", "refilled_at"]
    else:
        row.consecutive_failures += 1
        probe_failed = row.circuit == ProviderThrottle.Circuit.HALF_OPEN
        if probe_failed or row.consecutive_failures >= _circuit_failures():
            row.circuit = ProviderThrottle.Circuit.OPEN
            row.opened_until = now + _circuit_cooldown()
            row.probe_token = None
            log.warning("intents.circuit.opened", extra={"key_ref": key_ref})
    row.save(update_fields=fields)


def throttles_clean(key_refs: list[str]) -> None:
    """A clean answer closes its key's circuit and resets its failure count. The common case is
    one conditional UPDATE that matches nothing (the rows are already closed and clean), instead
    of locking and rewriting them with the same values per send; rows that do change are locked
    in key order, as in ``lock_throttles``."""
    table = ProviderThrottle._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS t SET consecutive_failures = 0, circuit = %s, "  # noqa: S608
            "opened_until = NULL, probe_token = NULL "
            f"FROM (SELECT key_ref, circuit FROM {table} "
            "WHERE key_ref = ANY(%s) AND (circuit <> %s OR consecutive_failures <> 0 "
            "OR opened_until IS NOT NULL OR probe_token IS NOT NULL) "
            "ORDER BY key_ref FOR UPDATE) AS was WHERE t.key_ref = was.key_ref "
            "RETURNING t.key_ref, was.circuit",
            [
                ProviderThrottle.Circuit.CLOSED,
                sorted(set(key_refs)),
                ProviderThrottle.Circuit.CLOSED,
            ],
        )
        reopened = [key_ref for key_ref, was in cursor.fetchall() if was != "closed"]
    for key_ref in reopened:
        # The pair of intents.circuit.opened: without it the logs never said an outage ended.
        log.info("intents.circuit.closed", extra={"key_ref": key_ref})


def save_throttles(rows) -> None:
    """Write back the locked buckets a claim changed, in one statement."""
    rows = list(rows)
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {ProviderThrottle._meta.db_table} AS t SET tokens = u.tokens, "  # noqa: S608
            "refilled_at = u.refilled_at, circuit = u.circuit, opened_until = u.opened_until, "
            "probe_token = u.probe_token FROM unnest(%s::text[], %s::float8[], "
            "%s::timestamptz[], %s::text[], %s::timestamptz[], %s::uuid[]) "
            "AS u(key_ref, tokens, refilled_at, circuit, opened_until, probe_token) "
            "WHERE t.key_ref = u.key_ref",
            [
                [r.key_ref for r in rows],
                [float(r.tokens) for r in rows],
                [r.refilled_at for r in rows],
                [r.circuit for r in rows],
                [r.opened_until for r in rows],
                [r.probe_token for r in rows],
            ],
        )
