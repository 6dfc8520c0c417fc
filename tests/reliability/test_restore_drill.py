"""The disaster-recovery drill at suite size: a backup taken while sends go on, restored into a
fresh database after the sends went on, workers on it; the provider's ledger must show nothing
sent twice, and the intents the backup held open must end resolved with their own keys."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_restored_backup_resolves_open_intents_without_a_second_send(tmp_path, migrated_template):
    """The drill makes and drops its own databases on the test session's server, each a copy of
    the suite's migrated template."""
    out = tmp_path / "drill.json"
    admin, template = migrated_template
    command = [sys.executable, "-m", "reliability.restore_drill", "--server-url", admin]
    command += ["--template", template]
    command += ["--intents", "16", "--workers", "1", "--feed-seconds", "8", "--backup-at", "4"]
    command += ["--after-backup", "4", "--drain-seconds", "90", "--seed", "3"]
    command += ["--json", str(out)]
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        # SIGTERM: the drill stops its workers and sandbox and drops its databases.
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    report = json.loads(out.read_text())

    assert report["duplicated"] == 0
    assert report["lost"] == 0
    assert report["accepted_not_matching_provider"] == 0
    # The drill really restored intents that were open in the backup and already sent by the
    # lost database afterwards: their second request got the provider's original answer.
    assert report["held_open_by_backup"] > 0
    assert report["of_which_already_sent_before_restore"] > 0
    assert report["provider_sends"] == report["provider_sends_before_restore"] + sum(
        n for how, n in report["resolved"].items() if "first sent after" in how
    )
