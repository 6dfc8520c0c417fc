"""One lazily built object per process, for things that must not cross a fork.

Worker processes fork from a parent that may already hold an HTTP pool or a thread pool; sockets
and threads do not survive a fork, so each process builds its own on first use.
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
