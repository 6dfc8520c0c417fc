"""Demo data: two tenants with an admin, an approver and a viewer each, and one person in both.

Idempotent: running it again finds everything in place and changes nothing. Refused in production.
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from mailboxes.demo import seed_mailboxes
from tenants.models import Membership, Tenant, User

DEMO_PASSWORD = "countersign-demo"

TENANTS = [
    ("acme", "Acme Support"),
    ("globex", "Globex Help"),
]
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

    def handle(self, *args, **options):
        if settings.PRODUCTION:
            raise CommandError("seed_demo refuses to run with COUNTERSIGN_ENV=production")
        created = seed_people()
        self.stdout.write(f"demo tenants and users ready ({created} created)")
        # Mailboxes need the AgentMail sandbox (seed_mailboxes skips them when it is not up).
        seed_mailboxes(stdout=self.stdout)


@transaction.atomic
def seed_people() -> int:
    created = 0
    tenants = {}
    for slug, name in TENANTS:
        tenants[slug], was_created = Tenant.objects.get_or_create(
            slug=slug, defaults={"name": name}
        )
        created += was_created
    for email, full_name, memberships in PEOPLE:
        user = User.objects.filter(email=email).first()
        if user is None:
            user = User.objects.create_user(email, DEMO_PASSWORD, full_name=full_name)
            created += 1
        for slug, role in memberships:
            _, was_created = Membership.objects.get_or_create(
                user=user, tenant=tenants[slug], defaults={"role": role}
            )
            created += was_created
    return created
