"""A plain worker process: claim and send due intents, sweep, repeat.

django-q2 is the production runner (tasks.execute_intent / drain / sweep). This command runs the
same code without the queue, for fault tests that kill or pause a worker process, and for
operators who want a dedicated sender.
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
import threading
import time

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.db import InterfaceError, OperationalError, connections

from common.cli import BaseCommand, identifier, number
from intents import tasks
from intents.models import SendIntent
from intents.sending.worker import run_once, run_rounds, worker_id

log = logging.getLogger("intents.worker")

# Each loop holds a database connection: past this, start more processes or hosts (PostgreSQL's
# own default max_connections is 100), not a thread count that only exhausts them.
MOST_THREADS = 256

# A loop's rounds run this long at most before it looks again at its sweep and its deadline.
ROUND_SECONDS = 5.0


def _round_seconds(o: dict, last_sweep: float, deadline: float | None) -> float:
    """How long ``run_rounds`` may go on claiming before the loop's own checks are due."""
    now = time.monotonic()
    seconds = ROUND_SECONDS
    if o["sweep_every"]:
        seconds = min(seconds, last_sweep + o["sweep_every"] - now)
    if deadline is not None:
        seconds = min(seconds, deadline - now)
    return max(0.0, seconds)


def _run(threads: list[threading.Thread], shape: dict) -> None:
    """Start the loops, say so, and wait for them."""
    for thread in threads:
        thread.start()
    # From here a SIGTERM stops the loops gracefully; before it, it ends the process (which holds
    # nothing yet). Supervisors and tests can wait for this line.
    log.info("intents.worker.started", extra=shape)
    _join(threads)


def _dump_stacks(*_) -> None:
    """Every thread's Python stack to stderr, from a Python signal handler: it runs on the main
    thread between bytecodes (``_join`` wakes twice a second), holding the GIL, so no other
    thread's frames change while they are read. ``faulthandler.register`` read them from a C
    signal handler without the GIL, and a worker whose call threads were busy crashed on it
    (SIGSEGV, in a CI run)."""
    faulthandler.dump_traceback(all_threads=True)


def _join(threads: list[threading.Thread]) -> None:
    """Wait for the loops with a timeout, never without: a SIGTERM's Python handler runs only on
    the main thread, between bytecodes. When the kernel delivers the signal to another of the
    process's threads, a join with no timeout sleeps through it and the handler never runs: seen
    about once in several hundred stops, every thread waiting for a stop that never came (the
    SIGUSR1 dump; tests/intents/sending/test_graceful_stop.py)."""
    for thread in threads:
        while thread.is_alive():
            thread.join(0.5)


