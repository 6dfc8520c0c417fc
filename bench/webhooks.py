"""Webhook ingestion: Countersign's receiver next to the fair peers, with the applier running.

One gunicorn (bench.settings_peers, so every URL lives in the same server processes), the same
payload size, the same number of signed deliveries, the same load generator, the endpoints
alternating round by round. The fair peers (issue 18):

- storing anymail: django-anymail's Resend tracking view with a `tracking` receiver that stores
  each event (bench.anymail_store), as a team would deploy it;
- the reference: the same verification, then one INSERT (bench.views_floor), served like
  anymail's view through the full middleware chain; and the same view mounted under /webhooks/,
  so served as ours is, through config.machine's short chain (what the reference is worth
  without the browser's middleware, which ours skips).

The older peer, kept for continuity: anymail's view with no receiver (stores nothing).

Ours stores each event in the ledger (UNIQUE(endpoint, svix-id)) before the 2xx; the product's
dedicated applier (`manage.py webhooks_apply`) runs beside gunicorn for the whole load, so the
apply lag (applied_at - received_at, the database's clock) is measured under load, and every
2xx'd event is checked: stored, applied, and applied once (one journal row per svix-id).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime

from bench.common import REPO_ROOT, latency_summary, make_tenant, reset_tables, vacuum_analyze
from bench.dispatch import process_cpu
from bench.http import Gunicorn, load

ROUNDS = 3  # the quick smoke's rounds (the CLI's --webhook-rounds, 5 by default, otherwise)
ANYMAIL_PATH = "/anymail/resend/tracking/"
ANYMAIL_STORE_PATH = "/bench/anymail-store/resend/tracking/"
FLOOR_PATH = "/bench/store-only/"
FLOOR_MACHINE_PATH = "/webhooks/bench-store-only/"


def _iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def _setup(n_intents: int):
    from django.utils import timezone

    from intents.hashing import content_hash
    from intents.models import Draft, DraftVersion, SendIntent
    from tests.factories import make_local_mailbox
    from webhooks.models import WebhookEndpoint, WebhookSecret

    reset_tables()
    tenant, user = make_tenant("hooks")
    mailbox = make_local_mailbox(tenant)
    endpoint = WebhookEndpoint.objects.create(
        tenant=tenant, status=WebhookEndpoint.Status.ACTIVE, provider_webhook_id="ep_bench"
    )
    secret_text = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    secret = WebhookSecret(endpoint=endpoint)
    secret.sealed = secret.seal(secret_text)
    secret.save()
    now = timezone.now()
    intents = []
    for i in range(n_intents):
        to = [f"customer{i}@example.com"]
        digest = content_hash(
            mailbox_id=mailbox.pk,
            to=to,
            cc=[],
            bcc=[],
            subject=f"Re: order {i}",
            text="Thanks",
            html="",
            in_reply_to="",
        )
        draft = Draft.objects.create(tenant=tenant, mailbox=mailbox, status=Draft.Status.APPROVED)
        version = DraftVersion.objects.create(
            draft=draft,
            tenant=tenant,
            number=1,
            to=to,
            subject=f"Re: order {i}",
            text="Thanks",
            author_kind=DraftVersion.Author.AGENT,
            content_hash=digest,
        )
        intents.append(
            SendIntent(
                tenant=tenant,
                mailbox=mailbox,
                draft=draft,
                draft_version=version,
                approver=user,
                approved_at=now,
                content_hash=digest,
                recipients={"to": to, "cc": [], "bcc": []},
                idempotency_key=f"cs-bench-{uuid.uuid4().hex}",
                state=SendIntent.State.ACCEPTED,
                next_attempt_at=now,
                provider_message_id=f"<{uuid.uuid4()}@agentmail.to>",
                provider_thread_id=f"thr_{i}",
            )
        )
    SendIntent.objects.bulk_create(intents)
    vacuum_analyze("intents_sendintent", "webhooks_webhookevent", "webhooks_recipientdelivery")
    return endpoint, secret_text, mailbox, intents


def _ours(endpoint, secret_text, mailbox, intents, count: int, offset: int) -> list[dict]:
    from svix.webhooks import Webhook

    signer = Webhook(secret_text)
    requests = []
    for i in range(offset, offset + count):
        intent = intents[(i // 2) % len(intents)]
        kind, key = ("sent", "send") if i % 2 == 0 else ("delivered", "delivery")
        body = json.dumps(
            {
                "type": "event",
                "event_type": f"message.{kind}",
                "event_id": "evt_" + uuid.uuid4().hex,
                key: {
                    "inbox_id": mailbox.inbox_id,
                    "thread_id": intent.provider_thread_id,
                    "message_id": intent.provider_message_id,
                    "timestamp": _iso(datetime.now(UTC)),
                    "recipients": intent.recipients["to"],
                },
            },
            separators=(",", ":"),
        )
        requests.append(_signed(signer, f"/webhooks/agentmail/{endpoint.public_id}/", body))
    return requests


def _anymail(count: int, size: int, path: str = ANYMAIL_PATH) -> list[dict]:
    from django.conf import settings
    from svix.webhooks import Webhook

    signer = Webhook(settings.ANYMAIL["RESEND_SIGNING_SECRET"])
    requests = []
    for i in range(count):
        now = _iso(datetime.now(UTC))
        event = {
            "type": "email.delivered" if i % 2 else "email.sent",
            "created_at": now,
            "data": {
                "email_id": str(uuid.uuid4()),
                "from": "support@hooks.bench.test",
                "to": [f"customer{i}@example.com"],
                "subject": f"Re: order {i}",
                "created_at": now,
                "tags": {"pad": ""},
            },
        }
        body = json.dumps(event, separators=(",", ":"))
        event["data"]["tags"]["pad"] = "x" * max(0, size - len(body))
        body = json.dumps(event, separators=(",", ":"))
        requests.append(_signed(signer, path, body))
    return requests


def _floor(count: int, size: int, offset: int = 0, path: str = FLOOR_PATH) -> list[dict]:
    """Deliveries for the store-only reference view: same secret as anymail's, same body size."""
    from django.conf import settings
    from svix.webhooks import Webhook

    signer = Webhook(settings.ANYMAIL["RESEND_SIGNING_SECRET"])
    requests = []
    for i in range(offset, offset + count):
        event = {"event_type": "message.delivered", "event_id": f"evt_{i}", "pad": ""}
        body = json.dumps(event, separators=(",", ":"))
        event["pad"] = "x" * max(0, size - len(body))
        requests.append(_signed(signer, path, json.dumps(event, separators=(",", ":"))))
    return requests


