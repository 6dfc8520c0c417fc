from django.core.management.base import CommandError

from common.cli import BaseCommand, text
from tenants.invitations import LIFETIME
from tenants.onboarding import invitation_url, tenant_create
from tenants.services import AdminError

# The option each refused field came from, so the message says which one to fix.
OPTIONS = {
    "name": "--name",
    "slug": "--slug",
    "email": "--admin-email",
    "full_name": "--admin-name",
}


class Command(BaseCommand):
    help = (
        "Create a tenant and print the invitation link of its first admin (shown once: only its "
        "digest is stored). Hand the link to that person yourself; the product sends no email. "
        "The tenant connects its AgentMail pod when its admin connects the first mailbox."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", type=text, required=True, help="the tenant's name")
        parser.add_argument(
            "--slug", type=text, required=True, help="its address, /t/<slug>/ (a-z, 0-9, - and _)"
        )
        parser.add_argument(
            "--admin-email", type=text, required=True, help="the first admin's sign-in address"
        )
        parser.add_argument("--admin-name", type=text, default="", help="their name (optional)")

    def handle(self, *args, **options):
        try:
            tenant, token = tenant_create(
                name=options["name"],
                slug=options["slug"],
                admin_email=options["admin_email"],
                admin_name=options["admin_name"],
            )
        except AdminError as error:
            option = OPTIONS.get(error.field or "")
            raise CommandError(f"{option}: {error.message}" if option else error.message) from None
        self.stdout.write(
            f"created the tenant {tenant.name} ({tenant.slug}); its first admin joins with this "
            f"link, valid for {LIFETIME.days} days and shown only now:"
        )
        self.stdout.write(invitation_url(token))
