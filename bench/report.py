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
    if "scaling" in rows:
        out.append(_scaling(rows["scaling"]))
    if "api" in rows:
        out.append(_api(rows["api"]))
    if "ui" in rows:
        out.append(_ui(rows["ui"]))
    if "recovery" in rows:
        out.append(_recovery(rows["recovery"]))
    return "\n\n".join(out)


DISPATCH_NAMES = {
    "countersign": "Countersign",
    "post_office_http": "post-office over HTTP (official AgentMail SDK to the sandbox)",
    "sdk_ceiling": "SDK ceiling, no database work",
    "post_office": "older peer: post-office, backend only waits (no HTTP)",
}


def _dispatch(d: dict) -> str:
    limit = max((r["per_s"] for r in d["db_limit"] if r["k"] == 1), default=None)
    body = []
    by_latency = {
        system: {r["latency_ms"]: r for r in d.get(system, [])} for system in DISPATCH_NAMES
    }
    for r in d["countersign"]:
        for system, name in DISPATCH_NAMES.items():
            row = by_latency[system].get(r["latency_ms"])
            if row is None:
                continue
            if system == "sdk_ceiling":
                name += f" (best layout {row['layout']})"
            body.append(
                [
                    f"{name} @{row['latency_ms']} ms",
                    f"{row['accepted']}/{row['n']}",
                    row["per_s"],
                    row["latency"]["p50_ms"],
                    row["latency"]["p95_ms"],
                    row.get("duplicates_all_rounds", row["duplicates"]),
                    row.get("worker_cpu_ms_per_item"),
                    row.get("sandbox_cpu_ms_per_item", "-"),
                    row.get("postgres_cpu_ms_per_item") or "-",
                ]
            )
    for row in d["db_limit"]:
        body.append(
            [
                f"older reference: DB limit, raw SQL claim k={row['k']}",
                f"{row['accepted']}/{row['n']}",
                row["per_s"],
                "-",
                "-",
                row.get("duplicates_all_rounds", row["duplicates"]),
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
    text = (
        f"Dispatch ({w} worker processes; {title})\n"
        + _table(
            [
                "row",
                "sent",
                "per s",
                "p50 ms",
                "p95 ms",
                "dups",
                "worker CPU ms/item",
                "provider CPU ms/item",
                "PostgreSQL CPU ms/item",
            ],
            body,
        )
        + footer
    )
    if d.get("ratios"):
        text += "\n\n" + _dispatch_ratios(d["ratios"], limit, d)
    if d.get("sdk_ceiling"):
        text += "\n\n" + _ceiling_layouts(d["sdk_ceiling"])
    return text


def _median_cell(ratio: dict | None) -> str:
    if not ratio or ratio.get("median") is None:
        return "-"
    each = " / ".join("-" if x is None else f"{x:.2f}" for x in ratio["rounds"])
    return f"{ratio['median']:.2f}x ({each})"


def _dispatch_ratios(ratios: list[dict], limit, d: dict) -> str:
    cs = {r["latency_ms"]: r for r in d["countersign"]}
    body = [
        [
            f"{r['latency_ms']} ms",
            _median_cell(r.get("post_office_http")),
            _median_cell(r.get("sdk_ceiling")),
            _median_cell(r.get("post_office")),
            _ratio(cs[r["latency_ms"]]["per_s"], limit),
        ]
        for r in ratios
    ]
    return (
        "Countersign / peer, median of the rounds' own ratios (each round in run order)\n"
        + _table(
            [
                "provider latency",
                "vs post-office over HTTP",
                "vs SDK ceiling",
                "vs older peer post-office (no HTTP)",
                "vs older DB limit k=1",
            ],
            body,
        )
    )


def _ceiling_layouts(rows: list[dict]) -> str:
    body = [
        [
            f"{row['latency_ms']} ms",
            f"{layout['processes']} x {layout['threads']}",
            f"{layout['accepted']}/{layout['n']}",
            layout["per_s"],
            f"{layout['client_cpu_ms_per_send']:.2f}",
            layout["sandbox_cpu_ms_per_item"],
            layout["duplicates"],
        ]
        for row in rows
        for layout in row.get("layouts", [])
    ]
    return (
        "SDK ceiling: every layout tried (median round's run; processes x threads, one client "
        "per thread, keep-alive)\n"
        + _table(
            [
                "latency",
                "layout",
                "sent",
                "per s",
                "client CPU ms/send",
                "provider CPU ms/send",
                "dups",
            ],
            body,
        )
    )


def _labelled(d: dict):
    names = {
        "countersign": "Countersign",
        "post_office_http": "post-office over HTTP",
        "sdk_ceiling": "SDK ceiling",
        "post_office": "older post-office",
    }
    for system, name in names.items():
        for row in d.get(system, []):
            yield f"{name} @{row['latency_ms']} ms", row
    for row in d.get("db_limit", []):
        yield f"DB limit k={row['k']}", row


def _phases(p: dict) -> str:
    names = {
        "intent_claim": "claim (lease the batch, journal)",
        "intent_begin_attempts": "re-check, attempt rows, commit (the two below excluded)",
        "_lock_leased": "  re-check: the batch's locked read",
        "policy_problem": "  re-check: the contract check per intent",
        "intent_record_accepted": "record accepted sends, deferred webhooks",
    }
    body = [
        [label, f"{p['phases'][name]['cpu_ms']:.2f}", f"{p['phases'][name]['statements']:.2f}"]
        for name, label in names.items()
        if name in p["phases"]
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


def _http_cells(r: dict) -> list:
    """The cells every HTTP load row starts with: name, answered, rate, latency quantiles."""
    return [
        r["name"],
        f"{r['ok']}/{r['requests']}",
        r["per_s"],
        r["latency"]["p50_ms"],
        r["latency"]["p95_ms"],
        r["latency"]["p99_ms"],
    ]


def _webhooks(w: dict) -> str:
    rows = w["rows"]
    body = [[*_http_cells(r), r.get("stored", "-"), r.get("applied", "-")] for r in rows]
    text = (
        f"Webhook ingestion ({w['server']}; {w['concurrency']} connections; body "
        f"{w['body_bytes']} bytes; each row its median of {w.get('rounds', 1)} alternating rounds)\n"
        + _table(
            ["endpoint", "2xx", "per s", "p50 ms", "p95 ms", "p99 ms", "stored", "applied"], body
        )
    )
    for row in rows:
        for failed in row.get("not_2xx", []):
            text += (
                f"\nNot 2xx: {row['name'][:40]}…, round {failed['round']}: {failed['statuses']} "
                f"{[b['body'][:120] for b in failed['bodies']]}"
            )
    ours = next((r for r in rows if r.get("kind") == "ours"), None)
    if ours and "apply_lag" in ours:
        lag = ours["apply_lag"]
        text += (
            f"\nCountersign's events (applier running during the load): {ours['answered_2xx']} "
            f"answered 2xx, {ours['stored']} stored, states {ours['states']}; lost "
            f"{ours['lost']}, applied twice {ours['applied_twice']} ({ours['journal_rows']} "
            f"journal rows); apply lag p50 {lag['p50_ms']} ms, p95 {lag['p95_ms']} ms, max "
            f"{lag['max_ms']} ms; pending drained {ours['catch_up_after_load_s']} s after the "
            f"load; applier CPU {ours['applier_cpu_ms_per_event']} ms/event"
        )
    names = {
        "anymail_store": "storing anymail",
        "floor": "reference (verify + one INSERT)",
        "floor_machine": "reference under /webhooks/ (short chain, as ours)",
        "anymail": "older peer anymail (stores nothing)",
    }
    ratios = w.get("ratios") or {}
    if ratios:
        text += "\n\nCountersign / endpoint, median of the rounds' own ratios\n" + _table(
            ["vs", "ratio (rounds in run order)"],
            [[names[k], _median_cell(v)] for k, v in ratios.items() if k in names],
        )
    return text


def _scaling(s: dict) -> str:
    dispatch = [
        [
            r["workers"],
            f"{r['accepted']}/{r['n']}",
            r["per_s"],
            r["worker_cpu_ms_per_item"],
            r.get("sandbox_cpu_ms_per_item", "-"),
            r.get("postgres_cpu_ms_per_item") or "-",
            r["duplicates"],
        ]
        for r in s["dispatch"]
    ]
    text = "Scaling: Countersign dispatch @0 ms by worker processes (one run each)\n" + _table(
        [
            "worker processes",
            "sent",
            "per s",
            "worker CPU ms/item",
            "provider CPU ms/item",
            "PostgreSQL CPU ms/item",
            "dups",
        ],
        dispatch,
    )
    hooks = []
    for run in s["webhooks"]:
        by_kind = {r["kind"]: r for r in run["rows"]}
        ours = by_kind.get("ours", {})
        lag = ours.get("apply_lag", {})
        hooks.append(
            [
                run["http_workers"],
                by_kind.get("ours", {}).get("per_s"),
                by_kind.get("anymail_store", {}).get("per_s"),
                by_kind.get("floor", {}).get("per_s"),
                lag.get("p95_ms"),
                f"{ours.get('lost', '-')} / {ours.get('applied_twice', '-')}",
            ]
        )
    return (
        text + "\n\nScaling: webhook ingestion by gunicorn sync workers (one round each, applier "
        "running)\n"
        + _table(
            [
                "gunicorn workers",
                "Countersign per s",
                "storing anymail per s",
                "reference per s",
                "apply lag p95 ms",
                "lost / applied twice",
            ],
            hooks,
        )
    )


def _api(a: dict) -> str:
    body = [[*_http_cells(r), r.get("check", "")] for r in a["rows"]]
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