class Command(BaseCommand):
    help = "Run a send worker loop (claims due intents, sends, records; sweeps periodically)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--seconds",
            type=number(float, least=0),
            default=0,
            help="Stop after this many seconds (default: %(default)s, never)",
        )
        parser.add_argument("--once", action="store_true", help="One claim round, then exit")
        parser.add_argument("--intent", type=identifier, help="Only this intent (needs --once)")
        parser.add_argument(
            "--threads",
            type=number(int, least=0, most=MOST_THREADS),
            default=1,
            help=f"Sending loops, a database connection each (at most {MOST_THREADS}; "
            "default: %(default)s)",
        )
        parser.add_argument(
            "--reply-threads",
            type=number(int, least=0, most=MOST_THREADS),
            default=0,
            help="More threads that claim only replies, never a broadcast's sends (default: "
            "%(default)s)",
        )
        parser.add_argument(
            "--batch",
            type=number(int, least=1, most=10_000),
            default=None,
            help="Intents per round (default SEND_BATCH_SIZE)",
        )
        # Capped as webhooks_apply's: a wait past what a lock's timeout takes (1e300) raised
        # OverflowError in the loop's thread, which died and left the process sending nothing.
        parser.add_argument(
            "--poll",
            type=number(float, least=0, above=True, most=3600),
            default=0.2,
            help="Seconds a loop waits when nothing is due (default: %(default)s)",
        )
        parser.add_argument(
            "--sweep-every",
            type=number(float, least=0),
            default=0,
            help="Seconds between sweeps (default: %(default)s, no sweep)",
        )
        parser.add_argument(
            "--exit-when-idle", action="store_true", help="Exit when a round finds nothing due"
        )

    @staticmethod
    def _refuse_options(o: dict) -> None:
        """A CommandError for options that could not run as written (nothing is sent)."""
        if o["intent"] is not None:
            # Without --once it was ignored: the loop sent every due intent, not the one named.
            if not o["once"]:
                raise CommandError("--intent works only with --once; nothing was sent.")
            if not SendIntent.objects.filter(pk=o["intent"]).exists():
                raise CommandError(f"--intent: no send intent {o['intent']}.")
        if not o["once"] and o["threads"] + o["reply_threads"] == 0:
            raise CommandError("--threads and --reply-threads are both 0: no loop would send.")

    def waits_for_database(self, options: dict) -> bool:
        # Its loops ride out a database outage (below); one round has nothing to wait for.
        return not options["once"]

    def handle(self, *args, **o):
        o["batch"] = o["batch"] or settings.SEND_BATCH_SIZE
        self._refuse_options(o)
        if o["once"]:
            done = run_once(limit=o["batch"], intent_id=o["intent"])
            self.stdout.write(f"processed {done}")
            return
        sys.setswitchinterval(settings.WORKER_SWITCH_INTERVAL_SECONDS)
        stop = threading.Event()
        # SIGTERM (an init system, a rolling restart) and SIGINT stop the loop: a batch whose
        # attempts are committed finishes and is recorded, one claimed but not begun is handed
        # back (run_rounds' ``stopping``), nothing new is claimed; then the process exits 0.
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        # A worker that does not stop or does not send: `kill -USR1 <pid>` writes every thread's
        # Python stack to stderr (nothing else happens; the worker goes on).
        signal.signal(signal.SIGUSR1, _dump_stacks)
        deadline = time.monotonic() + o["seconds"] if o["seconds"] else None

        def loop(n: int, replies_only: bool = False) -> None:
            worker = f"{worker_id()}-{n}"
            last_sweep = 0.0
            outage = 0
            failures = 0
            try:
                while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                    try:
                        if o["sweep_every"] and time.monotonic() - last_sweep >= o["sweep_every"]:
                            tasks.sweep_once()
                            last_sweep = time.monotonic()
                        done = run_rounds(
                            worker=worker,
                            limit=o["batch"],
                            for_seconds=_round_seconds(o, last_sweep, deadline),
                            stopping=stop.is_set,
                            replies_only=replies_only,
                        )
                        outage = failures = 0
                    except (OperationalError, InterfaceError) as exc:
                        # The database went away (restart, failover, killed backend). Whatever
                        # was in flight is fenced by its lease and recovered by the sweep; this
                        # worker just reconnects, backing off while the outage lasts.
                        outage += 1
                        log.warning(
                            "intents.worker.database_unavailable",
                            extra={"worker": worker, "error": type(exc).__name__, "streak": outage},
                        )
                        connections.close_all()
                        stop.wait(min(5.0, 0.2 * 2**outage))
                        continue
                    except Exception:
                        # Anything else one round raised (one intent's unreadable key, a bug, a
                        # broker timeout): the round's intents are fenced by their leases as for
                        # a database outage, so log it and go on. A thread that died here left
                        # the process up and idle, which no supervisor notices.
                        failures += 1
                        log.exception(
                            "intents.worker.round_failed",
                            extra={"worker": worker, "streak": failures},
                        )
                        stop.wait(min(5.0, 0.2 * 2**failures))
                        continue
                    if not done:
                        if o["exit_when_idle"]:
                            return
                        stop.wait(o["poll"])
            finally:
                connections.close_all()

        threads = [
            threading.Thread(target=loop, args=(i,), daemon=True) for i in range(o["threads"])
        ] + [
            threading.Thread(target=loop, args=(o["threads"] + i, True), daemon=True)
            for i in range(o["reply_threads"])
        ]
        _run(threads, {k: o[k] for k in ("threads", "reply_threads", "batch")})
        if stop.is_set():
            log.info("intents.worker.stopped", extra={"threads": o["threads"]})
