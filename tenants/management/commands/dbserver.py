from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import psycopg
from django.conf import settings
from django.core.management.base import CommandError

from common.cli import MASK, SECRET_PARAMETERS, BaseCommand
from config import dbserver


def masked(url: str) -> str:
    """``url`` with its password (in the address or as ``?password=``) and its TLS key's
    passphrase (``?sslpassword=``) replaced by a mask."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:{MASK}@{hostport}"
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(key in SECRET_PARAMETERS and value for key, value in pairs):
        query = urlencode(
            [(key, MASK if key in SECRET_PARAMETERS and value else value) for key, value in pairs],
            safe="/*",
        )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _passwords(url: str) -> set[str]:
    parts = urlsplit(url)
    found = {parts.password, unquote(parts.password)} if parts.password else set()
    return found | {v for k, v in parse_qsl(parts.query) if k in SECRET_PARAMETERS and v}


class Command(BaseCommand):
    # It manages the server, and says whether it answers: no migrated database needed.
    requires_migrations_checks = False
    help = (
        "Manage the embedded PostgreSQL server used when DATABASE_URL is unset. "
        "start: settings already started it; this checks that the database answers (whichever "
        "DATABASE_URL names) and fails when it does not. stop: stop the embedded server. "
        "url: print the database URL this configuration uses with its password masked: it tells "
        "an operator which server, database and user the processes talk to, also when "
        "DATABASE_URL points elsewhere, and is safe to paste into a ticket or a shared terminal; "
        "the password stays where it was configured (the embedded server has none)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "action", choices=["start", "stop", "url"], help="what to do (each is said above)"
        )

    def handle(self, *args, action, **options):
        if action == "stop":
            if not dbserver.stop():
                raise CommandError(dbserver.NOT_RUNNING)
            self.stdout.write(dbserver.STOPPED)
        elif action == "start":
            self._check(settings.DATABASE_URL)
        else:
            self.stdout.write(masked(settings.DATABASE_URL))

    def _check(self, url: str) -> None:
        """Say "ready" only after the database answered a query."""
        try:
            with psycopg.connect(url, connect_timeout=5) as connection:
                connection.execute("SELECT 1")
        except psycopg.Error as error:
            reason = (str(error).strip() or type(error).__name__).splitlines()[0]
            for secret in _passwords(url):
                reason = reason.replace(secret, MASK)
            raise CommandError(f"PostgreSQL does not answer at {masked(url)}: {reason}") from None
        self.stdout.write(f"PostgreSQL ready at {masked(url)}")
