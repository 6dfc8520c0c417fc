"""Demo mailboxes, provisioned in the sandbox AgentMail (skipped when it is not reachable)."""

from __future__ import annotations

import httpx
from django.conf import settings
from django.db import transaction

from mailboxes import provider, provisioning
from mailboxes.models import Mailbox
from tenants.models import Tenant

DEMO_MAILBOXES = [
    ("acme", "acme-support", "Acme Support", ["acme.test", "example.com"]),
    ("globex", "globex-help", "Globex Help", []),
]


def sandbox_reachable() -> bool:
    try:
        httpx.get(
            f"{settings.AGENTMAIL_BASE_URL.rstrip('/')}/_sandbox/health",
            timeout=1.0,
            trust_env=False,
        )
    except httpx.HTTPError:
        return False
    return True


def demo_tenant_forget_pod(*, tenant: Tenant, pod_id: str) -> list[int]:
    """Forget the tenant's pod, which the sandbox does not know, and every inbox and key of the
    tenant's mailboxes that lived in it, so that provisioning makes them anew; returns the ids
    of the mailboxes reset (none if the tenant holds another pod by now).

    The demo's only: the sandbox keeps its pods in one SQLite file (another sandbox, or that file
    deleted, knows none of them). In production a pod AgentMail no longer knows is refused with
    its 404 for a person to look into, never replaced without a word."""
    with transaction.atomic():
        if not Tenant.objects.filter(pk=tenant.pk, agentmail_pod_id=pod_id).update(
            agentmail_pod_id=""
        ):
            return []
        mailboxes = Mailbox.objects.select_for_update().filter(tenant=tenant)
        mailbox_ids = sorted(mailboxes.values_list("pk", flat=True))
        # A mailbox without an inbox and key cannot be active (mailbox_active_has_inbox_and_key);
        # provisioning brings it back. The lost key's refusal is no longer anyone's concern.
        mailboxes.update(
            inbox_id="",
            provider_api_key_id="",
            api_key_sealed="",
            provider_display_name="",
            status=Mailbox.Status.PROVISIONING,
            key_refused_at=None,
            key_refused_detail="",
        )
        provisioning.audit(
            tenant=tenant,
            actor=None,
            action="tenant.pod_forgotten",
            obj=tenant,
            data={"pod_id": pod_id, "mailbox_ids": mailbox_ids},
        )
    return mailbox_ids


def _forget_lost_pod(tenant: Tenant, *, stdout) -> list[int]:
    pod_id = tenant.agentmail_pod_id
    if not pod_id or provider.pod_exists(pod_id=pod_id):
        return []
    stdout.write(
        f"demo tenant {tenant.slug}: the sandbox AgentMail does not know its pod {pod_id} (a "
        "reset sandbox or another one); provisioning a new pod, inboxes, keys and webhook"
    )
    return demo_tenant_forget_pod(tenant=tenant, pod_id=pod_id)


def seed_mailboxes(*, stdout) -> None:
    if not sandbox_reachable():
        stdout.write(
            "demo mailboxes: the sandbox AgentMail is not running yet; `make run` provisions them"
        )
        return
    for slug, username, display_name, domains in DEMO_MAILBOXES:
        tenant = Tenant.objects.get(slug=slug)
        reset = _forget_lost_pod(tenant, stdout=stdout)
        mailbox = Mailbox.objects.filter(tenant=tenant, username=username).first()
        if mailbox is None or mailbox.status == Mailbox.Status.PROVISIONING:
            mailbox = provisioning.mailbox_create(
                tenant=tenant,
                username=username,
                display_name=display_name,
                policy_mode=Mailbox.PolicyMode.RESTRICTED if domains else Mailbox.PolicyMode.OPEN,
                allowed_domains=domains,
            )
        else:
            # Provision again (safe to repeat), which re-registers the webhook: the URL may have
            # changed. A sandbox that lost the pod was dealt with above.
            mailbox = provisioning.mailbox_provision(mailbox=mailbox)
        stdout.write(f"demo mailbox {mailbox.address}: {mailbox.status}")
        # Mailboxes a demo user added to the tenant lived in the lost pod too.
        for other in Mailbox.objects.filter(pk__in=reset).exclude(pk=mailbox.pk).order_by("pk"):
            other = provisioning.mailbox_provision(mailbox=other)
            stdout.write(f"mailbox {other.address}: {other.status}")
