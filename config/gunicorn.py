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

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", 2 * (os.cpu_count() or 1)))
# Sync workers, each holding at most one database connection (DEPLOYMENT.md "PostgreSQL").
worker_class = "sync"
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "30"))
# Behind a proxy with keep-alive: a little longer than a request, shorter than the drain.
keepalive = 5
