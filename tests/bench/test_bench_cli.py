"""The benchmark harness still runs end to end (tiny sizes, no timing assertions: benchmarks are
never timed tests). It uses its own databases (bench_smoke*), not the test database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_bench_quick_run_completes_and_checks_its_own_invariants(tmp_path):
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--db-prefix",
            "bench_smoke",
            "--only",
            "dispatch,phases,webhooks,ui",
            "--latencies",
            "0",
            "--n",
            "10",
            "--events",
            "10",
            "--http-workers",
            "1",
            "--ui-sizes",
            "30",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    dispatch = rows["dispatch"]
    assert [r["accepted"] for r in dispatch["countersign"]] == [10]
    assert [r["provider_sends"] for r in dispatch["countersign"]] == [10]
    assert [r["duplicates"] for r in dispatch["countersign"]] == [0]
    assert [r["accepted"] for r in dispatch["post_office"]] == [10]
    assert [r["accepted"] for r in dispatch["post_office_http"]] == [10]
    assert [r["provider_sends"] for r in dispatch["post_office_http"]] == [10]
    assert [r["accepted"] for r in dispatch["db_limit"]] == [10]
    phases = rows["phases"]
    assert phases["intents"] == 40
    assert phases["sdk_outcomes"] == {"accepted": phases["sdk_calls"]}
    assert phases["main_thread_cpu_ms"] > 0
    ours, anymail, floor, anymail_storing = rows["webhooks"]["rows"]
    assert ours["ok"] == ours["requests"]
    assert (ours["stored"], ours["applied"]) == (10, 10)
    assert anymail["ok"] == anymail["requests"]
    assert floor["ok"] == floor["requests"]
    assert floor["stored"] == ours["stored"]  # both rounds, like ours
    assert anymail_storing["ok"] == anymail_storing["requests"]
    assert anymail_storing["stored"] == ours["stored"]
    pages = ("queue", "queue mine", "queue unassigned", "queue escalated", "queue by time left")
    assert {(r["page"], r["pending"]) for r in rows["ui"]["rows"]} == {
        *((page, 30) for page in pages),
        ("draft", 30),
    }
    assert rows["ui"]["queue_queries_constant"] is True
    assert "Dispatch" in completed.stdout
