"""Recovery: the outage of seed 002's worked example, scaled down, with the real worker loop.

Seed 002: 100 orders a minute, a 4-minute provider outage, workers that send 300 a minute once
the API is back: ~400 rows of backlog, cleared in ~2 minutes = backlog / (capacity - arrival).

Here, on loopback: W worker processes against the sandbox with a fixed provider latency. First
the capacity is measured in the same run (a burst drained by the same workers), then approvals
arrive at one third of it (the seed's 100 vs 300) from a separate process calling the real
`draft_approve`; after a steady period every send gets a sandbox 503 for `outage_s` seconds,
then the faults are cleared. Arrivals continue throughout. A sampler counts the backlog
(intents queued, sending or uncertain) four times a second.

Every time constant of the retry policy is scaled by the same factor as the outage (seed: 240 s;
here `outage_s`): backoff base and cap, and the circuit breaker's cool-down. The JSON records the
values used.
"""

from __future__ import annotations

import time

from bench.common import (
    CTX_FORK,
    approve,
    create_drafts,
    latency_summary,
    make_tenant,
    provision_mailboxes,
    reset_tables,
)
from bench.dispatch import (
    _configure_sending,
    run_workers,
    start_workers,
    stop_workers,
)

SEED_OUTAGE_S = 240.0
OPEN = ("queued", "sending", "uncertain")


def _feeder(tenant_id, user_id, items, rate, go, stop, lag) -> None:
    from django.db import connections

    from tenants.models import Tenant, User

    tenant, user = Tenant.objects.get(pk=tenant_id), User.objects.get(pk=user_id)
    go.wait()
    start = time.monotonic()
    worst = 0.0
    for i, item in enumerate(items):
        if stop.is_set():
            break
        due = start + i / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        else:
            worst = max(worst, now - due)
        approve(tenant, user, item)
    lag.put(round(worst, 3))
    connections.close_all()


