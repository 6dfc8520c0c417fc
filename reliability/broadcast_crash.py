"""A broadcast under worker crashes: N recipients, some suppressed, the worker process killed
(SIGKILL) twice during the fan-out and twice during sending; then the sandbox's ledger must hold
exactly one send per allowed recipient (per key and per recipient), none to a suppressed one.

``run_crash`` is the harness; the suite runs it small (tests/intents/test_broadcast_crash.py),
``python -m reliability.broadcast_crash`` (``make broadcast-crash``) at full size on a scratch
database of its own, and prints the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _worker(env: dict[str, str], threads: int = 1, reply_threads: int = 0) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "intents_worker",
            "--threads",
            str(threads),
            "--reply-threads",
            str(reply_threads),
            "--batch",
            "20",
            "--poll",
            "0.05",
            "--sweep-every",
            "0.3",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"broadcast crash: {what} not reached in {timeout:.0f} s")
        time.sleep(0.01)


def run_crash(
    *,
    sandbox,
    tenant,
    mailbox,
    approver,
    recipients: int,
    suppressed: int,
    env: dict[str, str],
    timeout: float = 600,
    log: Callable[[str], None] = lambda line: None,
) -> dict:
    """Create, approve and drain one broadcast while killing its worker four times; returns the
    figures (``sends``, ``unique_keys``, ``unique_recipients``, ``to_suppressed``, ...)."""
    from intents.models import Broadcast, SendIntent, Suppression
    from intents.services.broadcasts import broadcast_approve, broadcast_create

    rows = [
        {"address": f"crash{i}@example.com", "variables": {"name": f"Customer {i}", "n": i}}
        for i in range(recipients)
    ]
    blocked = {f"crash{i}@example.com" for i in range(0, recipients, recipients // suppressed)}
    blocked = set(sorted(blocked)[:suppressed])
    Suppression.objects.bulk_create(
        [Suppression(tenant=tenant, address=a, reason="bounced") for a in blocked]
    )
    broadcast = broadcast_create(
        tenant=tenant,
        mailbox=mailbox,
        name="Crash run",
        subject="Notice {{ n }}",
        text="Hello {{ name }}, this is notice {{ n }}.",
        recipients=rows,
    )
    started = time.monotonic()
    broadcast = broadcast_approve(
        tenant=tenant,
        broadcast_id=broadcast.pk,
        content_hash=broadcast.content_hash,
        actor=approver,
    )
    expected = recipients - len(blocked)
    intents = SendIntent.objects.filter(broadcast=broadcast)
    kills: list[str] = []
    worker = _worker(env)
    try:
        for n in range(2):
            # Killed while pages are still being created.
            floor = intents.count()
            _wait(lambda f=floor: intents.count() > f, timeout, "fan-out progress")
            if Broadcast.objects.get(pk=broadcast.pk).fanout_position >= recipients - 1:
                log(f"fan-out finished before kill {n + 1}")
                break
            _kill(worker)
            kills.append(f"fan-out at {intents.count()} sends created")
            log(f"{time.monotonic() - started:.1f} s: killed during fan-out")
            worker = _worker(env)
        for n in range(2):
            target = (n + 1) * expected // 3
            _wait(
                lambda t=target: intents.filter(state="accepted").count() >= t,
                timeout,
                "sending progress",
            )
            _kill(worker)
            kills.append(f"sending at {intents.filter(state='accepted').count()} accepted")
            log(f"{time.monotonic() - started:.1f} s: killed during sending")
            worker = _worker(env)
        _wait(
            lambda: Broadcast.objects.get(pk=broadcast.pk).state == "completed",
            timeout,
            "completion",
        )
    finally:
        _kill(worker)
    elapsed = time.monotonic() - started
    keys = set(intents.values_list("idempotency_key", flat=True))
    sends = [s for s in sandbox.ledger() if s.get("idempotency_key") in keys]
    per_key = Counter(s["idempotency_key"] for s in sends)
    per_recipient = Counter(a for s in sends for a in s["to"])
    figures = {
        "recipients": recipients,
        "suppressed": len(blocked),
        "expected_sends": expected,
        "sends": len(sends),
        "unique_keys": len(per_key),
        "unique_recipients": len(per_recipient),
        "max_per_key": max(per_key.values(), default=0),
        "max_per_recipient": max(per_recipient.values(), default=0),
        "to_suppressed": sum(per_recipient[a] for a in blocked),
        "multi_recipient_sends": sum(1 for s in sends if len(s["to"]) != 1 or s.get("cc")),
        "intents": intents.count(),
        "intent_states": dict(Counter(intents.values_list("state", flat=True))),
        "kills": kills,
        "seconds": round(elapsed, 1),
    }
    log(f"broadcast crash: {figures}")
    return figures


@contextlib.contextmanager
def scratch_run(settings: dict[str, str]):
    """A scratch database (on a PostgreSQL server of its own unless DATABASE_URL is set), a
    sandbox, the product migrated, and one tenant with an approver and a provisioned mailbox;
    yields ``(sandbox, env, tenant, mailbox, approver, make_tenant)``."""
    from reliability.nemesis import own_embedded_server, scratch_database, stop_embedded

    pgdata = None
    if os.environ.get("DATABASE_URL"):
        database_url = scratch_database(os.environ["DATABASE_URL"], "countersign_bcast_crash")
    else:
        base, pgdata = own_embedded_server()
        database_url = scratch_database(base, "countersign_bcast_crash")
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "COUNTERSIGN_ENV": "development",
        "DEBUG": "false",
        "LOG_LEVEL": "ERROR",
        **settings,
    }
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from mailboxes.sandbox.testing import SandboxServer

    sandbox = SandboxServer()
    sandbox.start()
    env["AGENTMAIL_BASE_URL"] = os.environ["AGENTMAIL_BASE_URL"] = sandbox.base_url
    env["AGENTMAIL_ORG_API_KEY"] = os.environ["AGENTMAIL_ORG_API_KEY"] = sandbox.org_key
    import django

    django.setup()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        from mailboxes.provisioning import mailbox_create
        from tenants.models import Membership, Tenant, User

        def make_tenant(label: str):
            tag = f"{label}-{os.getpid()}"
            # No undo window: the run kills workers during the fan-out, which would otherwise
            # wait out the window first (as broadcast_latency's tenants do).
            tenant = Tenant.objects.create(
                name=f"Broadcast {label}", slug=f"bcast-{tag}", send_hold_seconds=0
            )
            approver = User.objects.create_user(f"approver-{tag}@crash.test", None)
            Membership.objects.create(user=approver, tenant=tenant, role=Membership.Role.APPROVER)
            mailbox = mailbox_create(tenant=tenant, username=f"bcast-{tag}")
            return tenant, mailbox, approver

        tenant, mailbox, approver = make_tenant("crash")
        yield sandbox, env, tenant, mailbox, approver, make_tenant
    finally:
        sandbox.stop()
        if pgdata is not None:
            stop_embedded(pgdata)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reliability.broadcast_crash")
    parser.add_argument("--recipients", type=int, default=5000)
    parser.add_argument("--suppressed", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100, help="broadcast sends per second")
    args = parser.parse_args(argv)
    settings = {
        "SEND_LEASE_SECONDS": "3",
        "SEND_RATE_PER_KEY": str(args.rate * 4),
        "SEND_BURST_PER_KEY": str(args.rate * 4),
        "BROADCAST_RATE_PER_SECOND": str(args.rate),
        "BROADCAST_FANOUT_PAGE": "100",
        "BROADCAST_FANOUT_PAGE_PAUSE_SECONDS": "0.1",
        "SEND_BACKOFF_BASE_SECONDS": "0.1",
        "SEND_BACKOFF_CAP_SECONDS": "1",
        "AGENTMAIL_READ_TIMEOUT": "2",
    }
    with scratch_run(settings) as (sandbox, env, tenant, mailbox, approver, _):
        figures = run_crash(
            sandbox=sandbox,
            tenant=tenant,
            mailbox=mailbox,
            approver=approver,
            recipients=args.recipients,
            suppressed=args.suppressed,
            env=env,
            timeout=1800,
        )
    for key, value in figures.items():
        print(f"{key:>22}: {value}")
    ok = (
        figures["sends"]
        == figures["unique_keys"]
        == figures["unique_recipients"]
        == figures["expected_sends"]
        and figures["to_suppressed"] == 0
        and figures["multi_recipient_sends"] == 0
    )
    print("broadcast crash:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
