"""The cluster run: Countersign on test hosts (network namespaces), under network faults.

    sudo python -m reliability.cluster --workers 3 --intents 2000 --fault-seconds 60 --seed 1

Hosts, each its own namespace and address on one bridge (10.77.0.0/24, no route out):
ctl (this harness: approvals, faults, the check), db (PostgreSQL + PgBouncer, transaction mode),
broker (Redis), provider (the sandbox AgentMail), web1/web2 (gunicorn; tenant "north" has its
webhook on web1, "south" on web2), w1..wN (a sender and a django-q2 cluster each, through
PgBouncer and Redis). Faults at random (seeded): 5-20 % packet loss on one host's link
(nftables), 200-800 ms delay on one host's link (this kernel has no tc netem: relays in front of
PgBouncer, Redis, the sandbox and gunicorn hold the delayed host's chunks, forward.py),
worker<->db and worker<->provider partitions, the broker partitioned, a web host cut off while
the provider retries its webhooks. Then the nemesis' history check over the whole cluster (lost,
duplicated, unexpected, recovered), plus counts per host (faults, packets dropped, chunks held).

The outer process (root namespace) builds the namespaces, runs the harness inside `ctl`, and
removes everything on exit, on SIGINT/SIGTERM, and (for runs that died) at the next start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from reliability.cluster import netns

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "reliability" / "results"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m reliability.cluster", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--workers", type=int, default=3, help="worker hosts")
    parser.add_argument("--intents", type=int, default=2000)
    parser.add_argument("--fault-seconds", type=float, default=60)
    parser.add_argument("--fault-interval", type=float, default=2.0)
    parser.add_argument("--drain-seconds", type=float, default=240)
    parser.add_argument(
        "--approvers",
        type=int,
        default=6,
        help="approval threads (each approval is a few round trips through PgBouncer)",
    )
    parser.add_argument("--no-faults", action="store_true", help="no network faults")
    parser.add_argument(
        "--throughput",
        action="store_true",
        help="approve everything before the workers start (with --no-faults: a throughput run)",
    )
    parser.add_argument(
        "--broker-down", type=float, default=0, help="stop Redis this many seconds mid-run"
    )
    parser.add_argument(
        "--rolling",
        action="store_true",
        help="stop (SIGTERM) and restart every worker host, then every web host, one by one",
    )
    parser.add_argument(
        "--rolling-pause", type=float, default=3.0, help="seconds between two hosts' restarts"
    )
    parser.add_argument(
        "--rolling-web-timeout",
        type=float,
        default=600,
        help="seconds a restarted web host may take to answer /healthz",
    )
    parser.add_argument(
        "--scaling",
        type=lambda text: [int(k) for k in text.split(",")],
        default=None,
        help="e.g. 1,2,3: a throughput run without faults, --intents per worker-host count "
        "(reliability/cluster/scaling.py)",
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--inner", type=int, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def host_names(workers: int) -> list[str]:
    return ["db", "broker", "provider", "web1", "web2", *(f"w{i + 1}" for i in range(workers))]


def outer(args: argparse.Namespace, argv: list[str]) -> int:
    if os.geteuid() != 0:
        raise SystemExit("cluster: needs root (network namespaces)")
    for tool in ("ip", "nft", "unshare", "runuser", "redis-server", "pgbouncer"):
        if shutil.which(tool) is None:
            raise SystemExit(f"cluster: {tool} is not installed")
    stale = netns.cleanup_stale()
    for run_id in stale:
        shutil.rmtree(ROOT / ".data" / f"cluster-{run_id}", ignore_errors=True)
    if stale:
        print(f"cluster: removed the namespaces of dead runs {stale}", flush=True)
    run_id = os.getpid()
    hosts = netns.plan(run_id, host_names(args.workers))
    inner_proc = None

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    try:
        netns.build(run_id, hosts)
        inner_proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                hosts["ctl"].netns,
                sys.executable,
                "-m",
                "reliability.cluster",
                *argv,
                "--inner",
                str(run_id),
            ],
            cwd=ROOT,
        )
        return inner_proc.wait()
    finally:
        if inner_proc is not None and inner_proc.poll() is None:
            # The harness stops what it started on SIGTERM; give it the time to.
            inner_proc.terminate()
            try:
                inner_proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                inner_proc.kill()
        removed = netns.destroy(run_id)
        keep_logs_only(ROOT / ".data" / f"cluster-{run_id}")
        print(
            f"cluster: removed {len(removed)} namespaces and the run's data (logs in .data/cluster-{run_id})",
            flush=True,
        )


def keep_logs_only(folder: Path) -> None:
    """The run's data goes (PostgreSQL's files, the sandbox's database); its logs stay."""
    for item in folder.glob("*"):
        if item.is_dir():
            shutil.rmtree(item, ignore_errors=True)
        elif item.suffix != ".log":
            item.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    if args.scaling:
        args.workers, args.no_faults = max(args.scaling), True
    if args.workers < 1 or args.intents < 1:
        raise SystemExit("cluster: need --workers >= 1 and --intents >= 1")
    if args.inner is None:
        return outer(args, argv)
    from reliability.cluster.harness import inner

    return inner(args, netns.plan(args.inner, host_names(args.workers)), RESULTS)


if __name__ == "__main__":
    sys.exit(main())
