from django.core.management.base import CommandError
from django.db import transaction

from common.cli import BaseCommand
from common.crypto import SecretUnreadable
from intents.services.event_endpoints import endpoint_secrets_reseal_all
from mailboxes import crypto
from mailboxes.models import Mailbox
from tenants.oidc_signin import sso_reseal_all
from tenants.onboarding import operator_secrets_resealed
from tenants.two_factor import totp_reseal_all
from webhooks.models import WebhookSecret


# In webhooks, not mailboxes: it re-seals every app's secrets in one transaction, and only the
# upper app (webhooks) may import the others' models and services.
class Command(BaseCommand):
    help = (
        "Re-seal every stored secret (AgentMail keys, webhook secrets, authenticator seeds, "
        "single sign-on client secrets, agent event signing secrets) under the first key of "
        "SECRET_ENCRYPTION_KEYS, so older keys can then be removed from the ring. A run that "
        "re-sealed anything leaves a row in the operators' audit log (no tenant's)."
    )

    def handle(self, *args, **options):
        try:
            self._reseal()
        except SecretUnreadable as exc:
            # Rolled back whole: nothing was re-sealed.
            raise CommandError(
                f"A stored secret cannot be opened with SECRET_ENCRYPTION_KEYS ({exc}); put back "
                "the key that sealed it and run this again. Nothing was changed."
            ) from None

    def _reseal(self) -> None:
        mailboxes = secrets = 0
        with transaction.atomic():
            for mailbox in Mailbox.objects.select_for_update().exclude(api_key_sealed=""):
                if crypto.needs_reseal(mailbox.api_key_sealed):
                    mailbox.api_key_sealed = mailbox.seal_api_key(mailbox.api_key())
                    mailbox.save(update_fields=["api_key_sealed"])
                    mailboxes += 1
            for secret in WebhookSecret.objects.select_for_update().select_related("endpoint"):
                if crypto.needs_reseal(secret.sealed):
                    secret.sealed = secret.seal(secret.plaintext())
                    secret.save(update_fields=["sealed"])
                    secrets += 1
            seeds = totp_reseal_all()
            clients = sso_reseal_all()
            endpoints = endpoint_secrets_reseal_all()
            primary, _ = crypto.key_ring()
            counts = {
                "mailbox_keys": mailboxes,
                "webhook_secrets": secrets,
                "authenticator_seeds": seeds,
                "sso_client_secrets": clients,
                "agent_event_endpoints": endpoints,
            }
            if any(counts.values()):
                operator_secrets_resealed(key_id=primary, counts=counts)
        self.stdout.write(
            f"re-sealed {mailboxes} mailbox keys, {secrets} webhook secrets, {seeds} authenticator "
            f"seeds, {clients} single sign-on client secrets and the signing secrets of "
            f"{endpoints} agent event endpoints under key {primary!r}"
        )
