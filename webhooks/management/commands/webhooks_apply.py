"""The dedicated webhook applier: apply stored events in batches, without the queue.

django-q2 wakes ``webhooks.tasks.apply_pending`` on each receiver commit; this command runs the
same batches in a loop, for deployments that want the lowest apply lag, and for fault tests that
kill an applier mid-batch (``--batch``, ``--once``).

``--retry-failed`` puts events set aside as ``failed`` (their apply raised
``WEBHOOK_APPLY_MAX_FAILURES`` times) back to pending, once their cause is fixed: all of them, or
the ids given.
"""

from __future__ import annotations

import signal
import threading

from django.core.management.base import CommandError

from common.cli import BaseCommand, identifier, number
from webhooks.services import applier
from webhooks.services.failures import NotFailed, events_retry_failed

POLL_SECONDS = 0.1
# The options of applying, which --retry-failed (it applies nothing) refuses, in this order.
_APPLYING = ("once", "batch", "poll")


class Command(BaseCommand):
    help = "Apply stored webhook events in batches (SKIP LOCKED), in a loop or once."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="One batch, then exit")
        parser.add_argument(
            "--batch",
            type=number(int, least=1, most=100_000),
            # None when not given: --retry-failed refuses it only then.
            default=None,
            help=f"Events per batch (default: {applier.APPLY_BATCH_SIZE})",
        )
        parser.add_argument(
            "--poll",
            type=number(float, least=0, above=True, most=3600),
            default=None,
            help=f"Seconds between idle looks (default: {POLL_SECONDS:g})",
        )
        parser.add_argument(
            "--retry-failed",
            nargs="*",
            type=identifier,
            metavar="EVENT_ID",
            help="Put failed events (all, or these ids) back to pending for the appliers, then exit",
        )

    def waits_for_database(self, options: dict) -> bool:
        # Its loop waits out a lost database (events_apply_loop).
        return not options["once"] and options["retry_failed"] is None

    def handle(self, *args, **o):
        if o["retry_failed"] is not None:
            self._retry_failed(o)
            return
        batch = o["batch"] or applier.APPLY_BATCH_SIZE
        if o["once"]:
            taken, finished = applier.events_apply_batch(limit=batch)
            self.stdout.write(f"taken {taken} finished {finished}")
            return
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        finished = applier.events_apply_loop(
            stop=stop, interval=o["poll"] or POLL_SECONDS, limit=batch
        )
        self.stdout.write(f"finished {finished}")

    def _retry_failed(self, o: dict) -> None:
        given = [f"--{name}" for name in _APPLYING if o[name] not in (None, False)]
        if given:
            named = given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"
            raise CommandError(f"--retry-failed runs alone: it applies nothing, leave out {named}.")
        try:
            retried = events_retry_failed(event_ids=o["retry_failed"] or None)
        except NotFailed as exc:
            raise CommandError(
                f"--retry-failed: {exc}; nothing was retried (see the ledger's failed events)."
            ) from exc
        if not retried:
            self.stdout.write("No failed webhook events: nothing to retry.")
            return
        applier.applier_wake(force=True)
        self.stdout.write(
            f"{len(retried)} failed webhook event(s) back to pending: "
            + ", ".join(str(pk) for pk in retried)
        )
