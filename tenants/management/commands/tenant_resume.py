from django.core.management.base import CommandError

from common.cli import BaseCommand, text
from tenants.onboarding import tenant_resume
from tenants.services import AdminError


class Command(BaseCommand):
    help = (
        "Resume a suspended tenant: its members and agents work again. Sends blocked while it "
        "was suspended stay blocked."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", type=text, help="the tenant's slug")

    def handle(self, *args, **options):
        try:
            tenant = tenant_resume(slug=options["slug"])
        except AdminError as error:
            raise CommandError(error.message) from None
        self.stdout.write(f"resumed {tenant.name} ({tenant.slug})")
