"""Chaos report (issue 4): N intents through W worker processes while faults are injected.

    manage.py chaos --intents 200 --workers 3 --seconds 30

A front end to the nemesis (`python -m reliability.nemesis`, RELIABILITY.md), which runs the whole
system on its own scratch database and sandbox: W `intents_worker` processes, S seconds of random
faults (lost responses, 5xx before and after processing, drops, 429, 409 in progress, SIGKILL and
SIGSTOP past the lease, skewed clocks, PostgreSQL restarts and killed backends, duplicate jobs and
webhooks), then the drain. It prints intents, accepted, duplicated and lost (both must be 0, from
the provider's own ledger), needs attention, p50/p95 approve-to-sent and the drain time, and exits
non-zero when the history check fails. One implementation of the fault schedule, not two
(CI runs the small case through this command: tests/reliability/test_nemesis.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from common.cli import BaseCommand, number

ROOT = Path(__file__).resolve().parents[3]

# Bounds a typo cannot pass (an extra digit started thousands of processes). Each worker is an
# intents_worker process with its database connections on the run's own PostgreSQL
# (max_connections 100 by default), beside the django-q2 cluster and the nemesis: 32 of them is
# far past what shows the guarantees (RELIABILITY.md runs 2 to 4; a 2-core machine runs 2 or 3);
# more load across hosts is reliability.cluster's. A million intents is 500 times the recorded
# runs' 2,000.
MOST_WORKERS = 32
MOST_INTENTS = 1_000_000
# A day of faults, and a day for the drain: the recorded runs take a minute of faults and at most
# a few for the drain (RELIABILITY.md); 1e300, or a typo's extra zeros, ran until someone killed it.
MOST_SECONDS = 86_400
# The seed names the run's tenants, users and mailboxes (a tenant's slug holds 60 characters):
# 50 digits failed only once the scratch database and the sandbox were up. The nemesis draws its
# own below a million.
MOST_SEED = 2**32 - 1


# The paths are made absolute and checked here, where argparse reads them: the command moves to
# the repository before the nemesis replaces it (a relative path was written there, not where
# the operator ran it), and the nemesis writes its report only after the whole run (a folder
# that does not exist was a traceback minutes later, the report lost and a clean run's exit 1).
def _absolute(value: str) -> Path:
    if "\x00" in value:  # os.execv refuses it: a ValueError traceback
        raise argparse.ArgumentTypeError("a path cannot hold U+0000 (NUL)")
    return Path(os.path.abspath(value))


def report_file(value: str) -> str:
    """An argparse type: a file the report can be written to, as an absolute path."""
    path = _absolute(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a folder: name a file for the report")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"the folder {path.parent} cannot be written to")
    return str(path)


def logs_folder(value: str) -> str:
    """An argparse type: a folder for the logs (the nemesis makes it), as an absolute path."""
    path = _absolute(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a file: name a folder for the logs")
    return str(path)


class Command(BaseCommand):
    requires_migrations_checks = False  # the nemesis runs on a scratch database of its own
    help = "Run N intents through W workers under random faults and print the report (nemesis)."

    def add_arguments(self, parser):
        # Checked here, before the nemesis replaces this process: nan and inf passed a plain
        # comparison, and a drain of 0 or less reported every intent as lost.
        parser.add_argument(
            "--intents",
            type=number(int, least=1, most=MOST_INTENTS),
            default=200,
            help=f"intents to send, at most {MOST_INTENTS:,} (default: %(default)s)",
        )
        parser.add_argument(
            "--workers",
            type=number(int, least=2, most=MOST_WORKERS),
            default=3,
            help=f"worker processes, 2 to {MOST_WORKERS} (default: %(default)s)",
        )
        parser.add_argument(
            "--seconds",
            type=number(float, least=0, above=True, most=MOST_SECONDS),
            default=30,
            help=f"seconds of faults, at most {MOST_SECONDS:,} (default: %(default)s)",
        )
        parser.add_argument(
            "--drain-seconds",
            type=number(float, least=0, above=True, most=MOST_SECONDS),
            default=180,
            help="seconds the system gets to finish every intent after the faults, at most "
            f"{MOST_SECONDS:,} (default: %(default)s)",
        )
        parser.add_argument(
            "--seed",
            type=number(int, least=0, most=MOST_SEED),
            default=None,
            help=f"replay a run, 0 to {MOST_SEED:,} (default: a new seed each run)",
        )
        parser.add_argument(
            "--json", type=report_file, default=None, help="also write the report as JSON here"
        )
        parser.add_argument(
            "--logs",
            type=logs_folder,
            default=None,
            help="keep each process's log in this directory",
        )

    def handle(self, *args, **o):
        command = [
            sys.executable,
            "-m",
            "reliability.nemesis",
            "--intents",
            str(o["intents"]),
            "--workers",
            str(o["workers"]),
            "--fault-seconds",
            str(o["seconds"]),
            "--drain-seconds",
            str(o["drain_seconds"]),
        ]
        if o["seed"] is not None:
            command += ["--seed", str(o["seed"])]
        if o["json"] is not None:
            command += ["--json", o["json"]]
        if o["logs"] is not None:
            command += ["--logs", o["logs"]]
        self.stdout.flush()
        os.chdir(ROOT)
        # The nemesis replaces this process: its exit status (non-zero when the history check
        # fails) and signals (SIGTERM stops every process it started) pass straight through.
        os.execv(sys.executable, command)  # noqa: S606 (our own module, fixed argv)
