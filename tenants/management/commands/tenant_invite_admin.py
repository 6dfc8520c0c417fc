from django.core.management.base import CommandError

from common.cli import BaseCommand, text
from tenants.invitations import LIFETIME
from tenants.onboarding import invitation_url, tenant_invite_admin
from tenants.services import AdminError

OPTIONS = {"email": "--email", "full_name": "--name"}


class Command(BaseCommand):
    help = (
        "Invite an admin to an existing tenant and print the link (shown once): for a first admin "
        "whose link expired, or a tenant with no admin left. A pending invitation to the same "
        "address is replaced. The tenant's admins see it in their audit log. Confirm who is "
        "asking first."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", type=text, help="the tenant's slug")
        parser.add_argument("--email", type=text, required=True, help="the admin's address")
        parser.add_argument("--name", type=text, default="", help="their name (optional)")

    def handle(self, *args, **options):
        try:
            tenant, token = tenant_invite_admin(
                slug=options["slug"], admin_email=options["email"], admin_name=options["name"]
            )
        except AdminError as error:
            option = OPTIONS.get(error.field or "")
            raise CommandError(f"{option}: {error.message}" if option else error.message) from None
        self.stdout.write(
            f"invited an admin to {tenant.name} ({tenant.slug}); the link, valid for "
            f"{LIFETIME.days} days and shown only now:"
        )
        self.stdout.write(invitation_url(token))