def _signed(signer, path: str, body: str) -> dict:
    """One delivery, its timestamp header the one it was signed with: two clock reads (one for
    the header, one for the signature) straddled a second now and then, and the receiver rightly
    refused that delivery's signature (one in about 30,000: the runs whose every row but one
    answered all of its deliveries 2xx)."""
    svix_id = "msg_" + uuid.uuid4().hex
    now = datetime.now(UTC).replace(microsecond=0)
    return {
        "method": "POST",
        "path": path,
        "headers": {
            "Content-Type": "application/json",
            "svix-id": svix_id,
            "svix-timestamp": str(int(now.timestamp())),
            "svix-signature": signer.sign(svix_id, now, body),
        },
        "body": body,
    }


ENDPOINTS = ("ours", "anymail", "floor", "anymail_store", "floor_machine")
NAMES = {
    "ours": "Countersign /webhooks/agentmail/<id>/ (verify+store; the applier running beside it)",
    "anymail": "older peer: django-anymail /anymail/resend/tracking/ (verify+signal, stores nothing)",
    "floor": "reference: verify + one INSERT, nothing applied (bench-only view)",
    "anymail_store": "storing anymail: django-anymail + a tracking receiver that stores each event",
    "floor_machine": "reference under /webhooks/: the same view behind ours' short middleware chain",
}


class Applier:
    """``manage.py webhooks_apply``, the product's dedicated applier loop, as its own process
    beside gunicorn for the whole load: events are applied while they arrive, so the apply lag
    is the one a user would see under this load."""

    def __init__(self, settings_module: str, poll: float | None = None):
        # The command's own default look interval (0.1 s) unless a scenario asks otherwise.
        self.args = [sys.executable, "manage.py", "webhooks_apply"]
        if poll is not None:
            self.args += ["--poll", str(poll)]
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings_module}
        self.proc: subprocess.Popen | None = None

    def __enter__(self):
        self.proc = subprocess.Popen(
            self.args, cwd=REPO_ROOT, env=self.env, stdout=subprocess.DEVNULL
        )
        return self

    def cpu(self) -> float:
        return process_cpu(self.proc.pid) if self.proc and self.proc.poll() is None else 0.0

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _requests(kind: str, context, count: int, offset: int, size: int) -> list[dict]:
    endpoint, secret_text, mailbox, intents = context
    if kind == "ours":
        return _ours(endpoint, secret_text, mailbox, intents, count, offset)
    if kind == "anymail":
        return _anymail(count, size)
    if kind == "floor":
        return _floor(count, size, offset)
    if kind == "floor_machine":
        return _floor(count, size, offset, FLOOR_MACHINE_PATH)
    return _anymail(count, size, ANYMAIL_STORE_PATH)


