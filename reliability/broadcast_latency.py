"""Reply latency while a broadcast drains: approve-to-accepted (p50, p95) of replies approved in
the broadcast's own tenant (same mailbox, so the same AgentMail key) and in another tenant,
first with nothing else to send, then while a broadcast drains at its full rate. Prints both
side by side; a benchmark, not a test (``make broadcast-latency``)."""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time

from reliability.broadcast_crash import ROOT, _kill, _wait, _worker, scratch_run


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _replies(targets, n: int, gap: float) -> list[tuple[str, int]]:
    from intents.services import draft_approve, draft_create

    approved = []
    for i in range(n):
        label, tenant, mailbox, approver = targets[i % len(targets)]
        draft = draft_create(
            tenant=tenant,
            mailbox=mailbox,
            to=[f"reply{i}-{time.monotonic_ns()}@example.com"],
            subject=f"Re: question {i}",
            text="Here is your answer.",
            actor_user=approver,
        )
        version = draft.versions.get()
        intent = draft_approve(
            tenant=tenant,
            draft_id=draft.pk,
            version=1,
            content_hash=version.content_hash,
            actor=approver,
        )
        approved.append((label, intent.pk))
        time.sleep(gap)
    return approved


def _latencies(approved: list[tuple[str, int]]) -> dict[str, list[float]]:
    from intents.models import IntentEvent, SendIntent

    ids = [pk for _, pk in approved]
    _wait(
        lambda: SendIntent.objects.filter(pk__in=ids, state="accepted").count() == len(ids),
        300,
        "replies accepted",
    )
    accepted_at = dict(
        IntentEvent.objects.filter(intent_id__in=ids, action="intent.accepted").values_list(
            "intent_id", "created_at"
        )
    )
    approved_at = dict(SendIntent.objects.filter(pk__in=ids).values_list("pk", "approved_at"))
    out: dict[str, list[float]] = {}
    for label, pk in approved:
        out.setdefault(label, []).append((accepted_at[pk] - approved_at[pk]).total_seconds())
    return out