def run(params: dict) -> dict:
    from django.conf import settings

    from intents.models import SendIntent
    from mailboxes.sandbox.testing import SandboxServer

    outage = float(params["outage_s"])
    quick = params.get("quick", False)
    workers, latency = params.get("workers", 2), params.get("latency_ms", 50)
    scale = outage / SEED_OUTAGE_S
    settings.SEND_RATE_PER_KEY = settings.SEND_BURST_PER_KEY = 1e6
    settings.SEND_BACKOFF_BASE_SECONDS = 2.0 * scale
    settings.SEND_BACKOFF_CAP_SECONDS = 900.0 * scale
    settings.SEND_CIRCUIT_COOLDOWN_SECONDS = 30.0 * scale
    policy = {
        "time_scale": round(scale, 4),
        "backoff_base_s": settings.SEND_BACKOFF_BASE_SECONDS,
        "backoff_cap_s": settings.SEND_BACKOFF_CAP_SECONDS,
        "circuit_cooldown_s": settings.SEND_CIRCUIT_COOLDOWN_SECONDS,
        "circuit_failures": getattr(settings, "SEND_CIRCUIT_FAILURES", 5),
    }
    with SandboxServer(config={"auto_deliver": False}) as sandbox:
        _configure_sending(sandbox)
        reset_tables()
        tenant, user = make_tenant("recovery")
        boxes = provision_mailboxes(tenant, 1, sandbox)
        sandbox.config(latency_ms=latency)

        # 1. Capacity, same workers, same sandbox, same run.
        burst = 40 if quick else 300
        ids = [
            approve(tenant, user, it) for it in create_drafts(tenant, user, boxes, burst, tag="cap")
        ]

        def drained() -> bool:
            return not SendIntent.objects.filter(pk__in=ids).exclude(state="accepted").exists()

        t0 = run_workers(workers=workers, batch=settings.SEND_BATCH_SIZE, done=drained, timeout=300)
        from django.db.models import Max

        t_end = SendIntent.objects.filter(pk__in=ids).aggregate(m=Max("updated_at"))["m"]
        capacity = burst / (t_end.timestamp() - t0)
        arrival = capacity / 3

        # 2. The scenario.
        steady = max(2.0, outage / 2)
        budget = steady + outage + (8.0 if quick else max(30.0, 4 * outage))
        items = create_drafts(tenant, user, boxes, int(arrival * budget) + 1, tag="arr")
        procs, go, stop = start_workers(workers=workers, batch=settings.SEND_BATCH_SIZE)
        feed_go, feed_stop, lag = CTX_FORK.Event(), CTX_FORK.Event(), CTX_FORK.Queue()
        feeder = CTX_FORK.Process(
            target=_feeder,
            args=(tenant.pk, user.pk, items, arrival, feed_go, feed_stop, lag),
            daemon=True,
        )
        feeder.start()
        time.sleep(0.3)
        arrivals = SendIntent.objects.exclude(pk__in=ids)
        samples = []
        start, wall_start = time.monotonic(), time.time()
        go.set()
        feed_go.set()
        outage_at = recovered_at = None
        baseline = 0
        drained_at = None
        try:
            while True:
                now = time.monotonic() - start
                backlog = arrivals.filter(state__in=OPEN).count()
                samples.append((round(now, 2), backlog))
                if outage_at is None and now >= steady:
                    baseline = max(b for t, b in samples if t >= 1.0) if now > 1 else backlog
                    sandbox.fault("sends", "503_before", times=0)
                    outage_at = now
                elif outage_at is not None and recovered_at is None and now >= outage_at + outage:
                    sandbox.clear_faults()
                    recovered_at, backlog_at_recovery = now, backlog
                elif recovered_at is not None and backlog <= max(baseline, 1):
                    drained_at = now
                    break
                if now > budget:
                    break
                time.sleep(0.25)
            time.sleep(1.0)
        finally:
            feed_stop.set()
            feeder.join(30)
            # The last arrivals (after the drain was measured) are sent before the workers stop,
            # so the final tally compares every approval with the provider's ledger.
            settle = time.monotonic() + 15
            while arrivals.filter(state__in=OPEN).exists() and time.monotonic() < settle:
                time.sleep(0.1)
            stop_workers(procs, stop)
        rows = list(arrivals.filter(state="accepted").values_list("approved_at", "updated_at"))
        states: dict[str, int] = {}
        for state in arrivals.values_list("state", flat=True):
            states[state] = states.get(state, 0) + 1
        ledger = sandbox.ledger()
        per_key: dict[str, int] = {}
        for entry in ledger:
            per_key[entry["idempotency_key"]] = per_key.get(entry["idempotency_key"], 0) + 1
        feeder_lag = lag.get(timeout=5) if not lag.empty() else None
    # Steady state: approvals from 1 s after the start to 1 s before the outage, at a third of
    # the capacity; none of them can have met the outage.
    steady_rows = (
        [
            (a, b)
            for a, b in rows
            if wall_start + 1.0 <= a.timestamp() <= wall_start + outage_at - 1.0
        ]
        if outage_at
        else []
    )
    peak = max(b for _, b in samples)
    drain = round(drained_at - recovered_at, 2) if drained_at and recovered_at else None
    ideal = (
        round(max(0, backlog_at_recovery - baseline) / (capacity - arrival), 2)
        if recovered_at
        else None
    )
    return {
        "workers": workers,
        "latency_ms": latency,
        "policy": policy,
        "capacity_per_s": round(capacity, 1),
        "arrival_per_s": round(arrival, 1),
        "steady_s": steady,
        "outage_s": outage,
        "steady_backlog": baseline,
        "backlog_peak": peak,
        "backlog_at_recovery": backlog_at_recovery if recovered_at else None,
        "drain_s": drain,
        "ideal_drain_s": ideal,
        "drain_ratio": round(drain / ideal, 2) if drain and ideal else None,
        "latency": latency_summary([(b - a).total_seconds() for a, b in rows]),
        "steady_latency": latency_summary([(b - a).total_seconds() for a, b in steady_rows]),
        "steady_intents": len(steady_rows),
        "intents": sum(states.values()),
        "states": states,
        "accepted": states.get("accepted", 0),
        "duplicates": sum(c - 1 for c in per_key.values() if c > 1),
        "feeder_worst_lag_s": feeder_lag,
        "samples": samples[:: max(1, len(samples) // 200)],
    }
