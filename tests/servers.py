"""Helpers for tests that start the app as a real server process on loopback, on the test
database (tests/ops/test_devstack.py, tests/agent_api/test_mcp.py)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlencode

from django.db import connection

from scripts import devstack

ROOT = Path(__file__).resolve().parents[1]

# Every process a test starts through ``started``; the root conftest kills what is still running
# when the test ends. A test that fails on a timeout must not leave a worker claiming the next
# tests' intents on the same test database (one did: 24 tests failed after it on that xdist worker).
_STARTED: list[subprocess.Popen] = []


def started(proc: subprocess.Popen) -> subprocess.Popen:
    """Register ``proc`` to be killed, if it still runs, when the current test ends."""
    _STARTED.append(proc)
    return proc


def kill_leftovers() -> list[list[str]]:
    """Kill and reap the registered processes still running; returns their command lines."""
    killed = []
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
            killed.append(list(proc.args))
    return killed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_database_url(application_name: str) -> str:
    """The test database, with an application_name that marks the server's connections."""
    s = connection.settings_dict
    query = {
        "host": s["HOST"] or s["OPTIONS"].get("host", ""),
        "application_name": application_name,
    }
    if s["PORT"]:
        query["port"] = s["PORT"]
    user, password = quote(s["USER"] or "", safe=""), quote(s["PASSWORD"] or "", safe="")
    return f"postgresql://{user}:{password}@/{s['NAME']}?{urlencode(query)}"


@contextmanager
def serving(name: str, argv: list[str], *, env: dict, log_path: Path, health_url: str) -> Iterator:
    """Run ``argv`` (a devstack command) until the block ends; yield once ``health_url`` answers."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            devstack.wait_until_serving(name, health_url, proc, timeout=120)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
