"""Throughput of the cluster with 1, 2, 3 ... worker hosts, in one run, without faults.

    sudo python -m reliability.cluster --scaling 1,2,3 --intents 600 --seed 40

One cluster (the hosts of the largest count; no relays, no faults). For each count k in turn:
`--intents` new drafts are approved while no worker host runs, then worker hosts w1..wk start
(a sender and a django-q2 cluster each, as in every cluster run), every intent of the phase is
drained, and the worker hosts stop gracefully before the next phase. The rate is counted at the
provider (its ledger's clock): first to last send of the phase, and the steady middle (10th to
90th percentile of the phase's sends, leaving out the workers' start-up and the last stragglers).
The first phase (one worker host) is the baseline the others are compared with. Beside each
rate, the CPU the phase used: the machine's (every process on it, the other engineers' too) and
each host's (every process in its namespace), so that where the curve flattens can be read.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psutil

from reliability import nemesis
from reliability.cluster import hosts as h
from reliability.cluster import netns
from reliability.cluster.harness import STOP_TIMEOUT, per_host, prepare, setup
from reliability.cluster.netns import Host

ROLES = {"db": "db", "broker": "broker", "provider": "provider", "ctl": "harness"}


def role(name: str) -> str:
    return ROLES.get(name) or ("web" if name.startswith("web") else "workers")


def host_cpu(hosts: dict[str, Host]) -> dict[str, float]:
    """CPU seconds used so far by the processes in each role's namespaces (with their reaped
    children, as PostgreSQL's finished backends)."""
    used: dict[str, float] = {}
    for name, host in hosts.items():
        pids = netns.sh("ip", "netns", "pids", host.netns, check=False).stdout.split()
        total = 0.0
        for pid in pids:
            try:
                t = psutil.Process(int(pid)).cpu_times()
            except (psutil.Error, ValueError):
                continue
            total += t.user + t.system + t.children_user + t.children_system
        used[role(name)] = used.get(role(name), 0.0) + total
    return used


def phase_rate(sandbox, n: int) -> dict[str, float | None]:
    """Sends per second over the last n sends at the provider (this phase's: the ones before
    were all sent before it began)."""
    times = sorted(nemesis._epoch(send["at"]) for send in sandbox.ledger())[-n:]
    if len(times) < 10:
        return {"first_to_last": None, "steady": None}
    low, high = times[len(times) // 10], times[(9 * len(times)) // 10]
    return {
        "first_to_last": round((len(times) - 1) / max(1e-3, times[-1] - times[0]), 1),
        "steady": round(((9 * len(times)) // 10 - len(times) // 10) / max(1e-3, high - low), 1),
    }


def one_phase(k: int, seed: int, args, hosts, procs: h.Processes, env, sandbox, webs, approved_at):
    from intents.models import SendIntent

    drafts = prepare(args.intents, seed * 100 + k, webs)
    # No pacing (the feed spreads approvals over the fault window): every approval due now.
    nemesis.feed(
        nemesis.Run(args=argparse.Namespace(fault_seconds=1)), drafts, approved_at, args.approvers
    )
    cpu_before, machine_before = host_cpu(hosts), psutil.cpu_times()
    began = time.monotonic()
    started = [p for i in range(k) for p in h.start_worker_host(procs, hosts[f"w{i + 1}"], env)]
    open_intents = SendIntent.objects.exclude(state__in=nemesis.FINAL_OK).count
    while open_intents() and time.monotonic() - began < args.drain_seconds:
        time.sleep(0.25)
    wall = time.monotonic() - began
    cpu_after, machine_after = host_cpu(hosts), psutil.cpu_times()
    for proc in started:
        procs.stop_gracefully(proc, timeout=STOP_TIMEOUT[proc.name.split("-", 1)[1]])
        procs.procs.remove(proc)
    total = sum(machine_after) - sum(machine_before)
    idle = (machine_after.idle + machine_after.iowait) - (
        machine_before.idle + machine_before.iowait
    )
    return {
        "worker_hosts": k,
        "intents": args.intents,
        "left_open": open_intents(),
        "seconds_start_to_drained": round(wall, 1),
        **{f"sends_per_second_{k2}": v for k2, v in phase_rate(sandbox, args.intents).items()},
        "machine_cpu_busy_pct": round(100 * (total - idle) / max(1e-3, total), 1),
        "cpu_seconds_by_role": {
            r: round(cpu_after.get(r, 0.0) - cpu_before.get(r, 0.0), 1) for r in cpu_after
        },
    }


def scale(args, hosts, procs: h.Processes, seed: int, started: float) -> dict[str, Any]:
    env, sandbox, webs = setup(args, hosts, procs, None, seed)
    run = nemesis.Run(args=args)
    approved_at: dict[int, float] = {}
    phases = []
    for k in args.scaling:
        phases.append(one_phase(k, seed, args, hosts, procs, env, sandbox, webs, approved_at))
        print(f"cluster: scaling phase {phases[-1]}", flush=True)
    nemesis.settle_webhooks(sandbox, timeout=180)
    from webhooks.services.apply import events_replay_pending

    events_replay_pending()
    result = nemesis.check(run, sandbox, approved_at)
    baseline = phases[0]["sends_per_second_steady"] or 0
    for phase in phases:
        steady = phase["sends_per_second_steady"]
        phase["vs_first"] = round(steady / baseline, 2) if steady and baseline else None
    result.update(
        {
            "seed": seed,
            "workers": max(args.scaling),
            "scaling": phases,
            "fault_seconds": 0,
            "faults_injected": {},
            "fault_errors": [],
            "faults_by_host": {},
            "delays_held_by_host": {},
            "faults_stopped_at_s": 0,
            "approvals_done_at_s": None,
            "drain_seconds_after_faults": None,
            "per_host": per_host(sandbox, webs),
            "total_seconds": round(time.monotonic() - started, 1),
        }
    )
    return result


def print_scaling(phases: list[dict]) -> None:
    print()
    print(
        "worker hosts | sends/s steady (first-to-last) | vs 1 host | machine CPU busy | CPU s by role"
    )
    for p in phases:
        roles = ", ".join(f"{r} {s}" for r, s in sorted(p["cpu_seconds_by_role"].items()))
        print(
            f"{p['worker_hosts']:>12} | {p['sends_per_second_steady']} "
            f"({p['sends_per_second_first_to_last']}) | {p['vs_first']} | "
            f"{p['machine_cpu_busy_pct']} % | {roles}"
        )
