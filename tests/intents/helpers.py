"""Small helpers for the intents tests."""

from __future__ import annotations

import io
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection, connections, transaction
from django.db.models.functions import Now

from intents.models import SendIntent


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


def set_state(intent, state, **fields):
    """Force an intent into a state, with the fields its constraints require."""
    if state == "sending":
        fields.setdefault("lease_token", uuid.uuid4())
        fields.setdefault("lease_expires_at", Now())
    if state == "accepted":
        fields.setdefault("provider_message_id", "<m@agentmail.test>")
    SendIntent.objects.filter(pk=intent.pk).update(state=state, **fields)


def unproven(intent) -> None:
    """The intent in needs_attention with the journal row the sweep writes when a send's outcome
    could not be proven: it may have gone out."""
    from intents import services

    services.journal(
        tenant=intent.tenant,
        draft=intent.draft_id,
        intent=intent,
        action="intent.needs_attention",
        actor_kind="sweep",
        from_state="uncertain",
        to_state="needs_attention",
    )
    set_state(intent, "needs_attention")


def counted_lower(values: list[str]) -> tuple[list[str], list[str]]:
    """The values as strings that record each time they are lower-cased, and that record: the
    work a recipient check does on a mailbox's allow-list, counted instead of timed."""
    lowered: list[str] = []

    class Counted(str):
        def lower(self) -> str:
            lowered.append(str(self))
            return super().lower()

    return [Counted(v) for v in values], lowered


def lock_waiters() -> int:
    """How many other sessions of this database wait on a lock now."""
    with connection.cursor() as cursor:
        # Inside a transaction the activity view is a snapshot until cleared.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def blocked_on_a_lock(timeout: float = 10.0, count: int = 1) -> bool:
    """Whether ``count`` other sessions of this database wait on a lock within ``timeout``
    seconds: the event a race test waits for instead of sleeping."""
    since = time.monotonic()
    while time.monotonic() - since < timeout:
        if lock_waiters() >= count:
            return True
        time.sleep(0.02)
    return False


def until_done_or_waiting(thread, waiters: int, timeout: float = 10) -> None:
    """Until ``thread`` ends or ``waiters`` sessions wait on a lock: an event, not a sleep."""
    deadline = time.monotonic() + timeout
    while thread.is_alive() and lock_waiters() < waiters and time.monotonic() < deadline:
        time.sleep(0.02)


def in_thread(fn: Callable[[], object], outcome: list) -> threading.Thread:
    """Start ``fn`` in a thread of its own (its own database connection, closed at the end);
    its result, or the exception it raised, is appended to ``outcome``."""

    def run() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:
            outcome.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@contextmanager
def held_open(fn: Callable[[], object], outcome: list) -> Iterator[threading.Thread]:
    """Run ``fn`` in a transaction of a thread of its own (``in_thread``) and keep that
    transaction open, its locks held, for the body of the ``with``; it commits on leaving, and
    the thread is joined. ``fn``'s result (or exception) is appended to ``outcome``."""
    done, release = threading.Event(), threading.Event()

    def hold():
        with transaction.atomic():
            try:
                return fn()
            finally:
                done.set()
                release.wait(20)

    thread = in_thread(hold, outcome)
    assert done.wait(10), "the held transaction did not get through its work"
    try:
        yield thread
    finally:
        release.set()
        thread.join(20)


def deadlocks_so_far() -> int:
    """PostgreSQL's count of deadlocks in this database (pg_stat_database), read afresh."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def until_sessions_gone(pids: list[int], timeout: float = 10) -> None:
    """Until these sessions have ended: a session flushes its statistics (a deadlock it took
    part in) before it leaves ``pg_stat_activity``."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
            if not cursor.fetchone()[0]:
                return
            time.sleep(0.02)


def noting_session(fn: Callable[[], object], pids: list[int]) -> Callable[[], object]:
    """``fn``, first noting the database session (backend pid) of the thread it runs in."""

    def run():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pids.append(cursor.fetchone()[0])
        return fn()

    return run


def nudge_queued() -> None:
    """Make the queued sends due now: the ones no other transaction holds, locked in id order.
    A plain UPDATE of every queued row, run by racing threads at once, could deadlock with
    itself (each one waiting on rows the other had already updated, in another order)."""
    from django.db import transaction
    from django.db.models.functions import Now

    from intents.models import SendIntent

    with transaction.atomic():
        free = (
            SendIntent.objects.filter(state="queued")
            .order_by("pk")
            .select_for_update(skip_locked=True)
            .values("pk")
        )
        SendIntent.objects.filter(pk__in=free).update(next_attempt_at=Now())


def drain_sends(seconds: float = 60) -> None:
    """Send every queued intent, rounds after rounds, until none is left to send or settle.

    By time, not by rounds: a broadcast's bucket refills by the clock, so a fixed number of quick
    rounds ran out before the sends did on an idle machine."""
    import time

    from intents import sending
    from intents.models import SendIntent

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        nudge_queued()
        if (
            not sending.run_once(worker="t", limit=20)
            and not SendIntent.objects.filter(state__in=("queued", "sending", "uncertain")).exists()
        ):
            return
    raise AssertionError("the sends did not drain")


def sends_in_flight(mailbox, approver, count: int) -> list:
    """``count`` sends of ``mailbox`` approved by ``approver``, each as the worker's pre-call check
    leaves it: leased (``sending``) with its attempt row committed and no answer yet (``pending``),
    the call on its way. A change that stops them counts these as in flight."""
    from django.utils import timezone

    from intents.models import SendAttempt
    from tests.factories import approve_new_draft

    intents = []
    for _ in range(count):
        intent = approve_new_draft(mailbox.tenant, mailbox, approver)
        set_state(intent, "sending", attempts=1)
        intent.refresh_from_db()
        SendAttempt.objects.create(
            intent=intent,
            tenant=mailbox.tenant,
            number=1,
            worker="t",
            lease_token=intent.lease_token,
            started_at=timezone.now(),
        )
        intents.append(intent)
    return intents


def zip_of(name: str, data: bytes, comment: bytes = b"") -> bytes:
    """A ZIP of one file ``name`` holding ``data``, with ``comment`` as its comment."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, data)
        archive.comment = comment
    return buffer.getvalue()
