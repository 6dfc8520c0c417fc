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
