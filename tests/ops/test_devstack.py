"""`make run` (scripts/devstack.py): the web server it starts keeps the database connections
bounded under a burst of concurrent requests (a webhook storm), and "up" waits for HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from scripts import devstack
from tests.servers import free_port, server_database_url, serving

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
APP_NAME = "devstack-burst-test"
CLIENTS = 60


def server_connections() -> int:
    params = {k: v for k, v in connection.get_connection_params().items() if k != "cursor_factory"}
    with psycopg.connect(**params, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [APP_NAME]
        ).fetchone()[0]


def get_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture
def devstack_web(tmp_path):
    """The web process exactly as devstack starts it, on the test database."""
    addr = f"127.0.0.1:{free_port()}"
    env = {**devstack.child_env(), "DATABASE_URL": server_database_url(APP_NAME)}
    with serving(
        "web",
        devstack.web_command(addr),
        env=env,
        log_path=tmp_path / "web.log",
        health_url=f"http://{addr}/healthz",
    ):
        yield f"http://{addr}"


def test_a_burst_of_concurrent_requests_keeps_the_connection_count_bounded(devstack_web):
    peak = 0
    stop = threading.Event()

    def watch():
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, server_connections())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            statuses = list(pool.map(get_status, [f"{devstack_web}/readyz"] * (CLIENTS * 3)))
    finally:
        stop.set()
        watcher.join()
    after = server_connections()

    assert set(statuses) == {200}
    assert peak <= devstack.WEB_WORKERS
    assert after <= devstack.WEB_WORKERS


def test_up_waits_for_an_answer_and_gives_up_when_the_process_dies():
    with socket.socket() as silent:
        # Bound and listening, never answering: what a port taken by something else looks like.
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        addr = f"127.0.0.1:{silent.getsockname()[1]}"
        dead = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
        dead.wait()

        with pytest.raises(SystemExit, match="web exited with 3 before answering"):
            devstack.wait_until_serving("web", f"http://{addr}/healthz", dead, timeout=10)
        assert devstack.port_in_use(addr)
    assert not devstack.port_in_use(f"127.0.0.1:{free_port()}")


def test_the_demo_is_provisioned_only_in_the_sandbox_devstack_started(sandbox_server, tmp_path):
    """The port is checked before the sandbox starts; a process that took it in between answered
    the health check, and seed_demo provisioned this clone's pods into it."""
    port = free_port()
    argv = devstack.manage("sandbox", "--port", str(port), "--db", str(tmp_path / "s.sqlite3"))
    env = {**devstack.child_env(), "DATABASE_URL": server_database_url("devstack-sandbox-test")}
    base_url = f"http://127.0.0.1:{port}"
    with serving(
        "sandbox", argv, env=env, log_path=tmp_path / "sandbox.log", health_url=base_url
    ) as ours:
        devstack.require_own_sandbox(base_url, ours)
        with pytest.raises(SystemExit, match="is not the sandbox started here"):
            devstack.require_own_sandbox(sandbox_server.base_url, ours)


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("COUNTERSIGN_WEB_ADDR", "garbage", "host:port"),
        ("COUNTERSIGN_WEB_ADDR", "127.0.0.1:99999", "host:port"),
        ("COUNTERSIGN_WEB_ADDR", ":8100", "loopback"),
        ("COUNTERSIGN_WEB_ADDR", "0.0.0.0:8100", "loopback"),
        ("COUNTERSIGN_MCP_ADDR", "192.0.2.7:8101", "loopback"),
        ("SANDBOX_PORT", "eighty", "a port"),
        ("SANDBOX_PORT", "0", "a port"),
    ],
)
def test_make_run_refuses_an_address_off_loopback_or_malformed_naming_the_variable(
    variable, value, said
):
    # README: `make run` listens on loopback only (its demo accounts share one password). A
    # typo was a traceback from the port check, and 0.0.0.0 served the demo to the network.
    with socket.socket() as taken:
        # The other addresses name a port in use, so a run that let the value through stops
        # there, before it starts anything.
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        addresses = {
            "COUNTERSIGN_WEB_ADDR": f"127.0.0.1:{port}",
            "COUNTERSIGN_MCP_ADDR": f"127.0.0.1:{port}",
            "SANDBOX_PORT": str(port),
        }
        run = subprocess.run(
            [sys.executable, "scripts/devstack.py"],
            cwd=ROOT,
            env={**devstack.child_env(), **addresses, variable: value},
            capture_output=True,
            text=True,
            timeout=60,
        )
    output = run.stdout + run.stderr
    assert run.returncode == 1
    assert f"{variable} must" in output
    assert said in output
    assert repr(value) in output
    assert "Traceback" not in output


def test_a_port_whose_last_connections_wait_out_their_close_is_not_in_use():
    # Right after Ctrl-C, `make run` again said the web port was in use (another `make run`?)
    # for a minute: the server had closed its HTTP connections first, which leaves them in
    # TIME_WAIT, and the check bound without SO_REUSEADDR, which gunicorn's own bind sets.
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        addr = f"127.0.0.1:{server.getsockname()[1]}"
        with socket.create_connection(server.getsockname()) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server closes first, as gunicorn does after a response
            client.recv(1)
        assert devstack.port_in_use(addr)
    assert not devstack.port_in_use(addr)
