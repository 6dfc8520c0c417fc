"""Processes that share the test's database: their environment, and Redis / PgBouncer servers
started on a free loopback port for one test (never the machine's own)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from reliability.cluster import daemons

ROOT = Path(__file__).resolve().parents[2]


def test_database_url(*, host: str | None = None, port: int | None = None) -> str:
    """The URL of this test's database, or of the same database through host:port."""
    from django.db import connection

    s = connection.settings_dict
    auth = quote(s["USER"] or "", safe="")
    if host is not None:
        return f"postgresql://{auth}@{host}:{port}/{s['NAME']}"
    query = urlencode({k: v for k, v in s.get("OPTIONS", {}).items() if k == "host"})
    where = quote(s["HOST"] or "", safe="") + (f":{s['PORT']}" if s.get("PORT") else "")
    return f"postgresql://{auth}@{where}/{s['NAME']}" + (f"?{query}" if query else "")


def process_env(**extra) -> dict[str, str]:
    env = {
        **os.environ,
        "COUNTERSIGN_ENV": "test",
        "DATABASE_URL": test_database_url(),
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


def manage(*args: str, env: dict[str, str], timeout: float = 60) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def wait_for(condition, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout} s")


@pytest.fixture
def redis_url():
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    port = daemons.free_port()
    proc = subprocess.Popen(
        daemons.redis_argv(bind="127.0.0.1", port=port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        daemons.wait_port("127.0.0.1", port, proc=proc)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        daemons.stop(proc)


@pytest.fixture
def pgbouncer_url(transactional_db):
    """This test's database through a PgBouncer in transaction mode on a free loopback port."""
    if shutil.which("pgbouncer") is None:
        pytest.fail("pgbouncer is not installed (apt-get install pgbouncer)")
    from django.db import connection

    s = connection.settings_dict
    server_host = s.get("OPTIONS", {}).get("host") or s["HOST"]
    port = daemons.free_port()
    folder = daemons.pgbouncer_files(
        listen="127.0.0.1", port=port, server_host=server_host, server_port=int(s["PORT"] or 5432)
    )
    proc = subprocess.Popen(
        daemons.pgbouncer_argv(folder), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        daemons.wait_port("127.0.0.1", port, proc=proc)
        yield test_database_url(host="127.0.0.1", port=port)
    finally:
        daemons.stop(proc)
        shutil.rmtree(folder, ignore_errors=True)
