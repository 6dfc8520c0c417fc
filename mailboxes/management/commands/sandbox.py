import sqlite3
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from common.cli import BaseCommand, number
from mailboxes.sandbox.server import build, run


class Command(BaseCommand):
    requires_migrations_checks = False  # its own SQLite file, not this deployment's database
    help = "Run the sandbox AgentMail (a faithful local fake) on loopback."

    def add_arguments(self, parser):
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="loopback address to listen on: 127.0.0.1, localhost or ::1 "
            "(default: %(default)s)",
        )
        parser.add_argument(
            "--port",
            type=number(int, least=0, most=65535),
            default=8025,
            help="port to listen on, 0 for any free one (default: %(default)s)",
        )
        parser.add_argument(
            "--db",
            default=str(Path(settings.BASE_DIR) / ".data" / "sandbox.sqlite3"),
            help="the sandbox's SQLite file, made if missing (default: %(default)s)",
        )

    def handle(self, *args, host, port, db, **options):
        if settings.PRODUCTION:
            raise CommandError("the sandbox is for development and tests, not production")
        if host not in {"127.0.0.1", "localhost", "::1"}:
            raise CommandError("the sandbox binds to loopback only (127.0.0.1, localhost or ::1)")
        if not db.strip():
            # An unset variable (--db "$SANDBOX_DB"): SQLite took "" for a private temporary
            # database (and "  " for a file of that name here), and the sandbox lost everything
            # when it stopped.
            raise CommandError(
                "--db: the path is empty; name the sandbox's SQLite file, or leave --db out for "
                ".data/sandbox.sqlite3."
            )
        try:
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CommandError(f"--db: cannot make the folder of {db}: {error.strerror}") from None
        try:
            server = build(host, port, db, settings.AGENTMAIL_ORG_API_KEY)
        except sqlite3.Error as error:
            # A folder, a file that is not SQLite, or one it may not write: a raw traceback.
            raise CommandError(
                f"--db: the sandbox cannot use {db} as its database: {error}"
            ) from None
        except OSError as error:
            # Most often a sandbox already listening there (make run starts one).
            raise CommandError(
                f"the sandbox cannot listen on {host} port {port}: {error.strerror or error}"
            ) from None
        run(server)
