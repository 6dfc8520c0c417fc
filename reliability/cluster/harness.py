"""The harness inside the `ctl` host: start every host's processes, feed approvals, inject faults,
drain, check the history (reliability.nemesis.check) and count per host."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from reliability import nemesis
from reliability.cluster import hosts as h
from reliability.cluster import netns
from reliability.cluster.faults import Nemesis, delays_held, uncertain_by_fault
from reliability.cluster.netns import Host

LEASE_SECONDS = 3
SANDBOX_CONFIG = {
    "auto_deliver": True,
    "auto_deliver_delay": 0.05,
    "webhook_retry_schedule": [0.2, 0.5, 1, 2, 4, 8, 15, 30, 60],
    "webhook_disable_after": 1_000_000,
    "webhook_timeout": 10,
}


def app_env(hosts: dict[str, Host], database_url: str, redis_url: str, sandbox) -> dict[str, str]:
    db = hosts["db"].address
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "DB_PGBOUNCER": "true",
        "Q_REDIS_URL": redis_url,
        "COUNTERSIGN_ENV": "development",
        "DEBUG": "false",
        "ALLOWED_HOSTS": ",".join(x.address for n, x in hosts.items() if n.startswith("web")),
        "AGENTMAIL_BASE_URL": sandbox.base_url,
        "AGENTMAIL_ORG_API_KEY": sandbox.org_key,
        "PUBLIC_BASE_URL": h.url(hosts["web1"]),
        "SEND_LEASE_SECONDS": str(LEASE_SECONDS),
        "SEND_BACKOFF_BASE_SECONDS": "0.2",
        "SEND_BACKOFF_CAP_SECONDS": "2",
        "SEND_MAX_ATTEMPTS": "50",
        "SEND_RATE_PER_KEY": "1000",
        "SEND_BURST_PER_KEY": "1000",
        "AGENTMAIL_CONNECT_TIMEOUT": "1",
        "AGENTMAIL_READ_TIMEOUT": "2",
        "Q_WORKERS": "1",
        "Q_POLL": "0.2",
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        "CLUSTER_DB_HOST": db,
    }


def wait_http(url: str, *, timeout: float) -> None:
    """The first request loads the whole app: on a busy machine, many seconds."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=30, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.5)
    raise SystemExit(f"cluster: {url} did not come up in {timeout} s")


def prepare(n: int, seed: int, webs: list[Host]):
    """Two tenants, each with its webhook on its own web host, two mailboxes each, n drafts."""
    from django.db import connections
    from django.test import override_settings

    from intents.models import DraftVersion
    from intents.services import draft_create
    from mailboxes.provisioning import mailbox_create
    from tenants.models import Membership, Tenant, User

    plan = []
    for label, web in zip(("north", "south"), webs, strict=False):
        tenant = Tenant.objects.create(
            name=f"Cluster {label}", slug=f"cluster-{label}-{seed}", send_hold_seconds=0
        )
        approver = User.objects.create_user(f"approver-{label}-{seed}@cluster.test", None)
        Membership.objects.create(user=approver, tenant=tenant, role=Membership.Role.APPROVER)
        with override_settings(PUBLIC_BASE_URL=h.url(web)):
            mailboxes = [
                mailbox_create(tenant=tenant, username=f"cl-{label}-{seed}-{i}") for i in range(2)
            ]
        plan.append((tenant, approver, mailboxes))

    def one(i: int):
        tenant, approver, mailboxes = plan[i % len(plan)]
        draft = draft_create(
            tenant=tenant,
            actor_user=approver,
            mailbox=mailboxes[i % len(mailboxes)],
            to=[f"customer{i}@example.com"],
            cc=[f"copy{i}@example.org"] if i % 7 == 0 else [],
            subject=f"Re: ticket {i}",
            text=f"Hello customer {i}, here is your answer.",
        )
        version = DraftVersion.objects.get(draft=draft, number=draft.current_version)
        return (tenant, approver, draft.pk, version.number, version.content_hash)

    def chunk(indexes: range):
        try:
            return [one(i) for i in indexes]
        finally:
            connections.close_all()

    # Several threads: each draft is a few round trips through PgBouncer, mostly waiting.
    with ThreadPoolExecutor(max_workers=6) as pool:
        parts = pool.map(chunk, [range(k, n, 6) for k in range(6)])
    by_index = {}
    for k, part in enumerate(parts):
        for j, row in enumerate(part):
            by_index[k + 6 * j] = row
    return [by_index[i] for i in range(n)]


def wait_connected(hosts: dict[str, Host], *, timeout: float) -> float:
    """Seconds until every worker host holds a connection to PgBouncer (its sender is up)."""
    db = f"{hosts['db'].address}:{h.BOUNCER_PORT}"
    workers = [x for n, x in hosts.items() if re.fullmatch(r"w\d+", n)]
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if all(
            netns.in_ns(
                x.netns, "ss", "-Htn", "state", "established", "dst", db, check=False
            ).stdout.strip()
            for x in workers
        ):
            break
        time.sleep(0.5)
    return round(time.monotonic() - began, 1)


