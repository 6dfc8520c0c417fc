"""`python -m bench`: every row measured side by side in one run; one table, one JSON file.

    python -m bench                 # the full run recorded in BENCHMARKS.md
    python -m bench --quick         # tiny sizes: proves the harness works (used by tests/bench)
    python -m bench --only dispatch,webhooks --n 500 --workers 4

Loopback only: the sandbox AgentMail, gunicorn and the load generator all bind 127.0.0.1.
Bounded: every phase has a count and a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import (
    PEERS,
    PRODUCT,
    REPO_ROOT,
    RESULTS_DIR,
    clone_database,
    drop_databases,
    ensure_databases,
)

# Webhook events per endpoint: 5 rounds of 6,000 (about 7 s per endpoint and round here).
# Rounds of 1,000 lasted a second or two and their ratios moved by up to 0.4 (BENCHMARKS.md).
DEFAULT_EVENTS = 30000
SCENARIOS = ("dispatch", "phases", "webhooks", "scaling", "api", "ui", "recovery")


def run_task(settings_module: str, target: str, params: dict, env: dict, timeout: float) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    started = time.monotonic()
    try:
        subprocess.run(
            [sys.executable, "-m", "bench.task", settings_module, target, json.dumps(params), out],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            timeout=timeout,
        )
        with open(out) as fh:
            result = json.load(fh)
        result["task_seconds"] = round(time.monotonic() - started, 1)
        print(f"  {target}: {result['task_seconds']} s", file=sys.stderr)
        return result
    finally:
        os.unlink(out)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, to prove the harness works")
    p.add_argument(
        "--template",
        help="start the product database as a copy of this migrated database (no one connected "
        "to it) instead of migrating; the suite passes its own migrated template",
    )
    p.add_argument(
        "--only", default=",".join(SCENARIOS), help="comma list of " + ", ".join(SCENARIOS)
    )
    p.add_argument("--n", type=int, help="intents per dispatch row (default 2000; quick 40)")
    p.add_argument("--workers", type=int, default=4, help="worker processes for dispatch rows")
    p.add_argument(
        "--batch",
        type=int,
        default=None,
        help="intents claimed per worker round (default: the product's SEND_BATCH_SIZE)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of every dispatch row, alternating; each row reports its median (quick: 1)",
    )
    p.add_argument(
        "--webhook-rounds",
        type=int,
        default=5,
        help="rounds of the webhook endpoints, each starting one endpoint later, so that with "
        "5 (the default) each endpoint runs once in each place; each row reports its median "
        "(quick: 3)",
    )
    p.add_argument("--latencies", default="0,50", help="provider latencies in ms")
    p.add_argument(
        "--events",
        type=int,
        help=f"webhook events per endpoint, over all rounds (default {DEFAULT_EVENTS})",
    )
    p.add_argument("--requests", type=int, help="agent API requests per row (default 1000)")
    p.add_argument("--concurrency", type=int, default=8, help="load generator connections")
    p.add_argument("--http-workers", type=int, default=3, help="gunicorn worker processes")
    p.add_argument(
        "--ui-sizes", help="pending drafts for the review UI rows (default 100,10000,100000)"
    )
    p.add_argument("--outage", type=float, help="recovery: outage seconds (default 24)")
    p.add_argument("--profile", action="store_true", help="pyinstrument profile of one worker")
    p.add_argument("--db-prefix", default="bench", help="database name prefix (default bench)")
    p.add_argument("--out", help="JSON path (default bench/results/<timestamp>.json)")
    p.add_argument("--note", default="", help="free text stored in the JSON (e.g. machine load)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    quick = args.quick
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SCENARIOS)
    if unknown:
        print(f"unknown scenario(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    n = args.n or (20 if quick else 2000)
    latencies = [int(x) for x in args.latencies.split(",") if x.strip()]
    product_db, peers_db = args.db_prefix, f"{args.db_prefix}_peers"
    if args.template:
        drop_databases(product_db, peers_db)
        clone_database(args.template, product_db)
    else:
        ensure_databases(product_db)
    env = {
        **os.environ,
        "BENCH_DB_NAME": product_db,
        "BENCH_PEERS_DB_NAME": peers_db,
        "COUNTERSIGN_ENV": os.environ.get("COUNTERSIGN_ENV", "development"),
        "PYTHONPATH": str(REPO_ROOT),
    }
    started = time.time()

    def migrate(settings_module: str) -> bool:
        return (
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                cwd=REPO_ROOT,
                env={**env, "DJANGO_SETTINGS_MODULE": settings_module},
                timeout=600,
            ).returncode
            == 0
        )

    # The peers' database is the product's schema plus post-office's and anymail's tables: a new
    # one starts as a copy of the migrated product database, so only those migrations run on it
    # (two whole migrations of the schema were most of a --quick run).
    if not args.template and not migrate(PRODUCT):
        print("migrate failed", file=sys.stderr)
        return 1
    clone_database(product_db, peers_db)
    if not migrate(PEERS):
        print("migrate failed", file=sys.stderr)
        return 1
    RESULTS_DIR.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    profile_dir = str(RESULTS_DIR / f"profile-{stamp}") if args.profile else None
    if profile_dir:
        os.makedirs(profile_dir, exist_ok=True)
    print(f"  migrate: {time.time() - started:.1f} s", file=sys.stderr)
    results: dict = {
        "started": stamp,
        "args": vars(args),
        "machine": machine(),
        "note": args.note,
        "rows": {},
    }

    def task(settings_module, target, params, timeout=900):
        return run_task(settings_module, target, params, env, timeout)

    if "dispatch" in only:
        results["rows"]["dispatch"] = dispatch_rows(task, args, n, latencies, profile_dir)
    if "phases" in only:
        results["rows"]["phases"] = task(
            PRODUCT, "bench.phases:run", {"n": 40 if quick else 1000, "batch": args.batch}
        )
    http = {"concurrency": args.concurrency, "http_workers": args.http_workers}
    if "webhooks" in only:
        events = args.events or (60 if quick else DEFAULT_EVENTS)
        rounds = {} if quick else {"rounds": args.webhook_rounds}
        results["rows"]["webhooks"] = task(
            PEERS, "bench.webhooks:scenario", {**http, "events": events, **rounds}
        )
    if "scaling" in only:
        results["rows"]["scaling"] = scaling_rows(task, args, n, http)
    if "api" in only:
        requests = args.requests or (40 if quick else 1000)
        results["rows"]["api"] = task(
            PRODUCT, "bench.agent_api:scenario", {**http, "requests": requests}
        )
    if "ui" in only:
        sizes = args.ui_sizes or ("100,1000" if quick else "100,10000,100000")
        results["rows"]["ui"] = task(
            PRODUCT, "bench.ui:run", {"sizes": [int(s) for s in sizes.split(",")]}, timeout=1800
        )
    if "recovery" in only:
        outage = args.outage or (3.0 if quick else 24.0)
        results["rows"]["recovery"] = [
            task(PRODUCT, "bench.recovery:run", {"outage_s": outage, "quick": quick}, timeout=900)
        ]
    results["seconds"] = round(time.time() - started, 1)
    results["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    path = Path(args.out).resolve() if args.out else RESULTS_DIR / f"{stamp}.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    from bench.report import render

    print(render(results))
    print(f"\nJSON: {path}")
    return 0


def dispatch_rows(task, args, n, latencies, profile_dir) -> dict:
    """Every dispatch row, `--rounds` times, the systems alternating within each round so that
    the machine's drift falls on all of them alike; each row reports its median round, and each
    ratio is the median of the rounds' own ratios (Countersign / peer within one round)."""
    rows: dict = {
        "countersign": [],
        "post_office": [],
        "post_office_http": [],
        "sdk_ceiling": [],
        "db_limit": [],
        "ratios": [],
    }
    common = {"n": n, "workers": args.workers}
    rounds = 1 if args.quick else args.rounds
    for latency in latencies:
        runs: dict[str, list] = {s: [] for s in PEERS_OF_DISPATCH}
        for number in range(rounds):
            for system, settings_module, target, extra in _dispatch_systems(args, latency):
                if system == "countersign":
                    extra = {
                        **extra,
                        "profile_dir": profile_dir if latency == 0 and number == 0 else None,
                    }
                runs[system].append(
                    task(settings_module, target, {**common, "latency_ms": latency, **extra})
                )
        for system, results in runs.items():
            rows[system].append(median_round(results))
        rows["ratios"].append({"latency_ms": latency, **median_ratios(runs)})
    for k in (1,) if args.quick else (1, 10):
        rows["db_limit"].append(
            median_round(
                [
                    task(PRODUCT, "bench.dispatch:db_limit", {**common, "k": k})
                    for _ in range(rounds)
                ]
            )
        )
    return rows


