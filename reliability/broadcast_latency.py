"""Reply latency while a broadcast drains: approve-to-accepted (p50, p95) of replies approved in
the broadcast's own tenant (same mailbox, so the same AgentMail key) and in another tenant,
first with nothing else to send, then while a broadcast drains at its full rate. Prints both
side by side; a benchmark, not a test (``make broadcast-latency``)."""

from __future__ import annotations

import argparse
import statistics
import time

from reliability.broadcast_crash import _kill, _wait, _worker, scratch_run


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reliability.broadcast_latency")
    parser.add_argument("--recipients", type=int, default=3000)
    parser.add_argument("--replies", type=int, default=40)
    parser.add_argument("--key-rate", type=float, default=40, help="SEND_RATE_PER_KEY")
    parser.add_argument("--threads", type=int, default=1, help="sender threads of the worker")
    parser.add_argument("--reply-threads", type=int, default=1, help="threads for replies only")
    args = parser.parse_args(argv)
    settings = {
        "SEND_RATE_PER_KEY": str(args.key_rate),
        "SEND_BURST_PER_KEY": str(args.key_rate),
        "BROADCAST_RATE_PER_SECOND": str(args.key_rate),  # capped at BROADCAST_KEY_SHARE
        "SEND_LEASE_SECONDS": "10",
    }
    with scratch_run(settings) as (_sandbox, env, tenant, mailbox, approver, make_tenant):
        from intents.models import SendIntent
        from intents.services.broadcasts import (
            broadcast_approve,
            broadcast_cancel,
            broadcast_create,
        )
        from tenants.models import Tenant

        other = make_tenant("other")
        # No undo window: the figure is the sending path's, not the configured hold.
        Tenant.objects.filter(pk__in=[tenant.pk, other[0].pk]).update(send_hold_seconds=0)
        tenant.refresh_from_db()
        targets = [
            ("same tenant", tenant, mailbox, approver),
            ("other tenant", other[0], other[1], other[2]),
        ]
        worker = _worker(env, threads=args.threads, reply_threads=args.reply_threads)
        try:
            # Warm-up, not measured: the worker process is up and has sent for both tenants.
            _latencies(_replies(targets, 4, 0))
            idle = _latencies(_replies(targets, args.replies, 0.1))
            broadcast = broadcast_create(
                tenant=tenant,
                mailbox=mailbox,
                subject="Notice {{ n }}",
                text="Hello {{ n }}",
                recipients=[
                    {"address": f"b{i}@example.com", "variables": {"n": i}}
                    for i in range(args.recipients)
                ],
            )
            broadcast = broadcast_approve(
                tenant=tenant,
                broadcast_id=broadcast.pk,
                content_hash=broadcast.content_hash,
                actor=approver,
            )
            sends = SendIntent.objects.filter(broadcast=broadcast)
            _wait(lambda: sends.filter(state="accepted").count() >= 50, 300, "broadcast sending")
            draining = _latencies(_replies(targets, args.replies, 0.1))
            left = sends.exclude(state="accepted").count()
            broadcast_cancel(tenant=tenant, broadcast_id=broadcast.pk, actor=approver)
        finally:
            _kill(worker)
    print(f"broadcast still draining during the second phase: {left} sends not yet accepted")
    print(f"{'replies':<14}{'idle p50':>10}{'idle p95':>10}{'drain p50':>11}{'drain p95':>11}")
    for label in ("same tenant", "other tenant"):
        a, b = idle.get(label, []), draining.get(label, [])
        print(
            f"{label:<14}{statistics.median(a):>10.3f}{_quantile(a, 0.95):>10.3f}"
            f"{statistics.median(b):>11.3f}{_quantile(b, 0.95):>11.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