def send_rate(sandbox) -> float | None:
    """Sends per second at the provider, first to last accepted send (its ledger's clock)."""
    times = sorted(nemesis._epoch(send["at"]) for send in sandbox.ledger())
    if len(times) < 2 or times[-1] == times[0]:
        return None
    return round((len(times) - 1) / (times[-1] - times[0]), 1)


def per_host(sandbox, webs: list[Host]) -> dict:
    """Attempts and final sends by worker host, webhook deliveries by web host."""
    from intents.models import SendAttempt, SendIntent
    from webhooks.models import WebhookEndpoint

    attempts = Counter(
        w.split(":", 1)[0] for w in SendAttempt.objects.values_list("worker", flat=True)
    )
    accepted_by = Counter(
        (owner or "").split(":", 1)[0]
        for owner in SendAttempt.objects.filter(
            intent__state="accepted", outcome="accepted"
        ).values_list("worker", flat=True)
    )
    # prepare() puts each "north" tenant's webhook on the first web host, "south" on the second.
    web_of = {
        e.provider_webhook_id: webs[0 if "-north-" in e.tenant.slug else -1].name
        for e in WebhookEndpoint.objects.select_related("tenant")
    }
    deliveries: Counter = Counter()
    for attempt in sandbox.deliveries():
        ok = attempt.get("status_code") and 200 <= attempt["status_code"] < 300
        deliveries[f"{web_of.get(attempt['webhook_id'], '?')} {'2xx' if ok else 'failed'}"] += 1
    return {
        "attempts_by_worker_host": dict(attempts),
        "accepted_sends_recorded_by": dict(accepted_by),
        "webhook_attempts_by_web_host": dict(deliveries),
        "open_intents": SendIntent.objects.exclude(state__in=nemesis.FINAL_OK).count(),
    }


def supervise(
    procs: h.Processes, stop: threading.Event, restarts: Counter, paused: set[str]
) -> None:
    """Restart a worker host's process that exited (a crash on a lost database, say), as an init
    system would; not one that a rolling restart is stopping on purpose (`paused`)."""
    while not stop.wait(1.0):
        for proc in list(procs.procs):
            if proc.name in paused or not re.fullmatch(r"w\d+-\w+", proc.name):
                continue
            if proc.popen.poll() is not None and procs.restart(proc) is not None:
                restarts[proc.name] += 1


# How long each kind of process may take to stop before it is killed: the sender's provider
# call (2 s read timeout here) and two commits; gunicorn's graceful timeout (config/gunicorn.py)
# plus its start-up margin; django-q2 finishes the task it runs (a sweep may run for a while).
STOP_TIMEOUT = {"sender": 30.0, "qcluster": 60.0, "gunicorn": 40.0}


