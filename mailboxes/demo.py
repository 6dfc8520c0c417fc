"""Demo mailboxes, provisioned in the sandbox AgentMail (skipped when it is not reachable)."""

from __future__ import annotations

import httpx
from django.conf import settings

from mailboxes import provisioning
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


def seed_mailboxes(*, stdout) -> None:
    if not sandbox_reachable():
        stdout.write(
            "demo mailboxes: the sandbox AgentMail is not running yet; `make run` provisions them"
        )
        return
    for slug, username, display_name, domains in DEMO_MAILBOXES:
        tenant = Tenant.objects.get(slug=slug)
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
            # Provision again (safe to repeat), which re-registers the webhook: the sandbox may
            # have been reset or the URL changed.
            mailbox = provisioning.mailbox_provision(mailbox=mailbox)
        stdout.write(f"demo mailbox {mailbox.address}: {mailbox.status}")
