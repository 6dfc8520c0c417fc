"""gunicorn settings for the web processes: ``gunicorn -c config/gunicorn.py config.wsgi``.

What matters for a rolling restart is the drain. On SIGTERM gunicorn's master closes its listening
socket and each sync worker finishes the request it is serving, then exits; a worker still busy
after ``graceful_timeout`` seconds is killed. So a stop (an init system, a deploy, the cluster
harness's rolling restart) loses no request that was already being served, as long as the
supervisor waits longer than ``graceful_timeout`` before its own SIGKILL (systemd
``TimeoutStopSec``, Kubernetes ``terminationGracePeriodSeconds``). Requests are bounded by
``timeout`` (a sync worker silent that long is killed and replaced), so a drain never needs more.

Command-line options override these; the environment variables below are the knobs.
"""

from __future__ import annotations

import os

# At most what the settings take of a figure with no bound of its own (config.env.MOST), 31 years
# in seconds: past about 10^10 s a worker's wait for a request overflowed (select's
# OverflowError), so each worker died as it went idle and was booted again, a traceback a second.
MOST = 10**9
# Web processes on one host, each a Django process holding a database connection: a slip of a
# few digits forked thousands of them against PostgreSQL's max_connections (100 by default).
MOST_WORKERS = 1024


def _whole(name: str, default: int, most: int = MOST) -> int:
    """The variable as a whole number from 1 to ``most``, or a stop naming it. gunicorn takes 0 as
    given: 0 workers listen and never answer, a timeout of 0 bounds no request, and a graceful
    timeout of 0 cuts every request in flight at a stop."""
    raw = os.environ.get(name) or str(default)
    try:
        value = int(raw)
    except ValueError:
        digits = raw.strip().removeprefix("+")
        if digits.isascii() and digits.isdigit():
            # More digits than int() reads (4,300): past any bound, and not echoed whole.
            raise SystemExit(
                f"{name} must be at most {most}; got a number of {len(digits)} digits"
            ) from None
        value = 0
    if value < 1:
        raise SystemExit(f"{name} must be a whole number, at least 1; got {raw!r}")
    if value > most:
        raise SystemExit(f"{name} must be at most {most}; got {raw!r}")
    return value


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = _whole("GUNICORN_WORKERS", 2 * (os.cpu_count() or 1), most=MOST_WORKERS)
# Sync workers, each holding at most one database connection (DEPLOYMENT.md "PostgreSQL").
worker_class = "sync"
timeout = _whole("GUNICORN_TIMEOUT", 30)
graceful_timeout = _whole("GUNICORN_GRACEFUL_TIMEOUT", 30)
# Behind a proxy with keep-alive: a little longer than a request, shorter than the drain.
keepalive = 5
