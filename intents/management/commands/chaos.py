"""Chaos report: N intents through W worker processes while faults are injected at random.

    manage.py chaos --intents 200 --workers 3 --seconds 20

Starts a private sandbox AgentMail (unless --sandbox-url), creates a throwaway tenant in the
configured database, approves N drafts, runs W `intents_worker` processes and, for S seconds,
injects provider faults (lost responses, 5xx before/after processing, drops, 429, 409 in
progress), SIGKILLs workers (and restarts them) and SIGSTOPs them past their lease. Then faults
stop and it waits for the queue to drain. It prints what the provider ledger says, per intent:
duplicates per accepted intent and lost must both be 0.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote, urlencode

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection
from django.db.models.functions import Now

from intents import services, tasks
from intents.models import IntentEvent, SendIntent
from tenants.models import Membership, Tenant, User

ROOT = Path(__file__).resolve().parents[3]
FAULTS = [
    ("timeout_after_accept", {"delay": 1.5}),
    ("drop_after", {}),
    ("drop_before", {}),
    ("500_after", {}),
    ("503_before", {}),
    ("429", {"retry_after": 1}),
    ("409_in_progress", {}),
]
LEASE_SECONDS = 3
SETTLED = {"accepted", "failed", "blocked", "expired", "cancelled", "needs_attention"}


def subprocess_database_url() -> str:
    s = connection.settings_dict
    auth = quote(s["USER"] or "", safe="")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"], safe="")
    host = quote(s["HOST"] or "", safe="")
    port = f":{s['PORT']}" if s.get("PORT") else ""
    query = urlencode({k: v for k, v in s.get("OPTIONS", {}).items() if k == "host"})
    return f"postgresql://{auth}@{host}{port}/{s['NAME']}" + (f"?{query}" if query else "")


class Command(BaseCommand):
    help = "Run intents through worker processes under injected faults and print the outcome."

    def add_arguments(self, parser):
        parser.add_argument("--intents", type=int, default=100)
        parser.add_argument("--workers", type=int, default=3)
        parser.add_argument("--seconds", type=float, default=20)
        parser.add_argument("--drain-timeout", type=float, default=120)
        parser.add_argument("--sandbox-url", default="")
        parser.add_argument("--seed", type=int, default=None)

    def handle(self, *args, **o):
        rng = random.Random(o["seed"])
        sandbox = None
        if o["sandbox_url"]:
            from mailboxes.sandbox.testing import SandboxServer

            sandbox = SandboxServer()
            sandbox.base_url = o["sandbox_url"].rstrip("/")
        else:
            from mailboxes.sandbox.testing import SandboxServer

            sandbox = SandboxServer().start()
        try:
            self._run(o, rng, sandbox)
        finally:
            if not o["sandbox_url"]:
                sandbox.close()

    def _run(self, o, rng, sandbox):
        settings.AGENTMAIL_BASE_URL = sandbox.base_url
        settings.AGENTMAIL_ORG_API_KEY = sandbox.org_key
        settings.PUBLIC_BASE_URL = "http://127.0.0.1:9"
        from mailboxes import provisioning

        run = uuid.uuid4().hex[:8]
        tenant = Tenant.objects.create(name=f"Chaos {run}", slug=f"chaos-{run}")
        user = User.objects.create_user(f"chaos-{run}@example.test", password=None)
        Membership.objects.create(user=user, tenant=tenant, role="approver")
        mailbox = provisioning.mailbox_create(tenant=tenant, username=f"chaos-{run}")
        # A generous per-key budget: this measures correctness under faults, not the rate limit.
        env = {
            **os.environ,
            "DATABASE_URL": subprocess_database_url(),
            "AGENTMAIL_BASE_URL": sandbox.base_url,
            "AGENTMAIL_ORG_API_KEY": sandbox.org_key,
            "SEND_LEASE_SECONDS": str(LEASE_SECONDS),
            "AGENTMAIL_READ_TIMEOUT": "1",
            "SEND_BACKOFF_BASE_SECONDS": "0.2",
            "SEND_BACKOFF_CAP_SECONDS": "2",
            "SEND_MAX_ATTEMPTS": "20",
            "SEND_RATE_PER_KEY": "1000",
            "SEND_BURST_PER_KEY": "1000",
            "SEND_CIRCUIT_COOLDOWN_SECONDS": "2",
            "LOG_LEVEL": "ERROR",
        }

        def start_worker():
            return subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "intents_worker",
                    "--batch",
                    "3",
                    "--sweep-every",
                    "1",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        self.stdout.write(f"Approving {o['intents']} drafts in tenant {tenant.slug} ...")
        intents = []
        for i in range(o["intents"]):
            draft = services.draft_create(
                tenant=tenant,
                mailbox=mailbox,
                to=[f"customer{i % 7}@example.com"],
                subject=f"Chaos {run} #{i}",
                text=f"Reply {i}",
                actor_user=user,
            )
            intents.append(
                services.draft_approve(
                    tenant=tenant,
                    draft_id=draft.pk,
                    version=1,
                    content_hash=draft.versions.get().content_hash,
                    actor=user,
                ).pk
            )

        from intents.clock import db_now

        # Faults and sends overlap: the queue is full when the workers and the nemesis start.
        sandbox.config(latency_ms=30)
        workers_started_at = db_now()
        workers = [start_worker() for _ in range(o["workers"])]
        counts = {"faults": 0, "kills": 0, "pauses": 0}
        paused: dict[int, float] = {}
        started = time.monotonic()
        self.stdout.write(f"Chaos for {o['seconds']:.0f} s with {o['workers']} workers ...")
        while time.monotonic() - started < o["seconds"]:
            time.sleep(rng.uniform(0.2, 0.8))
            for index, until in list(paused.items()):
                if time.monotonic() >= until:
                    workers[index].send_signal(signal.SIGCONT)
                    del paused[index]
            action = rng.random()
            if action < 0.6:
                mode, extra = rng.choice(FAULTS)
                sandbox.fault("sends", mode, times=rng.randint(1, 3), **extra)
                counts["faults"] += 1
            elif action < 0.8:
                index = rng.randrange(len(workers))
                if index in paused:
                    continue
                workers[index].send_signal(signal.SIGKILL)
                workers[index].wait()
                workers[index] = start_worker()
                counts["kills"] += 1
            else:
                index = rng.randrange(len(workers))
                if index in paused:
                    continue
                workers[index].send_signal(signal.SIGSTOP)
                paused[index] = time.monotonic() + 2 * LEASE_SECONDS
                counts["pauses"] += 1
        for index in paused:
            workers[index].send_signal(signal.SIGCONT)
        sandbox.clear_faults()
        faults_stopped = time.monotonic()
        qs = SendIntent.objects.filter(tenant=tenant)
        while time.monotonic() - faults_stopped < o["drain_timeout"]:
            if not qs.exclude(state__in=SETTLED).exists():
                break
            tasks.sweep_once()
            qs.filter(state__in=["queued", "uncertain"]).update(next_attempt_at=Now())
            time.sleep(0.5)
        drain = time.monotonic() - faults_stopped
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
        self._report(o, tenant, mailbox, sandbox, intents, counts, drain, workers_started_at)

    def _report(self, o, tenant, mailbox, sandbox, intents, counts, drain, started_at):
        ledger = sandbox.ledger(inbox_id=mailbox.inbox_id)
        per_key: dict[str, int] = {}
        for row in ledger:
            per_key[row["idempotency_key"]] = per_key.get(row["idempotency_key"], 0) + 1
        rows = {i.pk: i for i in SendIntent.objects.filter(tenant=tenant)}
        states: dict[str, int] = {}
        for intent in rows.values():
            states[intent.state] = states.get(intent.state, 0) + 1
        accepted = [i for i in rows.values() if i.state == "accepted"]
        duplicates = sum(max(0, per_key.get(i.idempotency_key, 0) - 1) for i in rows.values())
        mismatched = sum(1 for i in accepted if per_key.get(i.idempotency_key, 0) != 1)
        lost = (
            sum(
                1
                for i in rows.values()
                if i.state not in SETTLED
                or (
                    i.state in {"failed", "blocked", "expired", "cancelled"}
                    and per_key.get(i.idempotency_key)
                )
            )
            + mismatched
        )
        accepted_at = dict(
            IntentEvent.objects.filter(tenant=tenant, to_state="accepted").values_list(
                "intent_id", "created_at"
            )
        )
        latencies = sorted(
            (accepted_at[i.pk] - max(i.approved_at, started_at)).total_seconds()
            for i in accepted
            if i.pk in accepted_at
        )
        recovered = sum(
            1
            for i in accepted
            if i.events.filter(from_state="uncertain", to_state="accepted").exists()
        )

        def pct(p):
            if not latencies:
                return float("nan")
            return latencies[min(len(latencies) - 1, round(p * (len(latencies) - 1)))]

        w = self.stdout.write
        w("")
        w(f"intents:                        {len(intents)}")
        w(
            f"workers:                        {o['workers']} processes, {o['seconds']:.0f} s of chaos"
        )
        w(
            f"nemesis:                        {counts['faults']} provider faults, "
            f"{counts['kills']} SIGKILLs, {counts['pauses']} SIGSTOP/SIGCONT past the lease"
        )
        w(f"accepted:                       {len(accepted)}")
        w(f"recovered from uncertain:       {recovered}")
        w(
            f"duplicates per accepted intent: {duplicates / max(1, len(accepted)):.3f} ({duplicates} extra sends)"
        )
        w(f"lost:                           {lost}")
        w(f"needs-attention:                {states.get('needs_attention', 0)}")
        w(f"final states:                   {dict(sorted(states.items()))}")
        w(f"provider sends in ledger:       {len(ledger)}")
        w(
            f"time to accepted p50 / p95:     {pct(0.5):.2f} s / {pct(0.95):.2f} s (from worker start)"
        )
        w(f"drain time after faults stop:   {drain:.2f} s")
        if duplicates or lost:
            self.stderr.write("FAIL: duplicates or lost intents")
