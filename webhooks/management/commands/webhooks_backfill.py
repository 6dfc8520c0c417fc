"""Run the webhook backfill once (django-q2 runs it every ten minutes: ``webhooks-backfill``)."""

from __future__ import annotations

from django.core.management.base import CommandError

from common.cli import BaseCommand, shown, text
from tenants.models import Tenant
from webhooks.services.backfill import webhooks_backfill


class Command(BaseCommand):
    help = "Ask AgentMail for deliveries and inbound mail whose webhooks never arrived."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", type=text, help="Only this tenant (slug)")

    def handle(self, *args, **o):
        tenant_id = None
        if o["tenant"] is not None:
            if not o["tenant"].strip():
                # An unset variable (``--tenant "$SLUG"``) was read as no --tenant: every
                # tenant's mailboxes were asked for.
                raise CommandError(
                    "--tenant: the slug is empty; name a tenant, or leave --tenant out to "
                    "backfill every tenant. Nothing was asked."
                )
            tenant = Tenant.objects.filter(slug=o["tenant"]).first()
            if tenant is None:
                raise CommandError(f"No tenant with the slug {shown(o['tenant'])}.")
            tenant_id = tenant.pk
        report = webhooks_backfill(tenant_id=tenant_id)
        self.stdout.write(
            f"mailboxes {report.mailboxes} calls {report.calls} deliveries {report.deliveries} "
            f"inbound {report.inbound} errors {report.errors} limited {len(report.limited)}"
        )
        skipped = Tenant.objects.filter(pk__in=report.skipped_tenants).order_by("slug")
        for slug in skipped.values_list("slug", flat=True):
            self.stdout.write(
                f"  tenant {shown(slug)} skipped: another backfill run (the schedule's or "
                "another command's) is asking AgentMail about its mailboxes; the next run asks "
                "again."
            )
        for problem in report.problems:
            self.stdout.write(f"  {problem}")
        if report.problems:
            self.stdout.write(
                "What these calls would have found is asked again on the next run (the "
                "webhooks-backfill schedule, every 10 minutes, or this command once AgentMail "
                "answers), as far back as WEBHOOK_BACKFILL_MAX_AGE_HOURS."
            )
