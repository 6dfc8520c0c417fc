"""What ``/metrics`` exposes (DEPLOYMENT.md "Watching it" lists the series): one collector that
reads the database on each scrape, rendered by the official ``prometheus_client``.

Every value comes from the database, not from process memory, so any web process answers the
same and nothing is lost when one restarts; the collector sits on a registry of its own, never
the library's global one. A scrape costs a fixed number of small queries, whatever the history:
totals come from the counter rows (``common.counters``, written in the transaction of each
change), and the gauges read only rows that do not accumulate (non-terminal intents, unapplied
webhook events, throttles, the attachment storage total of each tenant, mailboxes whose key
was refused), through their indexes.

config/ is at both ends of the house (DESIGN.md): this module is its top, like ``config.ops``.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from common.counters import Total, counter_totals
from intents.models import ProviderThrottle, SendIntent
from intents.selectors import (
    live_intent_counts_by_tenant,
    oldest_queued_age_seconds,
    oldest_uncertain_age_seconds,
)
from intents.selectors.storage import attachment_storage_by_tenant, storage_quota_by_tenant
from mailboxes.models import Mailbox
from tenants.models import Tenant
from webhooks.selectors import (
    failed_events_by_tenant,
    last_received_by_tenant,
    ledger_rows_estimate,
    unapplied_events_by_tenant,
)

# Counter name in ``Counter`` -> (metric name without _total, help, label names after tenant).
COUNTERS = {
    "attempts": (
        "countersign_attempts",
        "Provider calls by kind and outcome (counted when the call's outcome is recorded).",
        ("kind", "outcome"),
    ),
    "provider_429": ("countersign_provider_429", "Provider answers 429.", ()),
    "reconciliations": (
        "countersign_reconciliations",
        "Uncertain intents resolved, by the state they moved to.",
        ("result",),
    ),
    "idempotent_replays": (
        "countersign_idempotent_replays",
        "Agent API requests answered from the Idempotency-Key store.",
        (),
    ),
    "webhook_duplicates": (
        "countersign_webhook_duplicates",
        "Webhook deliveries of an event already stored (answered 2xx, nothing changed).",
        (),
    ),
}
# Counters every tenant shows from the start (0), so a rate over them exists before the first one.
ALWAYS = ("provider_429", "idempotent_replays", "webhook_duplicates")


class CountersignCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        slugs = dict(Tenant.objects.order_by("pk").values_list("pk", "slug"))
        totals = [t for t in counter_totals() if t.tenant_id in slugs]
        yield _intents(slugs, totals)
        yield GaugeMetricFamily(
            "countersign_oldest_queued_seconds",
            "Age of the oldest due queued intent.",
            value=round(oldest_queued_age_seconds() or 0.0, 3),
        )
        yield GaugeMetricFamily(
            "countersign_oldest_uncertain_seconds",
            "Age of the oldest due reconciliation (an uncertain intent no worker has taken).",
            value=round(oldest_uncertain_age_seconds() or 0.0, 3),
        )
        yield from _counters(slugs, totals)
        circuit = GaugeMetricFamily(
            "countersign_circuit_open",
            "Circuit breaker state per provider key (1 = open).",
            labels=["key", "state"],
        )
        for key_ref, state in ProviderThrottle.objects.order_by("key_ref").values_list(
            "key_ref", "circuit"
        ):
            circuit.add_metric([key_ref, state], int(state != ProviderThrottle.Circuit.CLOSED))
        yield circuit
        yield from _webhooks(slugs)
        yield from _attachment_storage(slugs)
        yield _key_refused(slugs)


def _intents(slugs: dict[int, str], totals: list[Total]) -> GaugeMetricFamily:
    """Intents by state per tenant: the live states counted in the table, the terminal ones from
    the counters (how many ever reached that state; retention does not lower them)."""
    live = live_intent_counts_by_tenant()
    finished = {
        (t.tenant_id, t.labels.get("state")): t.n for t in totals if t.name == "intents_finished"
    }
    family = GaugeMetricFamily(
        "countersign_intents",
        "Send intents by state (terminal states: how many ever reached it).",
        labels=["tenant", "state"],
    )
    for tenant_id, slug in slugs.items():
        for state in SendIntent.State.values:
            source = finished if state in SendIntent.TERMINAL else live
            family.add_metric([slug, state], source.get((tenant_id, state), 0))
    return family


def _counters(slugs: dict[int, str], totals: list[Total]) -> Iterator[CounterMetricFamily]:
    for name, (metric, documentation, labels) in COUNTERS.items():
        family = CounterMetricFamily(metric, documentation, labels=["tenant", *labels])
        seen = set()
        for t in totals:
            if t.name == name:
                seen.add(t.tenant_id)
                family.add_metric([slugs[t.tenant_id], *(t.labels[k] for k in labels)], t.n)
        if name in ALWAYS:
            for tenant_id, slug in slugs.items():
                if tenant_id not in seen:
                    family.add_metric([slug], 0)
        yield family


def _webhooks(slugs: dict[int, str]) -> Iterator[Metric]:
    unapplied = unapplied_events_by_tenant()
    yield GaugeMetricFamily(
        "countersign_webhook_ledger_rows",
        "Webhook events stored (the planner's estimate, not an exact count).",
        value=ledger_rows_estimate(),
    )
    waiting = GaugeMetricFamily(
        "countersign_webhook_unapplied",
        "Webhook events stored but not applied yet (pending or deferred).",
        labels=["tenant"],
    )
    lag = GaugeMetricFamily(
        "countersign_webhook_lag_seconds",
        "Apply lag: age of the oldest stored but unapplied (pending) event; 0 when none waits.",
        labels=["tenant"],
    )
    for tenant_id, slug in slugs.items():
        row = unapplied.get(tenant_id)
        waiting.add_metric([slug], row.count if row else 0)
        lag.add_metric([slug], round(row.lag_seconds, 3) if row else 0.0)
    yield waiting
    yield lag
    set_aside = failed_events_by_tenant()
    failed = GaugeMetricFamily(
        "countersign_webhook_failed",
        "Webhook events whose apply raised WEBHOOK_APPLY_MAX_FAILURES times, set aside until an "
        "operator retries them (manage.py webhooks_apply --retry-failed).",
        labels=["tenant"],
    )
    for tenant_id, slug in slugs.items():
        failed.add_metric([slug], set_aside.get(tenant_id, 0))
    yield failed
    received = last_received_by_tenant()
    last = GaugeMetricFamily(
        "countersign_webhook_last_received_timestamp_seconds",
        "When the tenant's receiver last took a webhook delivery (Unix time, to the minute).",
        labels=["tenant"],
    )
    for tenant_id, slug in slugs.items():
        if tenant_id in received:
            last.add_metric([slug], received[tenant_id])
    yield last


def _attachment_storage(slugs: dict[int, str]) -> Iterator[Metric]:
    used = attachment_storage_by_tenant()
    family = GaugeMetricFamily(
        "countersign_attachment_storage_bytes",
        "Attachment bytes a tenant holds (each stored file once, until retention drops it).",
        labels=["tenant"],
    )
    quotas = storage_quota_by_tenant()
    quota = GaugeMetricFamily(
        "countersign_attachment_storage_quota_bytes",
        "What the tenant may hold in attachment bytes: its own quota, else "
        "TENANT_ATTACHMENT_STORAGE_BYTES.",
        labels=["tenant"],
    )
    for tenant_id, slug in slugs.items():
        family.add_metric([slug], used.get(tenant_id, 0))
        # A tenant deleted since ``slugs`` was read has no quota left: no series.
        if tenant_id in quotas:
            quota.add_metric([slug], quotas[tenant_id])
    yield family
    yield quota


def _key_refused(slugs: dict[int, str]) -> GaugeMetricFamily:
    """Mailboxes whose key AgentMail refused (mailboxes.key_health): nothing is sent from them
    until an admin checks the key again. One small aggregate over the mailboxes table."""
    refused = dict(
        Mailbox.objects.filter(key_refused_at__isnull=False)
        .values_list("tenant_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    family = GaugeMetricFamily(
        "countersign_mailboxes_key_refused",
        "Mailboxes whose AgentMail key was refused; their sends wait for an admin's check.",
        labels=["tenant"],
    )
    for tenant_id, slug in slugs.items():
        family.add_metric([slug], refused.get(tenant_id, 0))
    return family


def exposition() -> bytes:
    """The text exposition of every series, from a registry of its own."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CountersignCollector())
    return generate_latest(registry)