def _wait_applied(timeout: float = 60) -> float:
    """Seconds until no event is pending (the applier caught up after the load)."""
    from webhooks.models import WebhookEvent

    started = time.monotonic()
    while WebhookEvent.objects.filter(state=WebhookEvent.State.PENDING).exists():
        if time.monotonic() - started > timeout:
            break
        time.sleep(0.05)
    return round(time.monotonic() - started, 2)


def _ledger_check(ours_sent: list[dict], ours_results: list[dict]) -> dict:
    """Every 2xx'd delivery of ours: stored once, left ``pending``, and applied at most once
    (one journal row per svix-id: the applier writes one per event it applies); apply lag
    = applied_at - received_at, both the database's clock."""
    from django.db.models import Count

    from intents.models import IntentEvent
    from webhooks.models import WebhookEvent

    ok_ids = {
        request["headers"]["svix-id"]
        for phase, result in zip(ours_sent, ours_results, strict=True)
        for request, status in zip(phase, result["statuses_in_order"], strict=True)
        if 200 <= status < 300
    }
    rows = list(
        WebhookEvent.objects.filter(svix_id__in=ok_ids).values_list(
            "svix_id", "state", "received_at", "applied_at"
        )
    )
    states = Counter(r[1] for r in rows)
    journal = Counter(
        dict(
            IntentEvent.objects.filter(actor_label__in=ok_ids)
            .values_list("actor_label")
            .annotate(n=Count("id"))
            .values_list("actor_label", "n")
        )
    )
    lags = [(r[3] - r[2]).total_seconds() for r in rows if r[3] is not None]
    return {
        "answered_2xx": len(ok_ids),
        "stored": len(rows),
        "states": dict(states),
        "lost": len(ok_ids) - len(rows) + states.get(WebhookEvent.State.PENDING, 0),
        "applied_twice": sum(n - 1 for n in journal.values() if n > 1),
        "journal_rows": sum(journal.values()),
        "apply_lag": latency_summary(lags),
    }


def rotated(endpoints: list[str], r: int) -> list[str]:
    """Round ``r``'s order: each round starts one endpoint later, so no endpoint always runs
    first (on a cold round, after the applier's quiet) or always after the same neighbour. With
    a fixed order, Countersign's first-place rounds were its two worst in two runs of three."""
    shift = r % len(endpoints)
    return endpoints[shift:] + endpoints[:shift]


