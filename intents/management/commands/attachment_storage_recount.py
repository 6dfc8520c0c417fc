"""Operators: set each tenant's attachment storage total to what its stored files hold, and each
mailbox's to the files charged to it (after an upgrade from a release without the quota or the
mailboxes' shares, or a restore). Safe while the app runs."""

from __future__ import annotations

from django.core.management.base import CommandError

from common.cli import BaseCommand, shown, text
from intents.services.storage import storage_recount, storage_recount_mailboxes
from mailboxes.models import Mailbox
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
            corrected = storage_recount_mailboxes(tenant_id=row.pk)
            before, after = storage_recount(tenant_id=row.pk)
            self.stdout.write(f"{row.slug}: {before} -> {after} bytes")
            addresses = dict(
                Mailbox.objects.filter(pk__in=[c[0] for c in corrected]).values_list(
                    "pk", "address"
                )
            )
            for mailbox_id, was, now in corrected:
                self.stdout.write(f"  mailbox {addresses[mailbox_id]}: {was} -> {now} bytes")
