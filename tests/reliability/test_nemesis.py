"""The nemesis at a small scale: every fault kind, then the history check must come out clean."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# The harness bounds itself at 420 s; pytest-timeout must not cut it first.
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_small_nemesis_run_loses_and_duplicates_nothing(tmp_path, migrated_dump):
    out = tmp_path / "nemesis.json"
    # Through issue 4's report command, which execs the nemesis: both are covered.
    command = [
        sys.executable,
        "manage.py",
        "chaos",
        "--workers",
        "2",
        "--intents",
        "40",
        "--seconds",
        "12",
        "--drain-seconds",
        "150",
        "--json",
        str(out),
        "--logs",
        str(tmp_path / "logs"),
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
        stdout, stderr = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        # SIGTERM, not SIGKILL: the harness then stops every process it started.
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=60)
    result = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
    report = json.loads(out.read_text())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (report["lost"], report["duplicated"], report["unexpected"]) == (0, 0, 0)
    assert report["approved"] == 40
    assert report["webhook_events_missing"] == 0
    assert report["webhook_events_applied_twice"] == 0
    assert {"SIGKILL worker", "SIGSTOP worker past its lease", "PostgreSQL restart"} <= set(
        report["faults_injected"]
    )
    # --logs kept a log file per process started (a worker killed before it logged anything
    # leaves an empty one), and between them they logged the sends.
    logs = tmp_path / "logs"
    worker_logs = [log.read_text() for log in logs.glob("*-intents_worker.log")]
    restarted = report["faults_injected"].get("worker restarted by supervisor", 0)
    assert len(worker_logs) >= 2 + restarted
    cluster = "".join(log.read_text() for log in logs.glob("*-qcluster.log"))
    assert "intents.intent.accepted" in "".join(worker_logs) + cluster


def test_the_fault_window_lasts_until_every_kind_of_fault_was_tried_once():
    """A CI run on a loaded machine ended its 12 s window before its SIGSTOP came (injecting a
    PostgreSQL restart or a worker with a skewed clock took seconds each): the window waits for
    the first round, up to a grace, and not past it."""
    import argparse
    import threading
    import time

    from reliability.nemesis import Run, wait_fault_window

    run = Run(args=argparse.Namespace())
    started = time.monotonic()
    threading.Timer(0.6, run.every_kind_tried.set).start()

    wait_fault_window(run, started, seconds=0.2, grace=5, tick=0.05)

    assert 0.55 <= time.monotonic() - started < 2

    never = Run(args=argparse.Namespace())
    started = time.monotonic()
    wait_fault_window(never, started, seconds=0.2, grace=0.3, tick=0.05)
    assert 0.5 <= time.monotonic() - started < 1.5
