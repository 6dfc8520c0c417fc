"""Disaster-recovery drill: restore the database from a backup taken while sends kept going, start
the workers on it, and check what the provider really received.

    python -m reliability.restore_drill --intents 300 --workers 2 --seed 5

1. A scratch database (A) on a PostgreSQL server (a server of the drill's own, or the one of
   ``--server-url``), the sandbox AgentMail (the provider: its ledger and idempotency records
   live in its own file and survive everything below), W send workers on A.
2. Approvals at a steady rate for ``--feed-seconds``; a share of the sends lose their answer after
   the provider accepted them (or get a 503 after processing), so some intents are uncertain.
3. After ``--backup-at`` seconds: ``pg_dump -Fc`` of A while the approvals and the sends go on.
4. Sending goes on after the approvals end (``--after-backup`` seconds, then until A has sent
   everything): the backup ages, and what it holds as open the provider has now sent.
5. The disaster: the workers are killed (SIGKILL) and A is dropped. The provider restarts too
   (its state is on disk). ``pg_restore`` of the backup into a fresh database B; the intent,
   draft and broadcast id sequences are moved past anything A may have handed out (DEPLOYMENT.md
   "Backup and restore": a reused id would reuse a send label, or an id an agent holds).
6. W workers on B; drain until every intent B holds is final.
7. The check, against the provider's ledger: every key sent at most once; every intent B holds
   final, and accepted ones with the message id the provider holds for their key; the intents
   the backup held as queued, sending or uncertain, by how they ended and whether the provider
   had already sent them before the restore (then its idempotency record answered the worker's
   request with the original message); sends the restored database knows nothing about (approved
   after the backup: the backup's data loss, which an operator reconciles by label).

Exit status 0 when nothing was sent twice, nothing is left open and every accepted intent matches
the provider. Prints one table, writes JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from reliability import nemesis

ROOT = Path(__file__).resolve().parent.parent
OPEN_STATES = ("queued", "sending", "uncertain")
# Sequences moved past the ids the lost interval may have used (labels are cs-intent-<id>).
SEQUENCE_MARGIN = 1_000_000


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m reliability.restore_drill", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--intents", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--feed-seconds", type=float, default=40)
    parser.add_argument("--backup-at", type=float, default=15, help="seconds into the feed")
    parser.add_argument(
        "--after-backup", type=float, default=10, help="sending goes on this long after the feed"
    )
    parser.add_argument("--drain-seconds", type=float, default=180)
    parser.add_argument("--server-url", default=None, help="an existing server (admin URL)")
    parser.add_argument(
        "--template",
        default=None,
        help="copy this migrated database (no one connected to it) instead of migrating",
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.intents < 1 or args.workers < 1 or not 0 < args.backup_at < args.feed_seconds:
        parser.error("need --intents >= 1, --workers >= 1 and 0 < --backup-at < --feed-seconds")
    return args


pg_tool = nemesis.pg_tool


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def dump(url: str, path: Path) -> float:
    """pg_dump in PostgreSQL's custom format, as a nightly backup job would; returns seconds."""
    began = time.monotonic()
    subprocess.run(
        [pg_tool("pg_dump"), "--format=custom", "--no-owner", f"--file={path}", url],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return time.monotonic() - began


def restore(admin_url: str, name: str, path: Path) -> float:
    """A fresh database from the dump, then the id sequences moved on; returns seconds."""
    began = time.monotonic()
    url = nemesis.scratch_database(admin_url, name, empty=True)
    subprocess.run(
        [pg_tool("pg_restore"), "--no-owner", "--exit-on-error", f"--dbname={url}", str(path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("intents_sendintent", "intents_draft", "intents_broadcast"):
            conn.execute(
                sql.SQL(
                    "SELECT setval(pg_get_serial_sequence(%s, 'id'), "
                    "(SELECT COALESCE(max(id), 0) FROM {}) + %s)"
                ).format(sql.Identifier(table)),
                [table, SEQUENCE_MARGIN],
            )
    return time.monotonic() - began


def create_database(admin_url: str, name: str, *, template: str | None) -> str:
    if template is None:
        return nemesis.scratch_database(admin_url, name)
    import psycopg
    from psycopg import sql

    drop_database(admin_url, name)
    with psycopg.connect(with_database(admin_url, "postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    return with_database(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(with_database(admin_url, "postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def point_django_at(url: str) -> None:
    """The drill's own ORM connection follows the database the workers use."""
    from django.db import connections

    connections.close_all()
    connections["default"].settings_dict["NAME"] = urlsplit(url).path.lstrip("/")


def start_workers(env: dict, count: int) -> list[subprocess.Popen]:
    argv = [sys.executable, "manage.py", "intents_worker", "--threads", "2", "--batch", "5"]
    argv += ["--poll", "0.05", "--sweep-every", "1"]
    return [
        subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(count)
    ]


def kill(workers: list[subprocess.Popen]) -> None:
    for proc in workers:
        nemesis.signal_group(proc, signal.SIGKILL)
    for proc in workers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def lose_answers(sandbox, stop: threading.Event, rng: random.Random, budget: int) -> None:
    """Up to `budget` sends whose answer is lost after the provider processed them (a read
    timeout, or a 503 after processing), one at a time: the next only once the last one fired."""
    while budget > 0 and not stop.wait(0.5):
        with contextlib.suppress(Exception):
            if any(f["fired"] < f["times"] for f in sandbox.faults()):
                continue
            mode = rng.choice(["timeout_after_accept", "timeout_after_accept", "503_after"])
            sandbox.fault("sends", mode, times=1, delay=2)
            budget -= 1


def states_now() -> dict[int, tuple[str, str]]:
    from intents.models import SendIntent

    return {
        pk: (key, state)
        for pk, key, state in SendIntent.objects.values_list("id", "idempotency_key", "state")
    }


def wait_final(seconds: float) -> bool:
    from django.db import connections

    from intents.models import SendIntent

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if not SendIntent.objects.exclude(state__in=nemesis.FINAL_OK).exists():
                return True
        except Exception:
            connections.close_all()
        time.sleep(0.5)
    return False


def last_attempt_id() -> int:
    from intents.models import SendAttempt

    return SendAttempt.objects.order_by("-id").values_list("id", flat=True).first() or 0


def check(
    sandbox, at_restore: dict[int, tuple[str, str]], sent_before: set[str], attempts_from: int
) -> dict:
    """The restored database against the provider's ledger."""
    from intents.models import SendAttempt, SendIntent

    sends: dict[str, list[dict]] = {}
    for send in sandbox.ledger():
        sends.setdefault(send.get("idempotency_key") or "", []).append(send)
    final = {i.pk: i for i in SendIntent.objects.all()}
    known = {i.idempotency_key for i in final.values()}
    lost, mismatched = [], []
    for intent in final.values():
        mine = sends.get(intent.idempotency_key, [])
        if intent.state not in nemesis.FINAL_OK:
            lost.append((intent.pk, intent.state))
        elif intent.state == "accepted" and (
            not mine or mine[0]["message_id"] != intent.provider_message_id
        ):
            mismatched.append(intent.pk)
    duplicated = {key: len(v) for key, v in sends.items() if len(v) > 1}
    held_open = {pk for pk, (_, state) in at_restore.items() if state in OPEN_STATES}
    resolved: Counter = Counter()
    for pk in held_open:
        key, state = at_restore[pk]
        already = "already sent before the restore" if key in sent_before else "first sent after"
        resolved[f"{state} -> {final[pk].state} ({already})"] += 1
    replays = SendAttempt.objects.filter(intent_id__in=held_open, id__gt=attempts_from)
    replays = replays.values_list("kind", "outcome")
    return {
        "intents_in_backup": len(at_restore),
        "backup_states": dict(Counter(state for _, state in at_restore.values())),
        "held_open_by_backup": len(held_open),
        "of_which_already_sent_before_restore": sum(
            1 for pk in held_open if at_restore[pk][0] in sent_before
        ),
        "resolved": dict(resolved),
        "attempts_after_restore_for_them": dict(Counter(f"{k}/{o}" for k, o in replays)),
        "final_states": dict(Counter(i.state for i in final.values())),
        "provider_sends": sum(len(v) for v in sends.values()),
        "duplicated": len(duplicated),
        "lost": len(lost),
        "accepted_not_matching_provider": len(mismatched),
        "sent_but_unknown_to_restored_database": sum(1 for key in sends if key not in known),
        "examples": {"duplicated": list(duplicated.items())[:5], "lost": lost[:5]},
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)

    def terminate(signum, frame):
        raise SystemExit(f"restore drill: stopped by signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    rng = random.Random(seed)
    pgdata = None
    if args.server_url:
        admin = args.server_url
    else:
        admin, pgdata = nemesis.own_embedded_server()
    tag = f"{os.getpid()}"
    first = create_database(admin, f"countersign_drill_a_{tag}", template=args.template)
    env = {
        **os.environ,
        "DATABASE_URL": first,
        "COUNTERSIGN_ENV": "development",
        "DEBUG": "false",
        "PUBLIC_BASE_URL": "http://127.0.0.1:9",
        "SEND_LEASE_SECONDS": "3",
        "SEND_BACKOFF_BASE_SECONDS": "0.2",
        "SEND_BACKOFF_CAP_SECONDS": "1",
        "SEND_MAX_ATTEMPTS": "50",
        "SEND_RATE_PER_KEY": "1000",
        "SEND_BURST_PER_KEY": "1000",
        "AGENTMAIL_READ_TIMEOUT": "1",
        "DB_CONN_MAX_AGE": "0",
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("Q_REDIS_URL", None)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from mailboxes.sandbox.testing import SandboxServer

    sandbox = SandboxServer(config={"auto_deliver": False, "latency_ms": 150})
    sandbox.start()
    env["AGENTMAIL_BASE_URL"] = os.environ["AGENTMAIL_BASE_URL"] = sandbox.base_url
    env["AGENTMAIL_ORG_API_KEY"] = os.environ["AGENTMAIL_ORG_API_KEY"] = sandbox.org_key
    import django

    django.setup()
    import logging

    from django.core.management import call_command

    logging.disable(logging.ERROR)
    second = with_database(admin, f"countersign_drill_b_{tag}")
    backup = ROOT / ".data" / f"drill-{tag}.dump"
    backup.parent.mkdir(parents=True, exist_ok=True)
    workers: list[subprocess.Popen] = []
    started = time.monotonic()
    timeline: dict[str, float | bool] = {}
    try:
        print(f"restore drill: seed {seed}; sandbox at {sandbox.base_url}", flush=True)
        call_command("migrate", verbosity=0)
        drafts = nemesis.prepare_drafts(args.intents, seed)
        from intents.models import SendIntent

        workers = start_workers(env, args.workers)
        stop_faults = threading.Event()
        threading.Thread(
            target=lose_answers,
            args=(sandbox, stop_faults, rng, max(2, args.intents // 8)),
            daemon=True,
        ).start()
        run = nemesis.Run(args=argparse.Namespace(fault_seconds=args.feed_seconds))
        approved_at: dict[int, float] = {}
        feeder = threading.Thread(target=nemesis.feed, args=(run, drafts, approved_at))
        t0 = time.monotonic()
        feeder.start()
        time.sleep(max(0.0, args.backup_at - (time.monotonic() - t0)))
        # A backup of a database that is sending: wait for the first sends if the machine is slow.
        accepted = SendIntent.objects.filter(state="accepted").count
        while accepted() < max(1, args.intents // 20) and time.monotonic() - t0 < 300:
            time.sleep(0.2)
        timeline["backup_started_s"] = round(time.monotonic() - t0, 1)
        at_backup_approved = len(approved_at)
        timeline["backup_took_s"] = round(dump(first, backup), 2)
        feeder.join()
        timeline["approvals_done_s"] = round(time.monotonic() - t0, 1)
        time.sleep(args.after_backup)
        stop_faults.set()
        sandbox.clear_faults()
        # Until the lost database has sent everything (the backup's open intents included): the
        # restored copy then holds as open intents the provider already sent, the dangerous case.
        timeline["first_database_drained"] = wait_final(args.drain_seconds)
        # The disaster: the primary is gone with everything after the backup.
        kill(workers)
        workers = []
        sent_before = {s.get("idempotency_key") or "" for s in sandbox.ledger()}
        approved_total = len(approved_at)
        from django.db import connections

        connections.close_all()
        drop_database(admin, f"countersign_drill_a_{tag}")
        sandbox.restart()
        timeline["disaster_s"] = round(time.monotonic() - t0, 1)
        timeline["restore_took_s"] = round(restore(admin, f"countersign_drill_b_{tag}", backup), 2)
        point_django_at(second)
        at_restore = states_now()
        attempts_from = last_attempt_id()
        workers = start_workers({**env, "DATABASE_URL": second}, args.workers)
        drained = wait_final(args.drain_seconds)
        timeline["drained_s"] = round(time.monotonic() - t0, 1)
        kill(workers)
        workers = []
        result = check(sandbox, at_restore, sent_before, attempts_from)
        result.update(
            {
                "seed": seed,
                "workers": args.workers,
                "approved_before_backup": at_backup_approved,
                "approved_in_all": approved_total,
                "provider_sends_before_restore": len(sent_before - {""}),
                "drained": drained,
                "timeline": timeline,
                "total_seconds": round(time.monotonic() - started, 1),
            }
        )
    finally:
        kill(workers)
        sandbox.close()
        from django.db import connections

        connections.close_all()
        backup.unlink(missing_ok=True)
        for name in ("a", "b"):
            with contextlib.suppress(Exception):
                drop_database(admin, f"countersign_drill_{name}_{tag}")
        if pgdata is not None:
            nemesis.stop_embedded(pgdata)
    print_table(result)
    path = args.json or nemesis.RESULTS / f"restore-drill-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"JSON: {path}")
    ok = result["duplicated"] == 0 and result["lost"] == 0 and result["drained"]
    return 0 if ok and result["accepted_not_matching_provider"] == 0 else 1


def print_table(result: dict) -> None:
    rows = [
        (
            "approved before the backup / in all",
            f"{result['approved_before_backup']} / {result['approved_in_all']}",
        ),
        ("intents in the backup", result["intents_in_backup"]),
        ("backup states", result["backup_states"]),
        ("held open by the backup (queued/sending/uncertain)", result["held_open_by_backup"]),
        (
            "  of which the provider had sent before the restore",
            result["of_which_already_sent_before_restore"],
        ),
        ("how they ended", result["resolved"]),
        ("their attempts made after the restore", result["attempts_after_restore_for_them"]),
        ("final states", result["final_states"]),
        ("provider sends (ledger)", result["provider_sends"]),
        (
            "duplicated / lost / accepted not matching",
            f"{result['duplicated']} / "
            f"{result['lost']} / {result['accepted_not_matching_provider']}",
        ),
        ("sent, unknown to the restored database", result["sent_but_unknown_to_restored_database"]),
        ("timeline (s)", result["timeline"]),
    ]
    print()
    print(f"restore drill (seed {result['seed']})")
    for name, value in rows:
        print(f"  {name}: {value}")


if __name__ == "__main__":
    sys.exit(main())
