"""Run the whole app for a demo: sandbox AgentMail, web server, MCP server, worker, demo agent.

Started by `make run` after set-up. Ctrl-C stops every process. Components whose management
command does not exist are skipped with a note, so the stack always starts.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEB = os.environ.get("COUNTERSIGN_WEB_ADDR", "127.0.0.1:8000")
SANDBOX_PORT = os.environ.get("SANDBOX_PORT", "8025")
# The MCP server (config.asgi, /mcp/) is an ASGI app; the web app stays on its WSGI workers.
MCP = os.environ.get("COUNTERSIGN_MCP_ADDR", "127.0.0.1:8001")
# gunicorn sync workers, each holding at most one database connection: a burst of webhooks waits
# in the listen backlog. runserver opened a thread per request, and each thread's persistent
# connection (DB_CONN_MAX_AGE) outlived it, until PostgreSQL refused clients and the receiver
# answered 500 (tests/ops/test_devstack.py).
WEB_WORKERS = 3


def gunicorn(app: str, addr: str, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gunicorn",
        app,
        *options,
        "--bind",
        addr,
        "--graceful-timeout",
        "5",
        "--access-logfile",
        "-",
        "--log-level",
        "warning",
    ]


def web_command(addr: str) -> list[str]:
    return gunicorn("config.wsgi_dev", addr, "--workers", str(WEB_WORKERS), "--timeout", "30")


def mcp_command(addr: str) -> list[str]:
    """gunicorn's own ASGI worker (no second server to install); one process, whose tool calls
    run in MCP_THREADS threads, each with at most one database connection."""
    return gunicorn("config.asgi", addr, "--worker-class", "asgi", "--workers", "1")


def manage(*args: str) -> list[str]:
    return [sys.executable, "manage.py", *args]


PROCESSES = [
    ("sandbox", "sandbox", manage("sandbox", "--port", SANDBOX_PORT)),
    ("web", None, web_command(WEB)),
    ("mcp", None, mcp_command(MCP)),
    ("worker", "qcluster", manage("qcluster")),
    ("agent", "demo_agent", manage("demo_agent")),
]


def child_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault("AGENTMAIL_BASE_URL", f"http://127.0.0.1:{SANDBOX_PORT}")
    # The sandbox delivers the demo tenants' webhooks here: it follows the web address.
    env.setdefault("PUBLIC_BASE_URL", f"http://{WEB}")
    return env


def available_commands() -> set[str]:
    output = subprocess.run(
        manage("help", "--commands"), cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return set(output.split())


def port_in_use(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    with socket.socket() as s:
        # As gunicorn binds: only a listening socket holds the port, not the connections of the
        # last run still in TIME_WAIT (its server closed them first), for a minute after Ctrl-C.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host or "127.0.0.1", int(port)))
        except OSError:
            return True
    return False


def wait_until_serving(name: str, url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Return once `url` answers HTTP; exit if the process dies first or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"[devstack] {name} exited with {proc.returncode} before answering")
        try:
            # Generous: a request sent before a worker booted waits in the backlog, not lost.
            with urllib.request.urlopen(url, timeout=10):  # noqa: S310 - loopback
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"[devstack] {name} did not answer at {url} within {timeout:.0f} s")


def require_own_sandbox(base_url: str, proc: subprocess.Popen) -> None:
    """Exit unless the sandbox answering at ``base_url`` is ``proc``: the demo's pods go to it.
    The port was free when checked; a process that took it since would answer instead."""
    url = f"{base_url}/_sandbox/health"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
            pid = json.load(response).get("pid")
    except (OSError, ValueError, AttributeError):
        pid = None
    if pid != proc.pid:
        raise SystemExit(
            f"[devstack] {base_url} is not the sandbox started here (another process holds the "
            "port, or AGENTMAIL_BASE_URL names another server): the demo mailboxes are not "
            "provisioned there. Choose another port, e.g. `SANDBOX_PORT=8125 make run`."
        )


def address_problem(variable: str, addr: str) -> str | None:
    """Why ``addr`` cannot be where `make run` listens, or None. README: it listens on loopback
    only, since its demo accounts share one published password; a typo was a traceback from
    the port check, and 0.0.0.0 served the demo to every network the machine is on."""
    host, colon, port = addr.rpartition(":")
    if not colon or not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return (
            f"{variable} must be host:port with a port from 1 to 65535, "
            f"like 127.0.0.1:8100; got {addr!r}"
        )
    try:
        loopback = host == "localhost" or ipaddress.IPv4Address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return (
            f"{variable} must name a loopback host (127.0.0.1, or localhost): `make run` serves "
            f"demo accounts that share one password; got {addr!r}"
        )
    return None


def stop_all(children: list[tuple[str, subprocess.Popen]]) -> None:
    for _, proc in children:
        if proc.poll() is None:
            proc.terminate()
    for _, proc in children:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    env = child_env()
    if not (SANDBOX_PORT.isascii() and SANDBOX_PORT.isdigit() and 1 <= int(SANDBOX_PORT) <= 65535):
        print(
            f"[devstack] SANDBOX_PORT must be a port from 1 to 65535; got {SANDBOX_PORT!r}",
            flush=True,
        )
        return 1
    for variable, addr in (("COUNTERSIGN_WEB_ADDR", WEB), ("COUNTERSIGN_MCP_ADDR", MCP)):
        problem = address_problem(variable, addr)
        if problem:
            print(f"[devstack] {problem}", flush=True)
            return 1
    for name, addr, variable in (
        ("web", WEB, "COUNTERSIGN_WEB_ADDR=127.0.0.1:8100"),
        ("mcp", MCP, "COUNTERSIGN_MCP_ADDR=127.0.0.1:8101"),
        ("sandbox", f"127.0.0.1:{SANDBOX_PORT}", "SANDBOX_PORT=8125"),
    ):
        if port_in_use(addr):
            print(
                f"[devstack] {addr} ({name}) is in use: another `make run`? "
                f"Stop it, or choose another port, e.g. `{variable} make run`.",
                flush=True,
            )
            return 1
    commands = available_commands()
    children: list[tuple[str, subprocess.Popen]] = []
    try:
        for name, command, argv in PROCESSES:
            if command is not None and command not in commands:
                print(
                    f"[devstack] {name}: `manage.py {command}` not available, skipped", flush=True
                )
                continue
            proc = subprocess.Popen(argv, cwd=ROOT, env=env)
            children.append((name, proc))
            if name == "sandbox":
                wait_until_serving(name, f"{env['AGENTMAIL_BASE_URL']}/_sandbox/health", proc)
                require_own_sandbox(env["AGENTMAIL_BASE_URL"], proc)
                # The demo tenants' pods, inboxes, keys and webhooks live in the sandbox: provision
                # them now that it answers (idempotent, like the rest of seed_demo).
                subprocess.run(manage("seed_demo"), cwd=ROOT, env=env, check=True)
            elif name == "web":
                wait_until_serving(name, f"http://{WEB}/healthz", proc, timeout=120)
            elif name == "mcp":
                wait_until_serving(name, f"http://{MCP}/healthz", proc, timeout=120)
    except (SystemExit, subprocess.CalledProcessError) as error:
        print(error if isinstance(error, SystemExit) else f"[devstack] {error}", flush=True)
        stop_all(children)
        return 1
    print(
        f"[devstack] Countersign is up: http://{WEB}/  (MCP server at http://{MCP}/mcp/; "
        f"sandbox AgentMail at {env['AGENTMAIL_BASE_URL']}; sign-ins in README.md; Ctrl-C stops)",
        flush=True,
    )

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    while not stopping:
        for name, proc in children:
            if proc.poll() is not None:
                print(f"[devstack] {name} exited with {proc.returncode}; stopping", flush=True)
                exit_code = proc.returncode or 1
                stopping = True
        time.sleep(0.5)
    stop_all(children)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
