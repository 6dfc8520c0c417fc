from django.core.management.base import CommandError

from common.cli import BaseCommand, shown, text
from mailboxes.provisioning import ProvisioningError
from tenants.models import Tenant
from webhooks import registration
from webhooks.models import WebhookSecret


class Command(BaseCommand):
    help = (
        "Register a tenant's pod webhook at AgentMail again and store the secret AgentMail signs "
        "with; every other stored secret is retired at once. Run it after deleting the tenant's "
        "pod webhook at AgentMail, when its secret leaked (DEPLOYMENT.md, 'Rotating secrets')."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", type=text, help="the tenant's slug")

    def handle(self, *args, slug, **options):
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"No tenant has the slug {shown(slug)}.")
        if not tenant.agentmail_pod_id:
            # Registering would make the pod (registration.tenant_connect): an operator's
            # rotation must not provision a tenant that connected no mailbox.
            raise CommandError(
                f"{tenant.slug} has no AgentMail pod yet: its webhook is registered with its "
                "first mailbox; nothing was changed."
            )
        active = WebhookSecret.objects.filter(endpoint__tenant=tenant, retired_at__isnull=True)
        before = set(active.values_list("pk", flat=True))
        try:
            endpoint = registration.webhook_register(tenant=tenant)
        except ProvisioningError as error:
            raise CommandError(error.message) from None
        after = set(active.values_list("pk", flat=True))
        if after == before:
            raise CommandError(
                f"AgentMail still signs the webhooks of {tenant.slug} with the stored secret: "
                f"delete the webhook {endpoint.provider_webhook_id} of the pod "
                f"{tenant.agentmail_pod_id} at AgentMail first (DEPLOYMENT.md, Rotating "
                "secrets); nothing was changed."
            )
        retired = len(before - after)
        earlier = "1 earlier one was" if retired == 1 else f"{retired} earlier ones were"
        self.stdout.write(
            f"registered the webhook of {tenant.slug} at AgentMail again "
            f"({endpoint.provider_webhook_id}): its new secret is stored and {earlier} retired"
        )
