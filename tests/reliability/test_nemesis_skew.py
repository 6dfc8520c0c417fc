"""The nemesis's skewed-clock worker skews the wall clock only: its timed waits still end."""

import argparse
import os
import shutil
import signal
import subprocess
import time

import pytest

from reliability.nemesis import Run, manage, signal_group

WAIT = (
    "import datetime, os, threading, time\n"
    "started = time.monotonic()\n"
    "threading.Event().wait(0.05)\n"
    "assert time.monotonic() - started < 5\n"
    "skew = datetime.datetime.now(datetime.UTC).timestamp() - float(os.environ['REAL'])\n"
    "assert skew > 3000, skew\n"
)


@pytest.mark.skipif(shutil.which("faketime") is None, reason="faketime is not installed")
def test_a_worker_an_hour_ahead_still_finishes_a_timed_wait():
    run = Run(args=argparse.Namespace(logs=None))
    run.env = {**os.environ, "REAL": str(time.time())}
    proc = manage(run, "shell", "-c", WAIT, skew="+1h")
    try:
        # Before FAKETIME_DONT_FAKE_MONOTONIC the Event.wait never returned.
        assert proc.wait(timeout=30) == 0
    except subprocess.TimeoutExpired:
        signal_group(proc, signal.SIGKILL)  # faketime and the Python it runs
        proc.wait(timeout=10)
        pytest.fail("the skewed process hung in a 0.05 s wait")
