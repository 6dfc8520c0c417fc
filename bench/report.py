"""One plain-text table from a results dict (also used to regenerate BENCHMARKS.md tables)."""

from __future__ import annotations


def _fmt(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        value = f"{value:,.1f}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value}{unit}"


def _ratio(a, b) -> str:
    if not a or not b:
        return "-"
    return f"{a / b:.2f}x"


def _table(header: list[str], rows: list[list]) -> str:
    cells = [header, *[[_fmt(c) if not isinstance(c, str) else c for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep, *[line(r) for r in cells[1:]]])


def render(results: dict) -> str:
    out = []
    rows = results.get("rows", {})
    if "dispatch" in rows:
        out.append(_dispatch(rows["dispatch"]))
    if "phases" in rows:
        out.append(_phases(rows["phases"]))
    if "webhooks" in rows:
        out.append(_webhooks(rows["webhooks"]))
    if "api" in rows:
        out.append(_api(rows["api"]))
    if "ui" in rows:
        out.append(_ui(rows["ui"]))
    if "recovery" in rows:
        out.append(_recovery(rows["recovery"]))
    return "\n\n".join(out)


def _dispatch(d: dict) -> str:
    limit = max((r["per_s"] for r in d["db_limit"] if r["k"] == 1), default=None)
    body = []
    po_by_latency = {r["latency_ms"]: r for r in d["post_office"]}
    # Additional rows (older result files have none): never used for the "vs post-office" ratio.
    http_by_latency = {r["latency_ms"]: r for r in d.get("post_office_http", [])}
    for r in d["countersign"]:
        po = po_by_latency.get(r["latency_ms"])
        http = http_by_latency.get(r["latency_ms"])
        for row, name in (
            (r, "Countersign"),
            (po, "django-post-office"),
            (http, "django-post-office, HTTP backend (official AgentMail SDK to the sandbox)"),
        ):
            if row is None:
                continue
            body.append(
                [
                    f"{name} @{row['latency_ms']} ms",
                    f"{row['accepted']}/{row['n']}",
                    row["per_s"],
                    row["latency"]["p50_ms"],
                    row["latency"]["p95_ms"],
                    row.get("duplicates_all_rounds", row["duplicates"]),
                    _ratio(r["per_s"], po["per_s"]) if name == "Countersign" and po else "",
                    _ratio(r["per_s"], http["per_s"]) if name == "Countersign" and http else "",
                    _ratio(row["per_s"], limit),
                    row.get("worker_cpu_ms_per_item"),
                    row.get("sandbox_cpu_ms_per_item", "-"),
                    row.get("postgres_cpu_ms_per_item") or "-",
                ]
            )
    for row in d["db_limit"]:
        body.append(
            [
                f"DB limit, raw SQL claim k={row['k']}",
                f"{row['accepted']}/{row['n']}",
                row["per_s"],
                "-",
                "-",
                row.get("duplicates_all_rounds", row["duplicates"]),
                "",
                "",
                _ratio(row["per_s"], limit),
                row.get("worker_cpu_ms_per_item"),
                "-",
                row.get("postgres_cpu_ms_per_item") or "-",
            ]
        )
    w = d["countersign"][0]["workers"] if d["countersign"] else "?"
    rounds = [
        f"{label} {' / '.join(_fmt(x) for x in row['rounds_per_s'])}"
        for label, row in _labelled(d)
        if len(row.get("rounds_per_s", [])) > 1
    ]
    count = max((len(row.get("rounds_per_s", [])) for _, row in _labelled(d)), default=1)
    title = "latency = release of the full queue to accepted"
    if count > 1:
        title += f"; each row its median of {count} alternating rounds, dups summed over all"
    footer = ("\nrounds, per s in run order: " + "; ".join(rounds)) if rounds else ""
    return (
        f"Dispatch ({w} worker processes; {title})\n"
        + _table(
            [
                "row",
                "sent",
                "per s",
                "p50 ms",
                "p95 ms",
                "dups",
                "vs post-office",
                "vs post-office over HTTP",
                "vs DB k=1",
                "worker CPU ms/item",
                "provider CPU ms/item",
                "PostgreSQL CPU ms/item",
            ],
            body,
        )
        + footer
    )


def _labelled(d: dict):
    names = {
        "countersign": "Countersign",
        "post_office": "post-office",
        "post_office_http": "post-office over HTTP",
    }
    for system, name in names.items():
        for row in d.get(system, []):
            yield f"{name} @{row['latency_ms']} ms", row
    for row in d.get("db_limit", []):
        yield f"DB limit k={row['k']}", row


def _phases(p: dict) -> str:
    names = {
        "intent_claim": "claim (lease the batch, journal)",
        "intent_begin_attempts": "re-check, attempt rows, commit",
        "intent_record_accepted": "record accepted sends, deferred webhooks",
    }
    body = [
        [label, f"{p['phases'][name]['cpu_ms']:.2f}", f"{p['phases'][name]['statements']:.2f}"]
        for name, label in names.items()
    ]
    body += [
        ["main thread, all phases", f"{p['main_thread_cpu_ms']:.2f}", "-"],
        ["provider calls (pool threads: SDK + handoffs)", f"{p['call_threads_cpu_ms']:.2f}", "-"],
        ["whole worker process", f"{p['process_cpu_ms']:.2f}", "-"],
        [
            f"one SDK send alone, sequential ({p['sdk_calls']} calls: {p['sdk_outcomes']})",
            f"{p['sdk_call_cpu_ms']:.2f}",
            "-",
        ],
    ]
    return (
        f"Where a worker's CPU goes (one worker in process, {p['intents']} intents, batches of "
        f"{p['batch']}, 0 ms provider latency)\n"
        + _table(["phase", "CPU ms per intent", "SQL statements per intent"], body)
    )


def _webhooks(w: dict) -> str:
    body = []
    ours, peer = w["rows"][0], w["rows"][1] if len(w["rows"]) > 1 else None
    for r in w["rows"]:
        body.append(
            [
                r["name"],
                f"{r['ok']}/{r['requests']}",
                r["per_s"],
                r["latency"]["p50_ms"],
                r["latency"]["p95_ms"],
                r["latency"]["p99_ms"],
                r.get("stored", "-"),
                r.get("applied", "-"),
                _ratio(r["per_s"], peer["per_s"]) if peer and r is not peer else "",
            ]
        )
    ratio = _ratio(ours["per_s"], peer["per_s"]) if peer else "-"
    # Older result files have no storing-receiver row.
    storing = w.get("ratio_vs_anymail_store")
    note = (
        f"\nCountersign / anymail with a storing receiver (additional row) = {storing:.2f}x"
        if storing
        else ""
    )
    return (
        f"Webhook ingestion ({w['server']}; {w['concurrency']} connections; "
        f"body {w['body_bytes']} bytes) — Countersign/anymail = {ratio}\n"
        + _table(
            [
                "endpoint",
                "2xx",
                "per s",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "stored",
                "applied",
                "vs anymail",
            ],
            body,
        )
        + note
    )


def _api(a: dict) -> str:
    body = [
        [
            r["name"],
            f"{r['ok']}/{r['requests']}",
            r["per_s"],
            r["latency"]["p50_ms"],
            r["latency"]["p95_ms"],
            r["latency"]["p99_ms"],
            r.get("check", ""),
        ]
        for r in a["rows"]
    ]
    return f"Agent API ({a['server']}; {a['concurrency']} connections)\n" + _table(
        ["request", "ok", "per s", "p50 ms", "p95 ms", "p99 ms", "check"], body
    )


def _ui(u: dict) -> str:
    body = [
        [
            f"{r['page']} @ {r['pending']:,} pending"
            + (f" of {r['of']:,} drafts" if r.get("of") else ""),
            r["median_ms"],
            r["p95_ms"],
            r["queries"],
        ]
        for r in u["rows"]
    ]
    text = "Review UI (server time in-process, test client; median of repeats)\n" + _table(
        ["page", "median ms", "p95 ms", "queries"], body
    )
    if "queue_queries_constant" in u:
        text += (
            "\nqueue query count constant across sizes, every view: "
            f"{'yes' if u['queue_queries_constant'] else 'NO'}"
        )
    plans = u.get("plans", {})
    if plans and all(isinstance(p, list) for p in plans.values()):
        largest = max(r["pending"] for r in u["rows"] if not r.get("of"))
        for page, explained in plans.items():
            slowest = explained[0] if explained else None
            scans = [
                f"{s['table']} ({s['rows']:,} rows)"
                for plan in explained
                for s in plan["seq_scans"]
            ]
            label = page if "," in page else f"{page} @ {largest:,} pending"
            text += (
                f"\n{label}: {len(explained)} reads explained, slowest "
                f"{slowest['execution_ms'] if slowest else '-'} ms; sequential scans: "
                f"{', '.join(scans) or 'none'}"
            )
    return text


def _recovery(runs) -> str:
    runs = runs if isinstance(runs, list) else [runs]
    names = ["as shipped"] * len(runs)

    def row(label, fn):
        return [label, *[fn(r) for r in runs]]

    body = [
        row(
            "arrival rate / capacity (same run)",
            lambda r: f"{r['arrival_per_s']} / {r['capacity_per_s']} per s",
        ),
        row("outage (503 on every send)", lambda r: f"{r['outage_s']} s"),
        row(
            "backlog peak / at recovery",
            lambda r: f"{r['backlog_peak']} / {r['backlog_at_recovery']}",
        ),
        row(
            "time to drain (measured)",
            lambda r: f"{r['drain_s']} s" if r["drain_s"] else "not drained in budget",
        ),
        row("ideal backlog/(capacity-arrival)", lambda r: f"{r['ideal_drain_s']} s"),
        row("measured / ideal", lambda r: f"{r['drain_ratio']:.2f}x"),
        row(
            "steady state, before the outage: approve->accepted p50 / p95 ms",
            lambda r: (
                f"{r['steady_latency']['p50_ms']} / {r['steady_latency']['p95_ms']}"
                f" ({r['steady_intents']} intents)"
                if r.get("steady_intents")
                else "-"
            ),
        ),
        row(
            "whole run, outage included: approve->accepted p50 / p95 ms",
            lambda r: f"{r['latency']['p50_ms']} / {r['latency']['p95_ms']}",
        ),
        row(
            "intents / accepted / dups",
            lambda r: f"{r['intents']} / {r['accepted']} / {r['duplicates']}",
        ),
    ]
    return "Recovery (seed 002 outage, time-scaled)\n" + _table(["", *names], body)
