"""Small helpers for the race tests."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connections


def run_concurrently(fn: Callable[[int], object], n: int, timeout: float = 60) -> list:
    """Run fn(i) in n threads released together; returns each result or the exception raised."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def target(i: int) -> None:
        try:
            barrier.wait()
            results[i] = fn(i)
        except BaseException as exc:
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return results
