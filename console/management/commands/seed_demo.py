"""Demo data: two tenants with an admin, an approver and a viewer each, and one person in both.

Idempotent: running it again finds everything in place and changes nothing. Refused in production.
"""

from django.conf import settings
from django.core.management.base import CommandError
from django.db import transaction

from common.cli import BaseCommand
from mailboxes.demo import seed_mailboxes
from mailboxes.provider import ProviderError
from mailboxes.provisioning import ProvisioningError
from tenants.models import Membership, Tenant, User

DEMO_PASSWORD = "countersign-demo"

# Acme shows team review: a one-hour target to first decision, escalated to its admins.
TENANTS = [
    ("acme", "Acme Support", {"sla_minutes": 60, "escalate_to_role": "admin"}),
    ("globex", "Globex Help", {}),
]
# Globex's team reads the UI in German and Spanish, each in their own time zone.
PREFERENCES = {
    "approver@globex.test": ("de", "Europe/Berlin"),
    "viewer@globex.test": ("es", "America/Mexico_City"),
}
PEOPLE = [
    ("admin@acme.test", "Ada Admin", [("acme", "admin")]),
    ("approver@acme.test", "Arthur Approver", [("acme", "approver")]),
    ("viewer@acme.test", "Vera Viewer", [("acme", "viewer")]),
    ("admin@globex.test", "Gus Admin", [("globex", "admin")]),
    ("approver@globex.test", "Greta Approver", [("globex", "approver")]),
    ("viewer@globex.test", "Glen Viewer", [("globex", "viewer")]),
    ("both@demo.test", "Bo Both", [("acme", "approver"), ("globex", "approver")]),
]


class Command(BaseCommand):
    help = "Create the demo tenants and users (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--without-mailboxes",
            action="store_true",
            help="Leave the demo mailboxes to `make run`, which provisions them in its own sandbox.",
        )

    def handle(self, *args, without_mailboxes=False, **options):
        if settings.PRODUCTION:
            raise CommandError("seed_demo refuses to run with COUNTERSIGN_ENV=production")
        created = seed_people()
        self.stdout.write(f"demo tenants and users ready ({created} created)")
        if without_mailboxes:
            # `make setup`: whatever answers at AGENTMAIL_BASE_URL then may be another clone's
            # sandbox (its `make run` holding the port), which would get this clone's pods.
            self.stdout.write("demo mailboxes: `make run` provisions them in its own sandbox")
            return
        # Mailboxes need the AgentMail sandbox (seed_mailboxes skips them when it is not up).
        try:
            seed_mailboxes(stdout=self.stdout)
        except (ProviderError, ProvisioningError) as exc:
            # One line that names the sandbox asked, not a traceback.
            raise CommandError(
                f"demo mailboxes: {exc} (AGENTMAIL_BASE_URL={settings.AGENTMAIL_BASE_URL})"
            ) from None


@transaction.atomic
def seed_people() -> int:
    created = 0
    tenants = {}
    for slug, name, settings_ in TENANTS:
        tenants[slug], was_created = Tenant.objects.get_or_create(
            slug=slug, defaults={"name": name, **settings_}
        )
        created += was_created
    for email, full_name, memberships in PEOPLE:
        user = User.objects.filter(email=email).first()
        if user is None:
            language, time_zone = PREFERENCES.get(email, ("", ""))
            user = User.objects.create_user(
                email, DEMO_PASSWORD, full_name=full_name, language=language, time_zone=time_zone
            )
            created += 1
        for slug, role in memberships:
            _, was_created = Membership.objects.get_or_create(
                user=user, tenant=tenants[slug], defaults={"role": role}
            )
            created += was_created
    return created
