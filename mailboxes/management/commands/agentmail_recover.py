from django.core.management.base import CommandError

from common.cli import BaseCommand, shown, text
from mailboxes import recovery
from mailboxes.models import Mailbox
from mailboxes.provisioning import ProvisioningError
from tenants.models import Tenant

# --check is run by monitors: 0 says AgentMail has everything, GONE_EXIT_STATUS that something
# is gone (or a recovery is unfinished), 1 (any other CommandError) that it could not tell, and
# 2 that the command line was wrong (argparse).
GONE_EXIT_STATUS = 3


class Command(BaseCommand):
    help = (
        "Make a tenant's pod, or a mailbox's inbox, again when it was deleted at AgentMail. Only "
        "an object AgentMail answers 404 for is made again (a fresh GET with the organization "
        "key; a timeout or 5xx changes nothing), under a new client_id. The mailbox's queued "
        "sends then go out once from the new inbox; its uncertain ones go to a person, who "
        "decides with the evidence. Safe to run again, also after it stopped half way. "
        f"With --check the exit status is 0 when AgentMail still has everything, "
        f"{GONE_EXIT_STATUS} when something is gone, 1 when it could not tell. "
        "DEPLOYMENT.md, 'A pod or inbox deleted at AgentMail'."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", type=text, help="the tenant's slug")
        parser.add_argument(
            "--mailbox",
            type=text,
            default=None,
            metavar="ADDRESS",
            help="make only this mailbox's inbox again (default: the tenant's pod with every "
            "inbox if the pod is gone, else every mailbox whose inbox is gone)",
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="only ask AgentMail and say what is gone; change nothing; exit status 0 "
            f"when nothing is gone, {GONE_EXIT_STATUS} when something is "
            "(default: off, make it again)",
        )

    def handle(self, *args, slug, mailbox, check, **options):
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"no tenant has the slug {shown(slug)}")
        only = None
        if mailbox is not None:
            only = Mailbox.objects.filter(tenant=tenant, address=mailbox.strip().lower()).first()
            if only is None:
                known = ", ".join(
                    Mailbox.objects.filter(tenant=tenant)
                    .order_by("address")
                    .values_list("address", flat=True)
                )
                raise CommandError(
                    f"--mailbox: {tenant.slug} has no mailbox {shown(mailbox)} "
                    f"(its mailboxes: {known or 'none'})"
                )
        try:
            self._run(tenant, only, check)
        except ProvisioningError as error:
            raise CommandError(error.message) from None

    def _run(self, tenant: Tenant, only: Mailbox | None, check: bool) -> None:
        lost = recovery.lost_at_agentmail(tenant=tenant)
        unfinished = recovery.unfinished(tenant=tenant)
        if lost.pod_id:
            self.stdout.write(f"{tenant.slug}: AgentMail no longer has the pod {lost.pod_id}")
        for gone in lost.mailboxes:
            self.stdout.write(f"{gone.address}: AgentMail no longer has the inbox {gone.inbox_id}")
        for half in unfinished:
            self.stdout.write(f"{half.address}: its inbox is being made again (unfinished)")
        if only is not None and not only.inbox_id and only not in unfinished:
            # Its provisioning never got an inbox from AgentMail: nothing was deleted there.
            raise CommandError(
                f"{only.address} has no inbox to make again: retry its provisioning instead."
            )
        if only is None and not (lost or unfinished) and not tenant.agentmail_pod_id:
            never = (
                f"{tenant.slug} has no AgentMail pod yet: it is made with its first mailbox, so "
            )
            if check:
                self.stdout.write(never + "nothing is gone")
                return
            raise CommandError(never + "there is nothing to make again, and nothing changed")
        if not (lost or unfinished) or (
            only is not None and only not in lost.mailboxes and only not in unfinished
        ):
            what = (
                f"the inbox {only.inbox_id}"
                if only is not None
                else f"the pod and every inbox of {tenant.slug}"
            )
            if check:
                self.stdout.write(f"AgentMail still has {what}: nothing is gone")
                return
            raise CommandError(
                f"AgentMail still has {what}: there is nothing to make again, and nothing changed"
            )
        if check:
            raise CommandError(
                "something is gone at AgentMail (above); nothing changed: run it without --check "
                "to make it again",
                returncode=GONE_EXIT_STATUS,
            )
        if only is not None:
            made = [recovery.mailbox_inbox_recover(tenant=tenant, mailbox_id=only.pk)]
        elif lost.pod_id or (unfinished and not tenant.agentmail_pod_id):
            made = recovery.tenant_pod_recover(tenant=tenant)
            tenant.refresh_from_db(fields=["agentmail_pod_id"])
            self.stdout.write(f"{tenant.slug}: new pod {tenant.agentmail_pod_id}")
        else:
            made = [
                recovery.mailbox_inbox_recover(tenant=tenant, mailbox_id=m.pk)
                for m in [*lost.mailboxes, *unfinished]
            ]
        for mailbox in made:
            self.stdout.write(f"{mailbox.address}: inbox {mailbox.inbox_id}, {mailbox.status}")
