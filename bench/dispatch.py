"""Dispatch: approved intents sent end to end, next to django-post-office and the database's limit.

All three drain the same number of items with the same number of worker processes, released at
the same instant (t0) after the queue is filled:

- Countersign: the send worker's own loop (`intents.sending.worker.run_rounds`, as the
  `intents_worker` command and the django-q `drain` task run it; `"loop": "once"` runs
  `run_once` instead, one batch at a time, as both did before the rounds) against the sandbox AgentMail
  over real HTTP; every send carries its idempotency key; duplicates come from the sandbox ledger.
- django-post-office: `send_queued_mail_until_done(processes=W)` (what `send_queued_mail
  --processes W` runs) through bench.backends.SleepBackend with the same latency.
- django-post-office over HTTP (an additional row, not the one the target ratios use): the same
  drain through bench.backends.AgentMailBackend, the official SDK against the same sandbox
  AgentMail as Countersign, as a team would really deploy post-office; duplicates come from the
  sandbox ledger.
- Database limit: the same claim-and-complete pattern in raw SQL on a scratch table
  (`UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT k) RETURNING`, then one
  fenced completion per row, each its own transaction).
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from collections import Counter

from bench.common import (
    Timer,
    approved_intents,
    latency_summary,
    make_tenant,
    postgres_cpu,
    provision_mailboxes,
    reset_tables,
    vacuum_analyze,
)

CTX = multiprocessing.get_context("fork")


def children_cpu(*, include_self: bool = False) -> float:
    """CPU seconds (user + system) of this process's reaped children (the worker processes),
    plus this process's own when it does the work itself (post-office's parent)."""
    import resource

    total = 0.0
    for who in (
        (resource.RUSAGE_CHILDREN, resource.RUSAGE_SELF)
        if include_self
        else (resource.RUSAGE_CHILDREN,)
    ):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def _per_item(before: float | None, after: float | None, n: int) -> float | None:
    if before is None or after is None:
        return None
    return round((after - before) * 1000 / max(1, n), 2)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- Countersign ---------------------------------------------------------------------------------


def _configure_sending(sandbox) -> None:
    from django.conf import settings

    settings.AGENTMAIL_BASE_URL = sandbox.base_url
    settings.AGENTMAIL_ORG_API_KEY = sandbox.org_key
    # Deliveries from the sandbox go nowhere (port 9 refuses); webhooks are measured separately.
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:9"


def _sandbox_tenant(sandbox, mailboxes: int):
    """Sending pointed at `sandbox`, tables emptied, one tenant with `mailboxes` inboxes and keys
    provisioned for real at the sandbox; returns (tenant, user, mailboxes)."""
    _configure_sending(sandbox)
    reset_tables()
    tenant, user = make_tenant()
    return tenant, user, provision_mailboxes(tenant, mailboxes, sandbox)


def _warm_up() -> None:
    """What a long-running worker has already paid for: imports, its connection, its HTTP pool."""
    from django.db import connection

    from mailboxes import provider

    connection.ensure_connection()
    provider.client.sdk("warm-up")
    worker_module = __import__("intents.sending.worker", fromlist=["run_once"])
    assert worker_module


def _cs_worker(
    index: int, batch: int, threads: int, go, stop, profile_dir: str | None, loop_kind: str
) -> None:
    """One worker process: `threads` loops of `run_rounds` (or of `run_once`), as
    `manage.py intents_worker` runs."""
    import threading

    from django.db import connections

    from intents.sending.worker import run_once, run_rounds

    def loop(name: str, profile: bool) -> None:
        profiler = None
        if profile:
            from pyinstrument import Profiler

            profiler = Profiler(interval=0.0005, async_mode="disabled")
        try:
            _warm_up()
            ready.wait()
            if profiler:
                profiler.start()
            while not stop.is_set():
                if loop_kind == "once":
                    sent = run_once(worker=name, limit=batch)
                else:
                    sent = run_rounds(worker=name, limit=batch, stopping=stop.is_set)
                if not sent:
                    # Nothing due (the tail of a run): a short idle poll, so the CPU per item
                    # measures the work rather than spinning (intents_worker polls every 0.2 s).
                    time.sleep(0.02)
        finally:
            if profiler:
                profiler.stop()
                with open(os.path.join(profile_dir, "dispatch-worker0.txt"), "w") as fh:
                    fh.write(profiler.output_text(unicode=False, color=False, show_all=False))
                with open(os.path.join(profile_dir, "dispatch-worker0.html"), "w") as fh:
                    fh.write(profiler.output_html())
            connections.close_all()

    ready = threading.Event()
    pool = [
        threading.Thread(
            target=loop,
            args=(f"bench-{index}-{t}", bool(profile_dir) and index == 0 and t == 0),
            daemon=True,
        )
        for t in range(threads)
    ]
    for thread in pool:
        thread.start()
    go.wait()
    ready.set()
    for thread in pool:
        thread.join()


def start_workers(
    *, workers: int, batch: int, threads: int = 1, profile_dir=None, loop_kind: str = "rounds"
):
    """Fork `workers` worker processes waiting on `go`; returns (procs, go, stop)."""
    # Imports happen before the fork, as in a long-running worker: the children's CPU time then
    # measures sending, not importing the SDK.
    import agentmail  # noqa: F401
    from django.db import connections

    from intents.sending import worker  # noqa: F401
    from mailboxes import provider  # noqa: F401

    connections.close_all()  # never fork with an open connection
    go, stop = CTX.Event(), CTX.Event()
    procs = [
        CTX.Process(
            target=_cs_worker,
            args=(i, batch, threads, go, stop, profile_dir, loop_kind),
            daemon=True,
        )
        for i in range(workers)
    ]
    for proc in procs:
        proc.start()
    time.sleep(0.3)  # let every child reach go.wait()
    return procs, go, stop


def stop_workers(procs, stop) -> None:
    stop.set()
    for proc in procs:
        proc.join(10)
        if proc.is_alive():
            proc.kill()


def run_workers(
    *,
    workers: int,
    batch: int,
    done,
    timeout: float,
    threads: int = 1,
    profile_dir=None,
    loop_kind: str = "rounds",
) -> float:
    """Release the workers together and stop them once `done()` (polled here) is True.

    Returns t0, the release instant (epoch seconds).
    """
    procs, go, stop = start_workers(
        workers=workers,
        batch=batch,
        threads=threads,
        profile_dir=profile_dir,
        loop_kind=loop_kind,
    )
    t0 = time.time()
    go.set()
    deadline = time.monotonic() + timeout
    try:
        while not done() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop_workers(procs, stop)
    return t0


def countersign(params: dict) -> dict:
    from django.conf import settings
    from django.db.models import Max

    from intents.models import SendIntent
    from mailboxes.sandbox.testing import SandboxServer

    n, workers, latency = params["n"], params["workers"], params["latency_ms"]
    # The per-key token bucket is configuration (AgentMail's real limits are per account); here
    # it is opened wide, as post-office has none, so the row measures the pipeline itself.
    settings.SEND_RATE_PER_KEY = float(params.get("rate_per_key", 1e6))
    settings.SEND_BURST_PER_KEY = float(params.get("rate_per_key", 1e6))
    with SandboxServer(config={"auto_deliver": False}) as sandbox:
        tenant, user, boxes = _sandbox_tenant(sandbox, params.get("mailboxes", 4))
        with Timer() as approve_timer:
            ids = approved_intents(tenant, user, boxes, n)
        vacuum_analyze("intents_sendintent", "intents_draft", "intents_draftversion")
        sandbox.config(latency_ms=latency)
        terminal = list(SendIntent.TERMINAL)

        def done() -> bool:
            # Every intent in the (freshly reset) table is this row's. Cheap on purpose: the
            # poll shares the cores with the workers; the end time comes from the rows.
            return not SendIntent.objects.exclude(state__in=terminal).exists()

        cpu_before = children_cpu()
        sandbox_pid = sandbox._process.pid
        sandbox_before = process_cpu(sandbox_pid)
        pg_before = postgres_cpu()
        t0 = run_workers(
            workers=workers,
            batch=params.get("batch") or settings.SEND_BATCH_SIZE,
            threads=params.get("threads", 1),
            done=done,
            timeout=params.get("timeout", 300),
            profile_dir=params.get("profile_dir"),
            loop_kind=params.get("loop", "rounds"),
        )
        cpu = children_cpu() - cpu_before
        sandbox_cpu = process_cpu(sandbox_pid) - sandbox_before
        pg_after = postgres_cpu()
        rows = list(
            SendIntent.objects.filter(pk__in=ids, state="accepted").values_list(
                "updated_at", flat=True
            )
        )
        states = Counter(SendIntent.objects.filter(pk__in=ids).values_list("state", flat=True))
        t_end = SendIntent.objects.filter(pk__in=ids).aggregate(m=Max("updated_at"))["m"]
        ledger = sandbox.ledger()
        per_key = Counter(entry["idempotency_key"] for entry in ledger)
    elapsed = t_end.timestamp() - t0
    return {
        "system": "countersign",
        "n": n,
        "workers": workers,
        "latency_ms": latency,
        "batch": params.get("batch") or settings.SEND_BATCH_SIZE,
        "threads": params.get("threads", 1),
        "loop": params.get("loop", "rounds"),
        "accepted": states.get("accepted", 0),
        "states": dict(states),
        "elapsed_s": round(elapsed, 3),
        "per_s": round(len(rows) / elapsed, 1) if elapsed > 0 else None,
        "latency": latency_summary([r.timestamp() - t0 for r in rows]),
        "provider_sends": len(ledger),
        "duplicates": sum(c - 1 for c in per_key.values() if c > 1),
        "worker_cpu_ms_per_item": round(cpu * 1000 / max(1, n), 2),
        # The provider fake runs on the same two cores: its CPU per send bounds any worker.
        "sandbox_cpu_ms_per_item": round(sandbox_cpu * 1000 / max(1, n), 2),
        "postgres_cpu_ms_per_item": _per_item(pg_before, pg_after, n),
        "approvals_per_s": round(n / approve_timer.seconds, 1),
    }


# --- django-post-office --------------------------------------------------------------------------


def _postoffice_queue(n: int, *, backend: str = "") -> None:
    """n emails queued with `mail.send_many` for the post-office backend alias (default: '')."""
    from post_office import mail

    mail.send_many(
        [
            {
                "sender": "support@bench.test",
                "recipients": [f"customer{i}@example.com"],
                "subject": f"bench-{i}",
                "message": "Thanks for writing. Your order shipped yesterday; tracking number 1Z999.",
                "backend": backend,
            }
            for i in range(n)
        ]
    )
    vacuum_analyze("post_office_email")


def _postoffice_drain(n: int, workers: int, lock_dir: str) -> dict:
    """Drain the queue as `send_queued_mail --processes W` does; the figures both post-office
    rows share (the end time comes from the rows post-office marked sent)."""
    from django.db import connections
    from post_office import mail
    from post_office.models import STATUS, Email

    connections.close_all()
    cpu_before = children_cpu(include_self=True)
    pg_before = postgres_cpu()
    t0 = time.time()
    mail.send_queued_mail_until_done(lockfile=os.path.join(lock_dir, "lock"), processes=workers)
    wall = time.time() - t0
    cpu = children_cpu(include_self=True) - cpu_before
    pg_after = postgres_cpu()
    sent = list(Email.objects.filter(status=STATUS.sent).values_list("last_updated", flat=True))
    t_end = max(sent).timestamp() if sent else t0
    elapsed = t_end - t0
    return {
        "n": n,
        "workers": workers,
        "accepted": len(sent),
        "elapsed_s": round(elapsed, 3),
        "wall_s": round(wall, 3),
        "per_s": round(len(sent) / elapsed, 1) if elapsed > 0 else None,
        "latency": latency_summary([t.timestamp() - t0 for t in sent]),
        "worker_cpu_ms_per_item": round(cpu * 1000 / max(1, n), 2),
        "postgres_cpu_ms_per_item": _per_item(pg_before, pg_after, n),
    }


def _duplicates(subjects: list[str]) -> int:
    """Sends beyond the first per subject (each queued email has its own subject)."""
    return sum(c - 1 for c in Counter(subjects).values() if c > 1)


def postoffice(params: dict) -> dict:
    n, workers, latency = params["n"], params["workers"], params["latency_ms"]
    reset_tables()
    ledger_dir = tempfile.mkdtemp(prefix="bench-po-")
    os.environ["BENCH_LATENCY_MS"] = str(latency)
    os.environ["BENCH_LEDGER_DIR"] = ledger_dir
    _postoffice_queue(n)
    drained = _postoffice_drain(n, workers, ledger_dir)
    lines = []
    for name in os.listdir(ledger_dir):
        if name.startswith("sent-"):
            with open(os.path.join(ledger_dir, name)) as fh:
                lines += fh.read().split()
    return {
        "system": "post_office",
        "latency_ms": latency,
        **drained,
        "provider_sends": len(lines),
        "duplicates": _duplicates(lines),
    }


def postoffice_http(params: dict) -> dict:
    """post-office through bench.backends.AgentMailBackend to the sandbox AgentMail: one inbox and
    its key, provisioned as for Countersign, handed to the backend through the environment (its
    forked sending processes inherit it)."""
    # Imported before the fork, as start_workers does for Countersign: post-office forks fresh
    # sending processes for every batch of 100, and the SDK loads `inboxes.messages` lazily on
    # first use (about 40 ms of CPU), which each of them would otherwise pay again.
    import agentmail.inboxes.messages.client  # noqa: F401

    from mailboxes.sandbox.testing import SandboxServer

    n, workers, latency = params["n"], params["workers"], params["latency_ms"]
    with SandboxServer(config={"auto_deliver": False}) as sandbox:
        _tenant, _user, (mailbox,) = _sandbox_tenant(sandbox, 1)
        os.environ["BENCH_AGENTMAIL_BASE_URL"] = sandbox.base_url
        os.environ["BENCH_AGENTMAIL_API_KEY"] = mailbox.api_key()
        os.environ["BENCH_AGENTMAIL_INBOX_ID"] = mailbox.inbox_id
        _postoffice_queue(n, backend="agentmail")
        sandbox.config(latency_ms=latency)
        sandbox_pid = sandbox._process.pid
        sandbox_before = process_cpu(sandbox_pid)
        drained = _postoffice_drain(n, workers, tempfile.mkdtemp(prefix="bench-po-http-"))
        sandbox_cpu = process_cpu(sandbox_pid) - sandbox_before
        ledger = sandbox.ledger()
    return {
        "system": "post_office_http",
        "latency_ms": latency,
        **drained,
        "provider_sends": len(ledger),
        "duplicates": _duplicates([entry["subject"] for entry in ledger]),
        "sandbox_cpu_ms_per_item": round(sandbox_cpu * 1000 / max(1, n), 2),
    }


# --- the database's own limit --------------------------------------------------------------------

_SCRATCH = """
DROP TABLE IF EXISTS bench_claim;
CREATE TABLE bench_claim (
    id bigserial PRIMARY KEY,
    state text NOT NULL DEFAULT 'queued',
    priority smallint NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease uuid,
    lease_expires_at timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bench_claim_due ON bench_claim (priority DESC, next_attempt_at, id)
    WHERE state = 'queued';
"""

_CLAIM = """
UPDATE bench_claim SET state = 'sending', lease = gen_random_uuid(),
       lease_expires_at = now() + interval '60 seconds', attempts = attempts + 1,
       updated_at = now()
 WHERE id IN (SELECT id FROM bench_claim
               WHERE state = 'queued' AND next_attempt_at <= now()
               ORDER BY priority DESC, next_attempt_at, id
               FOR UPDATE SKIP LOCKED LIMIT %s)
RETURNING id, lease
"""

_COMPLETE = """
UPDATE bench_claim SET state = 'accepted', lease = NULL, lease_expires_at = NULL,
       updated_at = now()
 WHERE id = %s AND lease = %s AND state = 'sending'
"""


def _conninfo() -> dict:
    from django.db import connection

    return connection.get_connection_params()


def _sql_worker(conninfo: dict, k: int, go, counts) -> None:
    import psycopg

    with psycopg.connect(**conninfo) as conn:
        go.wait()
        done = 0
        while True:
            with conn.transaction():
                claimed = conn.execute(_CLAIM, [k]).fetchall()
            if not claimed:
                break
            for row_id, lease in claimed:
                with conn.transaction():
                    done += conn.execute(_COMPLETE, [row_id, lease]).rowcount
        counts.put(done)


def db_limit(params: dict) -> dict:
    import psycopg

    n, workers, k = params["n"], params["workers"], params.get("k", 1)
    conninfo = _conninfo()
    conninfo.pop("cursor_factory", None)
    conninfo.pop("context", None)
    conninfo.pop("prepare_threshold", None)
    with psycopg.connect(**conninfo, autocommit=True) as conn:
        conn.execute(_SCRATCH)
        conn.execute("INSERT INTO bench_claim (priority) SELECT 0 FROM generate_series(1, %s)", [n])
        conn.execute("VACUUM ANALYZE bench_claim")
    from django.db import connections

    connections.close_all()
    go, counts = CTX.Event(), CTX.Queue()
    procs = [
        CTX.Process(target=_sql_worker, args=(conninfo, k, go, counts), daemon=True)
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    time.sleep(0.3)
    cpu_before = children_cpu()
    pg_before = postgres_cpu()
    t0 = time.perf_counter()
    go.set()
    completed = sum(counts.get(timeout=300) for _ in procs)
    elapsed = time.perf_counter() - t0
    for proc in procs:
        proc.join(10)
    cpu = children_cpu() - cpu_before
    pg_after = postgres_cpu()
    with psycopg.connect(**conninfo, autocommit=True) as conn:
        max_claims, accepted = conn.execute(
            "SELECT max(attempts), count(*) FILTER (WHERE state = 'accepted') FROM bench_claim"
        ).fetchone()
        conn.execute("DROP TABLE bench_claim")
    return {
        "system": "db_limit",
        "n": n,
        "workers": workers,
        "k": k,
        "accepted": accepted,
        "completed": completed,
        "elapsed_s": round(elapsed, 3),
        "per_s": round(completed / elapsed, 1),
        "max_claims_per_row": max_claims,
        "worker_cpu_ms_per_item": round(cpu * 1000 / max(1, n), 2),
        "postgres_cpu_ms_per_item": _per_item(pg_before, pg_after, n),
        "duplicates": max(0, (max_claims or 1) - 1),
    }