def scaling_rows(task, args, n, http) -> dict:
    """How cost grows with work on this machine: Countersign's dispatch at 0 ms with 1, 2 and 4
    worker processes, and webhook ingestion (ours with the applier running, storing anymail, the
    reference) with 1, 2 and 3 gunicorn workers; one round per point."""
    processes = (1, 2) if args.quick else (1, 2, 4)
    dispatch = [
        task(
            PRODUCT,
            "bench.dispatch:countersign",
            {
                "n": n,
                "workers": w,
                "latency_ms": 0,
                "batch": args.batch,
                "mailboxes": 1 if args.quick else 4,
            },
        )
        for w in processes
    ]
    events = args.events or (60 if args.quick else DEFAULT_EVENTS)
    webhooks = [
        task(
            PEERS,
            "bench.webhooks:scenario",
            {
                **http,
                "http_workers": w,
                "events": max(1, events // 2),
                "rounds": 1,
                "endpoints": ["ours", "anymail_store", "floor"],
            },
        )
        for w in ((1, 2) if args.quick else (1, 2, 3))
    ]
    return {"dispatch": dispatch, "webhooks": webhooks}


PEERS_OF_DISPATCH = ("countersign", "post_office", "post_office_http", "sdk_ceiling")


def _dispatch_systems(args, latency: int):
    """(system, settings, task, extra params) of one round, in the order they alternate."""
    from bench.ceiling import LATENCY_LAYOUTS, LAYOUTS, QUICK_LAYOUTS

    layouts = QUICK_LAYOUTS if args.quick else (LAYOUTS if latency == 0 else LATENCY_LAYOUTS)
    mailboxes = 1 if args.quick else 4
    return (
        (
            "countersign",
            PRODUCT,
            "bench.dispatch:countersign",
            {"batch": args.batch, "mailboxes": mailboxes},
        ),
        ("post_office", PEERS, "bench.dispatch:postoffice", {}),
        ("post_office_http", PEERS, "bench.dispatch:postoffice_http", {}),
        (
            "sdk_ceiling",
            PRODUCT,
            "bench.ceiling:sdk_ceiling",
            {"layouts": [list(x) for x in layouts], "mailboxes": mailboxes},
        ),
    )


def median_ratios(runs: dict[str, list[dict]]) -> dict:
    """Countersign's rate over each peer's, round by round; the median of those, and each."""
    ours = [r["per_s"] or 0 for r in runs["countersign"]]
    out = {}
    for system, results in runs.items():
        if system == "countersign":
            continue
        each = [
            round(a / b["per_s"], 3) if b["per_s"] else None
            for a, b in zip(ours, results, strict=True)
        ]
        known = sorted(x for x in each if x is not None)
        out[system] = {
            "median": known[(len(known) - 1) // 2] if known else None,
            "rounds": each,
        }
    return out


def median_round(results: list[dict]) -> dict:
    """The round with the median rate (the lower middle of an even count), with every round's
    rate in run order and the duplicates of all rounds added up: a duplicate in any round must
    show."""
    chosen = dict(sorted(results, key=lambda r: r["per_s"] or 0)[(len(results) - 1) // 2])
    chosen["rounds_per_s"] = [r["per_s"] for r in results]
    chosen["duplicates_all_rounds"] = sum(r["duplicates"] for r in results)
    return chosen


def machine() -> dict:
    load = os.getloadavg()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in load],
    }
