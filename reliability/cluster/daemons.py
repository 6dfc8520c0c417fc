"""The third-party servers of a multi-host deployment, started for a test or a cluster run:
Redis (django-q2's broker) and PgBouncer in transaction mode. Debian's packages, no downloads.

Each helper returns the argv of a foreground process (the caller owns it and stops it); `prefix`
runs it in a network namespace (``["ip", "netns", "exec", name]``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_port(host: str, port: int, *, timeout: float = 15.0, proc=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout} s")


def redis_argv(*, bind: str, port: int, prefix: tuple[str, ...] = ()) -> list[str]:
    """redis-server in the foreground, memory only (the queue only wakes workers)."""
    return [
        *prefix,
        shutil.which("redis-server") or "/usr/bin/redis-server",
        "--bind",
        bind,
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
    ]


def pgbouncer_files(
    *, listen: str, port: int, server_host: str, server_port: int, folder: Path | None = None
) -> Path:
    """A folder with pgbouncer.ini (transaction mode, every database passed through) and its
    user list. Readable by the user PgBouncer runs as (it refuses to run as root)."""
    folder = folder or Path(tempfile.mkdtemp(prefix="countersign-pgbouncer-"))
    folder.mkdir(exist_ok=True)
    folder.chmod(0o755)
    (folder / "userlist.txt").write_text('"postgres" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host={server_host} port={server_port}",
                "[pgbouncer]",
                f"listen_addr = {listen}",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {folder / 'userlist.txt'}",
                "pool_mode = transaction",
                "max_client_conn = 500",
                "default_pool_size = 20",
                "server_reset_query =",
                # A server connection whose client vanished mid-transaction is closed, not reused.
                "server_check_delay = 1",
                "ignore_startup_parameters = extra_float_digits",
                "log_connections = 0",
                "log_disconnections = 0",
                "",
            ]
        )
    )
    for name in ("pgbouncer.ini", "userlist.txt"):
        (folder / name).chmod(0o644)
    return folder


def pgbouncer_argv(folder: Path, *, prefix: tuple[str, ...] = ()) -> list[str]:
    user = ["-u", "embedded_postgres"] if os.geteuid() == 0 else []
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    return [*prefix, binary, *user, str(folder / "pgbouncer.ini")]


def stop(proc: subprocess.Popen, *, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it does not go."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
