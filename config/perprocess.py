"""Lazily built objects per process or per thread, for things that must not cross a fork.

Worker processes fork from a parent that may already hold an HTTP pool or a thread pool; sockets
and threads do not survive a fork, so each process (or each thread of it) builds its own on first
use.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable


class PerProcess[T]:
    def __init__(self, build: Callable[[], T]):
        self._build = build
        self._by_pid: dict[int, T] = {}
        self._lock = threading.Lock()

    def get(self) -> T:
        pid = os.getpid()
        value = self._by_pid.get(pid)
        if value is None:
            with self._lock:
                value = self._by_pid.get(pid)
                if value is None:
                    value = self._by_pid[pid] = self._build()
        return value


class PerThread[T]:
    """One lazily built object per thread. A forked child inherits the forking thread's
    thread-local values, so each value remembers its process and is rebuilt in a child."""

    def __init__(self, build: Callable[[], T]):
        self._build = build
        self._local = threading.local()

    def get(self) -> T:
        pid = os.getpid()
        held = getattr(self._local, "held", None)
        if held is None or held[0] != pid:
            held = self._local.held = (pid, self._build())
        return held[1]
