"""Per-process and per-thread holders: nothing built in one process is used in a forked child, and
each thread of the worker's call pool gets its own HTTP client."""

from __future__ import annotations

import os
import threading

import pytest

from config.perprocess import PerProcess, PerThread
from mailboxes import provider

# The test process has threads (the database and sandbox clients); a child that only builds a
# plain object and exits touches none of their locks, so fork's general warning does not apply.
forks = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")


def _in_child(fn) -> int:
    """Run fn in a forked child; its exit status is fn's return value (0..255)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        try:
            os._exit(fn())
        finally:
            os._exit(99)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@forks
def test_per_process_builds_once_and_again_in_a_forked_child():
    holder = PerProcess(object)
    first = holder.get()
    assert holder.get() is first
    assert _in_child(lambda: 0 if holder.get() is not first else 1) == 0


@forks
def test_per_thread_builds_once_per_thread_and_again_in_a_forked_child():
    holder = PerThread(object)
    mine = holder.get()
    assert holder.get() is mine
    seen = []
    thread = threading.Thread(target=lambda: seen.extend([holder.get(), holder.get()]))
    thread.start()
    thread.join()
    assert seen[0] is seen[1]
    assert seen[0] is not mine
    # fork copies the forking thread's thread-local values; the child must not reuse them.
    assert _in_child(lambda: 0 if holder.get() is not mine else 1) == 0


def test_each_thread_sends_through_its_own_http_client_sharing_one_tls_context():
    clients = []
    threads = [
        threading.Thread(target=lambda: clients.append(provider.http_client())) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(c) for c in clients}) == 3
    assert provider.http_client() is provider.http_client()
    contexts = {id(c._transport._pool._ssl_context) for c in clients}
    assert len(contexts) == 1
