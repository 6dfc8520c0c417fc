from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from mailboxes.sandbox.server import serve


class Command(BaseCommand):
    help = "Run the sandbox AgentMail (a faithful local fake) on loopback."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8025)
        parser.add_argument(
            "--db", default=str(Path(settings.BASE_DIR) / ".data" / "sandbox.sqlite3")
        )

    def handle(self, *args, host, port, db, **options):
        if settings.PRODUCTION:
            raise CommandError("the sandbox is for development and tests, not production")
        if host not in {"127.0.0.1", "localhost", "::1"}:
            raise CommandError("the sandbox binds to loopback only (127.0.0.1, localhost or ::1)")
        Path(db).parent.mkdir(parents=True, exist_ok=True)
        serve(host, port, db, settings.AGENTMAIL_ORG_API_KEY)