def rolling_restart(
    procs: h.Processes, hosts: dict[str, Host], args, paused: set[str], report: dict
) -> None:
    """Once sending is under way, stop (SIGTERM) and start again every worker host, then every
    web host, one by one; the next host only after the previous one is back (a web host answers
    /healthz again), as an operator's rolling deploy would."""
    from django.db import connections

    from intents.models import SendIntent

    began = time.monotonic()
    accepted = SendIntent.objects.filter(state="accepted").count
    while accepted() < max(5, args.intents // 50) and time.monotonic() - began < 300:
        time.sleep(0.5)
    report["began_at_s"] = round(time.monotonic() - began, 1)
    order = [n for n in hosts if re.fullmatch(r"w\d+", n)] + [
        n for n in hosts if n.startswith("web")
    ]
    steps = []
    for name in order:
        step: dict = {"host": name, "at_s": round(time.monotonic() - began, 1)}
        step["accepted_before"] = accepted()
        # Its application processes (a web host's relay, if any, stays: it is the network).
        mine = [
            p
            for p in list(procs.procs)
            if p.name.startswith(f"{name}-") and p.name.split("-", 1)[1] in STOP_TIMEOUT
        ]
        paused.update(p.name for p in mine)
        try:
            for proc in mine:
                kind = proc.name.split("-", 1)[1]
                step[kind] = procs.stop_gracefully(proc, timeout=STOP_TIMEOUT[kind])
            step["accepted_while_down"] = accepted() - step["accepted_before"]
            for proc in mine:
                procs.restart(proc)
            if name.startswith("web"):
                try:
                    wait_http(f"{h.url(hosts[name])}/healthz", timeout=args.rolling_web_timeout)
                except SystemExit as exc:
                    # Recorded, not raised: a SystemExit ends this thread without a word.
                    step["error"] = str(exc)
        finally:
            paused.difference_update(p.name for p in mine)
        step["back_after_s"] = round(time.monotonic() - began - step["at_s"], 1)
        steps.append(step)
        print(f"cluster: rolling restart {json.dumps(step)}", flush=True)
        time.sleep(args.rolling_pause)
    connections.close_all()
    report["steps"] = steps


def broker_outage(procs: h.Processes, args, outage: dict) -> None:
    """Redis stopped (memory only: its queue is gone) for args.broker_down seconds once sending
    is under way; the senders' sweep must keep sending meanwhile."""
    from intents.models import SendIntent

    began = time.monotonic()
    accepted = SendIntent.objects.filter(state="accepted").count
    # Once sending is under way (a tenth of the intents, or half the fault window at most).
    while accepted() < max(5, args.intents // 10) and time.monotonic() - began < 300:
        time.sleep(0.5)
    redis = next(p for p in procs.procs if p.name == "broker-redis")
    outage["accepted_before"] = accepted()
    procs.stop(redis)
    outage["stopped_at_s"] = round(time.monotonic() - began, 1)
    time.sleep(args.broker_down)
    outage["accepted_while_down"] = accepted() - outage["accepted_before"]
    procs.restart(redis)
    h.wait_redis(redis.host)
    outage["down_seconds"] = args.broker_down


def inner(args: argparse.Namespace, hosts: dict[str, Host], results: Path) -> int:
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    rng = random.Random(seed)
    folder = h.ROOT / ".data" / f"cluster-{args.inner}"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    procs = h.Processes(folder=folder)
    # Faults on: PgBouncer, Redis, the sandbox and gunicorn behind relays that can delay a link.
    delays = None if args.no_faults else folder / "link-delays.json"
    nem = Nemesis(hosts=hosts, rng=rng, interval=args.fault_interval, delays_file=delays)

    def terminate(signum, frame):
        raise SystemExit(f"cluster: stopped by signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    started = time.monotonic()
    try:
        if args.scaling:
            from reliability.cluster.scaling import scale

            result = scale(args, hosts, procs, seed, started)
        else:
            result = _run(args, hosts, procs, nem, seed, started)
    finally:
        nem.heal_all()
        procs.stop_all()
        from django.conf import settings

        if settings.configured:
            from django.db import connections

            connections.close_all()
    nemesis.print_table(result)
    if args.scaling:
        from reliability.cluster.scaling import print_scaling

        print_scaling(result["scaling"])
    print("per host: " + json.dumps(result["per_host"]))
    for name, kinds in result["faults_by_host"].items():
        held = result["delays_held_by_host"].get(name)
        print(f"faults on {name}: {json.dumps(kinds)}" + (f"; relays held {held}" if held else ""))
    if result.get("uncertain_by_active_fault"):
        print("went uncertain during: " + json.dumps(result["uncertain_by_active_fault"]))
    if nem.log:
        print("fault notes: " + "; ".join(dict.fromkeys(nem.log)))
    results.mkdir(parents=True, exist_ok=True)
    path = args.json or results / f"cluster-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"JSON: {path}")
    ok = (result["lost"], result["duplicated"], result["unexpected"]) == (0, 0, 0)
    ok = ok and result["webhook_events_acknowledged_but_missing"] == 0
    if args.rolling:
        steps = result["rolling_restart"].get("steps", [])
        # Every host was restarted, and every sender and web host stopped by itself, with 0.
        restartable = [n for n in hosts if n.startswith("web") or re.fullmatch(r"w\d+", n)]
        ok = ok and len(steps) == len(restartable)
        ok = ok and not any("error" in step for step in steps)
        ok = ok and all(
            step[kind]["exit"] == 0 and not step[kind]["killed"]
            for step in steps
            for kind in ("sender", "gunicorn")
            if kind in step
        )
    return 0 if ok and result["webhook_events_applied_twice"] == 0 else 1


def setup(args, hosts, procs: h.Processes, delays: Path | None, seed: int):
    """Every host but the worker hosts up, the database migrated, Django set up here.
    Returns the application's environment, the sandbox and the web hosts."""
    admin = h.start_database(procs, hosts["db"], delays)
    database_url = nemesis.scratch_database(admin, h.DATABASE).replace(
        f":{h.PG_PORT}/", f":{h.BOUNCER_PORT}/"
    )
    redis_url = h.start_broker(procs, hosts["broker"], delays)
    sandbox = h.start_provider(procs, hosts["provider"], SANDBOX_CONFIG, delays)
    env = app_env(hosts, database_url, redis_url, sandbox)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import logging

    from django.core.management import call_command

    logging.disable(logging.ERROR)  # the harness's own enqueue errors during a broker partition
    print(
        f"cluster: seed {seed}; hosts {', '.join(f'{n}={x.address}' for n, x in hosts.items())}",
        flush=True,
    )
    call_command("migrate", verbosity=0)
    webs = [x for n, x in hosts.items() if n.startswith("web")]
    for web in webs:
        h.start_web(procs, web, env, delays)
    for web in webs:
        wait_http(f"{h.url(web)}/healthz", timeout=180)
    return env, sandbox, webs


def _run(args, hosts, procs: h.Processes, nem: Nemesis, seed: int, started: float) -> dict:
    env, sandbox, webs = setup(args, hosts, procs, nem.delays_file, seed)
    drafts = prepare(args.intents, seed, webs)
    run = nemesis.Run(args=args)
    approved_at: dict[int, float] = {}
    restarts: Counter = Counter()
    paused: set[str] = set()
    supervisor_stop = threading.Event()
    if args.throughput:
        # Everything approved first, then the workers start: the rate is theirs, not the feed's.
        nemesis.feed(run, drafts, approved_at, args.approvers)
    for name, worker in hosts.items():
        if re.fullmatch(r"w\d+", name):
            h.start_worker_host(procs, worker, env)
    threading.Thread(
        target=supervise, args=(procs, supervisor_stop, restarts, paused), daemon=True
    ).start()
    feeder = threading.Thread(target=nemesis.feed, args=(run, drafts, approved_at, args.approvers))
    feeder.start()
    # The fault window opens once every worker host runs: on a loaded machine a worker host
    # takes tens of seconds to start, and a fault on a host that is still importing Django tests
    # nothing.
    ready_after = wait_connected(hosts, timeout=300)
    t0 = time.monotonic()
    fault_thread = threading.Thread(target=nem.run, daemon=True)
    if not args.no_faults:
        nem.started = t0
        fault_thread.start()
    outage: dict = {}
    if args.broker_down:
        threading.Thread(target=broker_outage, args=(procs, args, outage), daemon=True).start()
    rolling: dict = {}
    roller = threading.Thread(
        target=rolling_restart, args=(procs, hosts, args, paused, rolling), daemon=True
    )
    if args.rolling:
        roller.start()
    while time.monotonic() - t0 < args.fault_seconds:
        time.sleep(0.5)
    nem.stop.set()
    if fault_thread.is_alive():
        fault_thread.join(timeout=120)
    nem.heal_all()
    faults_stopped = time.monotonic()
    feeder.join()
    approvals_done = time.monotonic()
    if roller.is_alive():
        roller.join(timeout=900)
    drain_seconds = nemesis.drain(run, args.drain_seconds)
    drained = time.monotonic()
    supervisor_stop.set()
    settled = nemesis.settle_webhooks(sandbox, timeout=180)
    from webhooks.services.apply import events_replay_pending

    events_replay_pending()
    result = nemesis.check(run, sandbox, approved_at)
    result.update(
        {
            "seed": seed,
            "workers": args.workers,
            "worker_hosts": args.workers,
            "fault_seconds": 0 if args.no_faults else args.fault_seconds,
            "faults_injected": dict(nem.injected),
            "faults_by_host": {name: dict(c) for name, c in sorted(nem.by_host.items())},
            "delays_held_by_host": delays_held(procs.folder, hosts),
            "uncertain_by_active_fault": uncertain_by_fault(nem.spans, LEASE_SECONDS + 2),
            "fault_errors": list(dict.fromkeys(nem.log))[:10],
            "fault_timeline": nem.timeline,
            "drain_seconds_after_faults": round(drain_seconds, 2),
            "webhook_deliveries_settled": settled,
            "total_seconds": round(time.monotonic() - started, 1),
            "worker_hosts_connected_after_s": ready_after,
            "faults_stopped_at_s": round(faults_stopped - t0, 1),
            "approvals_done_at_s": round(approvals_done - t0, 1),
            "sends_per_second": round(result["accepted"] / max(0.001, drained - t0), 1),
            "per_host": per_host(sandbox, webs),
            "provider_sends_per_second": send_rate(sandbox),
            "broker_outage": outage,
            "worker_processes_restarted": dict(restarts),
            "rolling_restart": _rolling_summary(rolling) if args.rolling else {},
        }
    )
    return result


def _rolling_summary(rolling: dict) -> dict:
    """The restart's steps, and what the journal says about leases: handed back by a stopping
    worker, or left to expire (the sweep took them over; with graceful stops and no faults the
    aim is none)."""
    from intents.models import IntentEvent

    swept = IntentEvent.objects.filter(
        actor_kind=IntentEvent.Actor.SWEEP,
        action__in=("intent.lease_expired", "intent.uncertain", "intent.reconcile_pending"),
    )
    return {
        **rolling,
        "handed_back": IntentEvent.objects.filter(action="intent.handed_back").count(),
        "leases_expired": swept.count(),
    }
