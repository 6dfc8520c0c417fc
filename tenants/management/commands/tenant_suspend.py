from django.core.management.base import CommandError

from common.cli import BaseCommand, text
from tenants.onboarding import tenant_suspend
from tenants.services import AdminError


class Command(BaseCommand):
    help = (
        "Suspend a tenant: its members can still read but change nothing, its agents are refused "
        "(403), and its workers block its queued sends before any provider call. The reason is "
        "shown to the tenant's admins in their audit log."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", type=text, help="the tenant's slug")
        parser.add_argument(
            "--reason", type=text, required=True, help="why, for the tenant's admins to read"
        )

    def handle(self, *args, **options):
        try:
            stopped = tenant_suspend(slug=options["slug"], reason=options["reason"])
        except AdminError as error:
            prefix = "--reason: " if error.field == "reason" else ""
            raise CommandError(prefix + error.message) from None
        tenant = stopped.changed
        self.stdout.write(f"suspended {tenant.name} ({tenant.slug})")
        if stopped.sends_in_flight:
            # Past their last check before the suspension: they go out (the audit row says so).
            self.stdout.write(f"{stopped.sends_in_flight} send(s) already on their way will go out")
