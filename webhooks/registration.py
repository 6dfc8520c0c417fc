"""The tenant's pod webhook at AgentMail, pointing at our receiver: registered by webhooks itself,
when ``mailboxes`` announces a provisioned mailbox (``mailboxes.signals.mailbox_provisioned``).
Safe to repeat: the provider call carries the endpoint's own ``client_id`` (drawn once per row)."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now

from mailboxes import provider
from mailboxes.provisioning import audit, refused, tenant_connect
from tenants.models import Tenant
from webhooks.models import WebhookEndpoint, WebhookSecret, new_webhook_client_id


def _endpoint_of(tenant: Tenant) -> WebhookEndpoint:
    """The tenant's one receiver, created on first use. Registrations of one tenant take turns
    on its row (NO KEY UPDATE: the worker's key-share locks of the tenant are not held up): two
    mailboxes of a new tenant provisioned at once both read "none yet" and each inserted one,
    two receivers of which AgentMail's webhook (one per client_id) reached only one, while the
    backfill read the other."""
    with transaction.atomic():
        Tenant.objects.select_for_update(no_key=True).filter(pk=tenant.pk).first()
        endpoint, _ = WebhookEndpoint.objects.get_or_create(tenant=tenant)
    return endpoint


def webhook_register(*, tenant: Tenant, actor=None):
    """Register the tenant's pod webhook pointing at our receiver and store its secret sealed."""
    pod_id = tenant_connect(tenant=tenant, actor=actor)
    endpoint = _endpoint_of(tenant)
    url = f"{settings.PUBLIC_BASE_URL.rstrip('/')}/webhooks/agentmail/{endpoint.public_id}/"
    try:
        hook = provider.register_pod_webhook(pod_id=pod_id, url=url, client_id=endpoint.client_id)
    except provider.ProviderError as exc:
        raise refused(exc) from None
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        active = list(endpoint.secrets.filter(retired_at__isnull=True))
        # AgentMail signs with this secret alone from now on (a webhook deleted and created
        # anew, as when its secret leaked; Svix's own rotation signs with both for a day, so the
        # new one verifies those too). Every other one is retired: kept, a replaced secret
        # verified forgeries for ever. Whether or not this one is new: a release before
        # 0d7e3ee stored each new secret beside the old ones, and a tenant whose leaked webhook
        # was replaced then still has both active, which registering again must end.
        replaced = [s.pk for s in active if s.plaintext() != hook.secret]
        is_new = len(replaced) == len(active)
        retired = WebhookSecret.objects.filter(pk__in=replaced).update(retired_at=Now())
        if is_new:
            secret = WebhookSecret(endpoint=endpoint)
            secret.sealed = secret.seal(hook.secret)
            secret.save()
        if is_new or retired:
            audit(
                tenant=tenant,
                actor=actor,
                action="webhook.secret_stored",
                obj=endpoint,
                data={"retired": retired},
            )
        if (
            endpoint.status != WebhookEndpoint.Status.ACTIVE
            or endpoint.provider_webhook_id != hook.webhook_id
        ):
            endpoint.status = WebhookEndpoint.Status.ACTIVE
            endpoint.provider_webhook_id = hook.webhook_id
            endpoint.save(update_fields=["status", "provider_webhook_id"])
    return endpoint


def webhook_endpoints_forget_pod(*, tenant_id: int, actor=None) -> list[int]:
    """The tenant's pod is gone at AgentMail, and its pod webhook with it (``mailboxes.recovery``,
    inside the transaction that forgets the pod): every endpoint of the tenant gets a new
    client_id, drawn here, and waits to be registered again (``pending``), which the next
    provisioned mailbox does in the new pod. Its old client_id would be answered with the gone
    webhook (AgentMail answers a client_id it has seen with the original object). The URL and
    the secrets stay: the secrets until the registration retires them. Returns the endpoint ids."""
    changed = []
    for endpoint in WebhookEndpoint.objects.select_for_update().filter(tenant_id=tenant_id):
        old_client_id = endpoint.client_id
        endpoint.agentmail_client_id = new_webhook_client_id()
        endpoint.status = WebhookEndpoint.Status.PENDING
        endpoint.provider_webhook_id = ""
        endpoint.save(update_fields=["agentmail_client_id", "status", "provider_webhook_id"])
        audit(
            tenant=endpoint.tenant,
            actor=actor,
            action="webhook.pod_lost",
            obj=endpoint,
            data={"old_client_id": old_client_id, "client_id": endpoint.client_id},
        )
        changed.append(endpoint.pk)
    return changed
