"""The cluster harness at CI size: test hosts in network namespaces, network faults, then the
history check over the whole cluster must come out clean, and nothing may be left behind."""

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from reliability.cluster import netns

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_small_cluster_run_under_network_faults_loses_and_duplicates_nothing(
    tmp_path, migrated_dump
):
    out = tmp_path / "cluster.json"
    command = [
        sys.executable,
        "-m",
        "reliability.cluster",
        "--workers",
        "2",
        "--intents",
        "30",
        # The six kinds come first, one each, whatever the window (faults.py's schedule); a
        # second apart, they overlap more and all land in the window's first seconds.
        "--fault-seconds",
        "7",
        "--fault-interval",
        "1.0",
        "--drain-seconds",
        "120",
        "--seed",
        "7",
        "--json",
        str(out),
    ]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=migrated_dump,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        # SIGTERM: the harness stops what it started and removes its namespaces.
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=90)
    report = json.loads(out.read_text())
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert (report["lost"], report["duplicated"], report["unexpected"]) == (0, 0, 0)
    assert report["approved"] == 30
    assert report["per_host"]["open_intents"] == 0
    assert report["webhook_events_missing"] == 0
    assert report["webhook_events_applied_twice"] == 0
    # Every kind of network fault happened (the first six are one of each, in random order).
    assert {
        "link delay",
        "link loss",
        "worker<->db partition",
        "worker<->provider partition",
        "broker partition",
        "web host cut off",
    } <= set(report["faults_injected"])
    assert set(report["per_host"]["attempts_by_worker_host"]) <= {"w1", "w2"}
    # Counted per host, and the relays held chunks only for hosts whose link was delayed.
    by_host = report["faults_by_host"]
    totals = sum((Counter(kinds) for kinds in by_host.values()), Counter())
    faults = {k: n for k, n in report["faults_injected"].items() if "in flight" not in k}
    assert {kind: totals[kind] for kind in faults} == faults
    delayed_hosts = {name for name, kinds in by_host.items() if "link delay" in kinds}
    assert set(report["delays_held_by_host"]) <= delayed_hosts
    # Worker faults hit worker hosts only.
    assert [t for _, t in report["fault_timeline"] if "worker<->" in t and ":web" in t] == []
    assert [n for n in netns.namespaces() if n.startswith(f"cs{proc.pid}-")] == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_interrupted_run_stops_everything_and_stale_namespaces_are_cleaned_at_start():
    # A namespace left by a run whose process is gone (a pid above any this machine hands out).
    stale = "cs4194303-db"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "reliability.cluster", "--workers", "1", "--intents", "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    mine = f"cs{proc.pid}-"
    lines = []
    # Interrupt once PostgreSQL, PgBouncer, Redis and the sandbox run on their hosts.
    while not any(line.startswith("cluster: seed") for line in lines) and proc.poll() is None:
        lines.append(proc.stdout.readline())
    running = [n for n in netns.namespaces() if n.startswith(mine)]
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    assert stale not in netns.namespaces()
    assert len(running) == 8  # bridge, ctl, db, broker, provider, web1, web2, w1
    assert [n for n in netns.namespaces() if n.startswith(mine)] == [], rest[-2000:]
    assert not (ROOT / ".data" / f"cluster-{proc.pid}" / "pg").exists()
    assert "removed 8 namespaces" in rest
