"""The benchmark harness still runs end to end (tiny sizes, no timing assertions: benchmarks are
never timed tests). It uses its own databases (bench_smoke*), not the test database.

The suite runs the rows the issues' targets are judged by (dispatch against its peers, webhook
ingestion against its peers); the phase profile and the review-page rows run under
`make test-full` (their query counts are the suite's own tests/review/test_queue_scale.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sizes import FULL

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def run_quick(tmp_path, only: str, template: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "bench.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--db-prefix",
            "bench_smoke",
            "--template",
            template,
            "--only",
            only,
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
    return completed, json.loads(out.read_text())["rows"]


def test_bench_quick_dispatch_and_webhook_rows_check_their_own_invariants(
    tmp_path, migrated_template
):
    completed, rows = run_quick(tmp_path, "dispatch,webhooks", migrated_template[1])
    dispatch = rows["dispatch"]
    assert [r["accepted"] for r in dispatch["countersign"]] == [10]
    assert [r["provider_sends"] for r in dispatch["countersign"]] == [10]
    assert [r["duplicates"] for r in dispatch["countersign"]] == [0]
    assert [r["accepted"] for r in dispatch["post_office"]] == [10]
    assert [r["accepted"] for r in dispatch["post_office_http"]] == [10]
    assert [r["provider_sends"] for r in dispatch["post_office_http"]] == [10]
    assert [r["accepted"] for r in dispatch["db_limit"]] == [10]
    (ceiling,) = dispatch["sdk_ceiling"]
    assert [(x["accepted"], x["provider_sends"]) for x in ceiling["layouts"]] == [(10, 10)] * 2
    assert ceiling["duplicates"] == 0
    assert set(dispatch["ratios"][0]) == {
        "latency_ms",
        "post_office",
        "post_office_http",
        "sdk_ceiling",
    }
    ours, anymail, floor, anymail_storing, floor_machine = rows["webhooks"]["rows"]
    assert ours["ok"] == ours["requests"]
    # The applier ran beside the load: every 2xx'd event stored and applied, once each.
    assert (ours["answered_2xx"], ours["stored"], ours["applied"]) == (9, 9, 9)
    assert (ours["lost"], ours["applied_twice"]) == (0, 0)
    assert ours["apply_lag"]["p95_ms"] is not None
    assert anymail["ok"] == anymail["requests"]
    assert floor["ok"] == floor["requests"]
    assert floor["stored"] == ours["stored"]  # every round, like ours
    assert anymail_storing["ok"] == anymail_storing["requests"]
    assert anymail_storing["stored"] == ours["stored"]
    # The reference under /webhooks/ (served through the machine route, as ours is).
    assert floor_machine["ok"] == floor_machine["requests"]
    assert floor_machine["stored"] == ours["stored"]
    assert "Dispatch" in completed.stdout


@pytest.mark.skipif(not FULL, reason="phase profile and review-page rows: make test-full")
def test_bench_quick_phase_and_review_page_rows_check_their_own_invariants(
    tmp_path, migrated_template
):
    _, rows = run_quick(tmp_path, "phases,ui", migrated_template[1])
    phases = rows["phases"]
    assert phases["intents"] == 40
    assert phases["sdk_outcomes"] == {"accepted": phases["sdk_calls"]}
    assert phases["main_thread_cpu_ms"] > 0
    pages = ("queue", "queue mine", "queue unassigned", "queue escalated", "queue by time left")
    assert {(r["page"], r["pending"]) for r in rows["ui"]["rows"]} == {
        *((page, 30) for page in pages),
        ("draft", 30),
    }
    assert rows["ui"]["queue_queries_constant"] is True
