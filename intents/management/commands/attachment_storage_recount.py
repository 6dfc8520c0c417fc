"""Operators: set each tenant's attachment storage total to what its stored files hold (after an
upgrade from a release without the quota, or a restore). Safe while the app runs."""

from __future__ import annotations

from django.core.management.base import CommandError

from common.cli import BaseCommand, shown, text
from intents.services.storage import storage_recount
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Recount the attachment bytes each tenant holds (or one tenant's, --tenant SLUG)."

    def add_arguments(self, parser):
        # A NUL reached PostgreSQL (a DataError) and a byte that is not UTF-8 psycopg (a
        # UnicodeEncodeError): tracebacks, where every other command names the argument.
        parser.add_argument("--tenant", type=text, help="Only this tenant (its slug).")

    def handle(self, *args, tenant=None, **options):
        tenants = Tenant.objects.order_by("pk")
        if tenant is not None:
            tenants = tenants.filter(slug=tenant)
            if not tenants.exists():
                raise CommandError(f"--tenant: no tenant has the slug {shown(tenant)}.")
        for row in tenants.only("pk", "slug"):
            before, after = storage_recount(tenant_id=row.pk)
            self.stdout.write(f"{row.slug}: {before} -> {after} bytes")