def scenario(params: dict) -> dict:
    """Every endpoint in ``params["endpoints"]`` (default all four), alternating for
    ``params["rounds"]`` rounds under one gunicorn, with the applier running; each row reports
    its median round, each ratio the median of the rounds' own ratios."""
    from django.db import connection

    from bench import anymail_store, views_floor

    events, concurrency = params["events"], params["concurrency"]
    endpoints = params.get("endpoints") or list(ENDPOINTS)
    rounds = params.get("rounds", ROUNDS)
    context = _setup(max(1, events // 2))
    per_round = max(1, events // rounds)
    size = round(sum(len(r["body"]) for r in _ours(*context, 4, 10**7)) / 4)
    plan = [
        [
            (kind, _requests(kind, context, per_round, r * per_round, size))
            for kind in rotated(endpoints, r)
        ]
        for r in range(rounds)
    ]
    warm = [request for kind in endpoints for request in _requests(kind, context, 20, 10**6, size)]
    phases = [requests for one_round in plan for _, requests in one_round]
    with connection.cursor() as cursor:
        for create in (*views_floor.CREATES, anymail_store.CREATE):
            cursor.execute(create)
        for table in (views_floor.TABLE, views_floor.MACHINE_TABLE, anymail_store.TABLE):
            cursor.execute(f"TRUNCATE {table}")
    connection.close()
    with (
        # A dedicated applier runs, so the web processes enqueue no wake-up tasks
        # (WEBHOOK_APPLY_WAKE=0, as DEPLOYMENT.md says for that set-up).
        Gunicorn(
            "bench.settings_peers",
            workers=params["http_workers"],
            env={**os.environ, "WEBHOOK_APPLY_WAKE": "0"},
        ) as server,
        Applier("bench.settings_peers") as applier_process,
    ):
        # The warm-up's events are applied before the load: the applier has started (Django's
        # start-up is not apply lag) and every process holds its connection.
        load(server.base, warm, concurrency=concurrency)
        _wait_applied(timeout=120)
        applier_cpu = applier_process.cpu()
        measured = load(server.base, *phases, concurrency=concurrency, statuses=True)
        catch_up_s = _wait_applied()
        applier_cpu = applier_process.cpu() - applier_cpu
        description = server.description
    by_kind: dict[str, list[dict]] = {kind: [] for kind in endpoints}
    sent: dict[str, list[list[dict]]] = {kind: [] for kind in endpoints}
    for (kind, requests), result in zip(
        [x for one_round in plan for x in one_round], measured, strict=True
    ):
        by_kind[kind].append(result)
        sent[kind].append(requests)
    stored = _stored_counts(endpoints)
    rows = []
    for kind in endpoints:
        row = {"kind": kind, "name": NAMES[kind], **_median(by_kind[kind])}
        row["rounds_per_s"] = [x["per_s"] for x in by_kind[kind]]
        # The median round's statuses hide another round's failures: every answer that was not
        # a 2xx, by round, with the first bodies of each status.
        row["not_2xx"] = _not_2xx(by_kind[kind])
        row["stored"] = stored.get(kind, "-")
        if kind == "ours":
            row.update(_ledger_check(sent["ours"], by_kind["ours"]))
            row["applied"] = row["states"].get("applied", 0)
            row["catch_up_after_load_s"] = catch_up_s
            row["applier_cpu_ms_per_event"] = round(
                applier_cpu * 1000 / max(1, row["answered_2xx"]), 2
            )
        for result in by_kind[kind]:
            result.pop("statuses_in_order", None)
        row.pop("statuses_in_order", None)
        rows.append(row)
    return {
        "server": description,
        "http_workers": params["http_workers"],
        "concurrency": concurrency,
        "body_bytes": size,
        "events_per_endpoint": per_round * rounds,
        "rounds": rounds,
        "rows": rows,
        "ratios": _ratios(by_kind),
    }


def _not_2xx(results: list[dict]) -> list[dict]:
    out = []
    for number, result in enumerate(results, start=1):
        failed = {k: v for k, v in result["statuses"].items() if not k.startswith("2")}
        if failed:
            bodies = [b for b in result.get("bodies", []) if not str(b["status"]).startswith("2")]
            out.append({"round": number, "statuses": failed, "bodies": bodies})
    return out


def _median(results: list[dict]) -> dict:
    return dict(sorted(results, key=lambda x: x["per_s"])[(len(results) - 1) // 2])


def _ratios(by_kind: dict[str, list[dict]]) -> dict:
    """Ours over each other endpoint, round by round; the median of those, and each."""
    if "ours" not in by_kind:
        return {}
    out = {}
    for kind, results in by_kind.items():
        if kind == "ours":
            continue
        each = [
            round(a["per_s"] / b["per_s"], 3) for a, b in zip(by_kind["ours"], results, strict=True)
        ]
        out[kind] = {"median": sorted(each)[(len(each) - 1) // 2], "rounds": each}
    return out


def _stored_counts(endpoints) -> dict:
    """Rows each endpoint stored, warm-up requests (20 each) left out."""
    from django.db import connection

    from bench import anymail_store, views_floor
    from webhooks.models import WebhookEvent

    out = {}
    with connection.cursor() as cursor:
        for kind, table in (
            ("floor", views_floor.TABLE),
            ("floor_machine", views_floor.MACHINE_TABLE),
            ("anymail_store", anymail_store.TABLE),
        ):
            if kind in endpoints:
                cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608
                out[kind] = cursor.fetchone()[0] - 20
    if "ours" in endpoints:
        out["ours"] = WebhookEvent.objects.count() - 20
    if "anymail" in endpoints:
        out["anymail"] = 0
    return out
