from django.core.management.base import BaseCommand, CommandError

from config import dbserver


class Command(BaseCommand):
    help = "Manage the embedded PostgreSQL server used when DATABASE_URL is unset."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["start", "stop", "url"])

    def handle(self, *args, action, **options):
        # Settings already started the server when DATABASE_URL is unset; `start` only reports it.
        from django.conf import settings

        if action == "stop":
            if not dbserver.stop():
                raise CommandError("the embedded PostgreSQL server is not running")
            self.stdout.write("embedded PostgreSQL stopped")
        elif action == "start":
            self.stdout.write("PostgreSQL ready")
        else:
            self.stdout.write(settings.DATABASE_URL)
