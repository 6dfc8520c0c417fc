"""The dedicated webhook applier: apply stored events in batches, without the queue.

django-q2 wakes ``webhooks.tasks.apply_pending`` on each receiver commit; this command runs the
same batches in a loop, for deployments that want the lowest apply lag, and for fault tests that
kill an applier mid-batch (``--batch``, ``--once``).
"""

from __future__ import annotations

import signal
import threading

from common.cli import BaseCommand, number
from webhooks.services import applier


class Command(BaseCommand):
    help = "Apply stored webhook events in batches (SKIP LOCKED), in a loop or once."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="One batch, then exit")
        parser.add_argument(
            "--batch",
            type=number(int, least=1, most=100_000),
            default=applier.APPLY_BATCH_SIZE,
            help="Events per batch (default: %(default)s)",
        )
        parser.add_argument(
            "--poll",
            type=number(float, least=0, above=True, most=3600),
            default=0.1,
            help="Seconds between idle looks (default: %(default)s)",
        )

    def waits_for_database(self, options: dict) -> bool:
        return not options["once"]  # its loop waits out a lost database (events_apply_loop)

    def handle(self, *args, **o):
        if o["once"]:
            taken, finished = applier.events_apply_batch(limit=o["batch"])
            self.stdout.write(f"taken {taken} finished {finished}")
            return
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        finished = applier.events_apply_loop(stop=stop, interval=o["poll"], limit=o["batch"])
        self.stdout.write(f"finished {finished}")
