"""The SDK ceiling: the fastest sender with no database work at all, against the same sandbox.

What any sender on this machine could reach: P forked processes x T threads, each thread with
its own SDK facade over its own kept-alive ``httpx.Client`` built as the product builds it
(``mailboxes.provider.client.http_client``: granular timeouts, no cookies, no redirects), each
send the product's request (to, subject, text, label, a unique idempotency key, no SDK retries).
No queue table, no lease, no journal: a shared counter hands out the next send. Every layout in
``LAYOUTS`` runs; the row is the best one, and each layout's rate and client CPU per send is
reported (a naive ceiling, one process with a fresh client per thread, said nothing: issue 18).
"""

from __future__ import annotations

import resource
import threading
import time
import uuid
from collections import Counter

from bench.common import CTX_FORK, provision_mailboxes, reset_tables
from bench.dispatch import _configure_sending, process_cpu

# (processes, threads per process); Countersign's worker has 8 call threads per process. With a
# provider latency the rate is bound by concurrent calls, so only layouts of Countersign's 4 x 16
# concurrent calls (SEND_CALL_CONCURRENCY per worker process) or more run there.
LAYOUTS = ((1, 8), (2, 4), (2, 8), (4, 4), (4, 8), (8, 4), (4, 16))
LATENCY_LAYOUTS = ((4, 16), (8, 8), (16, 4))
QUICK_LAYOUTS = ((1, 2), (2, 2))
TEXT = "Thanks for writing. Your order shipped yesterday; tracking number 1Z999."


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _sender(boxes, threads: int, n: int, counter, go, results, tag: str) -> None:
    """One process: ``threads`` threads, each with its own client, sending until the shared
    counter passes ``n``; reports (accepted, failed, CPU seconds from release to the end)."""
    from mailboxes.provider.client import NO_RETRIES
    from mailboxes.provider.client import sdk as product_sdk

    outcomes: Counter = Counter()
    ready = threading.Barrier(threads + 1)

    def run() -> None:
        clients = [(product_sdk(key), inbox) for key, inbox in boxes]
        try:
            for client, inbox in clients:  # open the kept-alive connection, load the modules
                client.inboxes.messages.list(inbox, limit=1)
        except Exception as exc:  # counted: a layout whose warm-up failed shows it
            outcomes[f"warm-up {type(exc).__name__}"] += 1
        ready.wait()
        go.wait()
        while True:
            with counter.get_lock():
                index = counter.value
                counter.value += 1
            if index >= n:
                return
            client, inbox = clients[index % len(clients)]
            try:
                client.inboxes.messages.send(
                    inbox,
                    to=[f"customer{index}@example.com"],
                    subject=f"Re: order {tag}-{index}",
                    text=TEXT,
                    labels=[f"cs-intent-{index}"],
                    idempotency_key=f"ceiling-{tag}-{index}",
                    request_options=NO_RETRIES,
                )
                outcomes["accepted"] += 1
            except Exception as exc:  # counted, never retried: a ceiling row
                outcomes[type(exc).__name__] += 1

    pool = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    ready.wait()
    go.wait()
    cpu = _cpu_self()
    for thread in pool:
        thread.join()
    results.put((dict(outcomes), _cpu_self() - cpu, time.time()))


def _layout(boxes, processes: int, threads: int, n: int, sandbox) -> dict:
    import agentmail.inboxes.messages.client  # noqa: F401  (imported before the fork)
    from django.db import connections

    connections.close_all()
    tag = uuid.uuid4().hex[:8]
    counter, go, results = CTX_FORK.Value("q", 0), CTX_FORK.Event(), CTX_FORK.Queue()
    procs = [
        CTX_FORK.Process(
            target=_sender, args=(boxes, threads, n, counter, go, results, tag), daemon=True
        )
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    time.sleep(0.5 + 0.05 * processes * threads)  # every thread warmed up and waiting
    sandbox_before = process_cpu(sandbox._process.pid)
    t0 = time.time()
    go.set()
    reports = [results.get(timeout=300) for _ in procs]
    for proc in procs:
        proc.join(10)
    sandbox_cpu = process_cpu(sandbox._process.pid) - sandbox_before
    outcomes: Counter = Counter()
    for report in reports:
        outcomes.update(report[0])
    elapsed = max(r[2] for r in reports) - t0
    ledger = [e for e in sandbox.ledger() if e["idempotency_key"].startswith(f"ceiling-{tag}-")]
    per_key = Counter(e["idempotency_key"] for e in ledger)
    return {
        "processes": processes,
        "threads": threads,
        "n": n,
        "accepted": outcomes.get("accepted", 0),
        "outcomes": dict(outcomes),
        "elapsed_s": round(elapsed, 3),
        "per_s": round(outcomes.get("accepted", 0) / elapsed, 1) if elapsed > 0 else None,
        "client_cpu_ms_per_send": round(sum(r[1] for r in reports) * 1000 / max(1, n), 3),
        "sandbox_cpu_ms_per_item": round(sandbox_cpu * 1000 / max(1, n), 2),
        "provider_sends": len(ledger),
        "duplicates": sum(c - 1 for c in per_key.values() if c > 1),
    }


def sdk_ceiling(params: dict) -> dict:
    """Every layout once, against one sandbox at ``latency_ms``; the best layout is the row."""
    from bench.common import make_tenant
    from mailboxes.sandbox.testing import SandboxServer

    n, latency = params["n"], params["latency_ms"]
    layouts = [tuple(x) for x in params.get("layouts", LAYOUTS)]
    with SandboxServer(config={"auto_deliver": False}) as sandbox:
        _configure_sending(sandbox)
        reset_tables()
        tenant, _user = make_tenant()
        mailboxes = provision_mailboxes(tenant, params.get("mailboxes", 4), sandbox)
        boxes = [(m.api_key(), m.inbox_id) for m in mailboxes]
        sandbox.config(latency_ms=latency)
        tried = [_layout(boxes, p, t, n, sandbox) for p, t in layouts]
    best = max(tried, key=lambda r: r["per_s"] or 0)
    return {
        "system": "sdk_ceiling",
        "latency_ms": latency,
        "n": n,
        "workers": best["processes"],
        "layout": f"{best['processes']}x{best['threads']}",
        "accepted": best["accepted"],
        "per_s": best["per_s"],
        "elapsed_s": best["elapsed_s"],
        "worker_cpu_ms_per_item": best["client_cpu_ms_per_send"],
        "sandbox_cpu_ms_per_item": best["sandbox_cpu_ms_per_item"],
        "provider_sends": best["provider_sends"],
        "duplicates": sum(r["duplicates"] for r in tried),
        "latency": {"p50_ms": None, "p95_ms": None},
        "layouts": tried,
    }