def _qcluster(env: dict[str, str]) -> subprocess.Popen:
    """django-q2's cluster as ``make run`` starts it (scripts/devstack.py): ``manage.py qcluster``
    with the settings' Q_CLUSTER (2 workers unless Q_WORKERS says otherwise)."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _phase(runner: str, env, args, tenant, approver, targets) -> dict:
    """Idle replies, then replies while a fresh broadcast drains, with one runner process; the
    broadcast is cancelled and its queued sends settled before the runner stops."""
    from intents.errors import NotPending
    from intents.models import Broadcast, SendIntent
    from intents.services.broadcast_controls import broadcast_cancel
    from intents.services.broadcasts import broadcast_approve, broadcast_create

    if runner == "qcluster":
        from django_q.models import OrmQ

        # Wake-ups left by the other runner's phase (intents_worker reads no queue).
        OrmQ.objects.all().delete()
        proc = _qcluster(env)
    else:
        proc = _worker(env, threads=args.threads, reply_threads=args.reply_threads)
    try:
        # Warm-up, not measured: the processes are up and have sent for both tenants.
        _latencies(_replies(targets, 4, 0))
        idle = _latencies(_replies(targets, args.replies, 0.1))
        broadcast = broadcast_create(
            tenant=tenant,
            mailbox=targets[0][2],
            subject="Notice {{ n }}",
            text="Hello {{ n }}",
            recipients=[
                {"address": f"{runner}-b{i}@example.com", "variables": {"n": i}}
                for i in range(args.recipients)
            ],
        )
        broadcast = broadcast_approve(
            tenant=tenant,
            broadcast_id=broadcast.pk,
            content_hash=broadcast.content_hash,
            actor=approver,
        )
        # Replies approved from the moment of approval: the fan-out (pages of intents created by
        # a queue task) and then the sending, each its own window.
        fanning = _latencies(_replies(targets, args.replies, 0.1))
        fanout_state = Broadcast.objects.get(pk=broadcast.pk).fanout_position
        sends = SendIntent.objects.filter(broadcast=broadcast)
        _wait(lambda: sends.filter(state="accepted").count() >= 50, 300, "broadcast sending")
        accepted_before = sends.filter(state="accepted").count()
        started = time.monotonic()
        draining = _latencies(_replies(targets, args.replies, 0.1))
        seconds = time.monotonic() - started
        accepted_during = sends.filter(state="accepted").count() - accepted_before
        left = sends.exclude(state="accepted").count()
        # Refused when every send went out already: nothing is left to cancel.
        with contextlib.suppress(NotPending):
            broadcast_cancel(tenant=tenant, broadcast_id=broadcast.pk, actor=approver)
        _wait(lambda: not sends.filter(state="queued").exists(), 300, "cancellation")
    finally:
        _kill(proc)
    return {
        "idle": idle,
        "fanning": fanning,
        "fanned": fanout_state + 1,
        "draining": draining,
        "left": left,
        "broadcast_rate": accepted_during / seconds if seconds else 0.0,
    }


def _report(runner: str, figures: dict) -> None:
    print(
        f"{runner}: fan-out at recipient {figures['fanned']} when the first window ended; "
        f"{figures['left']} sends not yet accepted when the second ended "
        f"({figures['broadcast_rate']:.1f} broadcast sends/s during it)"
    )
    print(
        f"  {'replies':<14}{'idle p50':>9}{'idle p95':>9}"
        f"{'fan-out p50':>12}{'p95':>7}{'ratio':>7}{'sending p50':>12}{'p95':>7}{'ratio':>7}"
    )
    for label in ("same tenant", "other tenant"):
        idle = figures["idle"].get(label, [])
        base = _quantile(idle, 0.95)
        row = f"  {label:<14}{statistics.median(idle):>9.3f}{base:>9.3f}"
        for window in ("fanning", "draining"):
            values = figures[window].get(label, [])
            p95 = _quantile(values, 0.95)
            row += f"{statistics.median(values):>12.3f}{p95:>7.3f}{p95 / base:>6.2f}x"
        print(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reliability.broadcast_latency")
    parser.add_argument("--recipients", type=int, default=10_000)
    parser.add_argument("--replies", type=int, default=40)
    parser.add_argument("--key-rate", type=float, default=40, help="SEND_RATE_PER_KEY")
    parser.add_argument(
        "--runner",
        choices=("both", "worker", "qcluster"),
        default="both",
        help="intents_worker, django-q2's qcluster (what make run starts), or one after the other",
    )
    parser.add_argument("--threads", type=int, default=1, help="sender threads of intents_worker")
    parser.add_argument("--reply-threads", type=int, default=1, help="its threads for replies only")
    args = parser.parse_args(argv)
    settings = {
        "SEND_RATE_PER_KEY": str(args.key_rate),
        "SEND_BURST_PER_KEY": str(args.key_rate),
        "BROADCAST_RATE_PER_SECOND": str(args.key_rate),  # capped at BROADCAST_KEY_SHARE
        "SEND_LEASE_SECONDS": "10",
    }
    runners = ("worker", "qcluster") if args.runner == "both" else (args.runner,)
    results = {}
    with scratch_run(settings) as (_sandbox, env, tenant, mailbox, approver, make_tenant):
        from tenants.models import Tenant

        other = make_tenant("other")
        # No undo window: the figure is the sending path's, not the configured hold.
        Tenant.objects.filter(pk__in=[tenant.pk, other[0].pk]).update(send_hold_seconds=0)
        tenant.refresh_from_db()
        targets = [
            ("same tenant", tenant, mailbox, approver),
            ("other tenant", other[0], other[1], other[2]),
        ]
        for runner in runners:
            results[runner] = _phase(runner, env, args, tenant, approver, targets)
    print(
        f"{args.recipients} recipients per broadcast, {args.replies} replies per phase, "
        f"SEND_RATE_PER_KEY={args.key_rate:g}; seconds, approve to accepted"
    )
    for runner in runners:
        label = (
            f"intents_worker --threads {args.threads} --reply-threads {args.reply_threads}"
            if runner == "worker"
            else "qcluster (django-q2, as make run)"
        )
        _report(label, results[runner])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
