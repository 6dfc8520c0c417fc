"""``manage.py webhook_register``: DEPLOYMENT.md "Rotating secrets" has a leaked webhook secret
replaced by deleting the tenant's pod webhook at AgentMail and registering it again. The way it
named, a mailbox's "Retry provisioning", is offered only for a mailbox that is not active, so a
tenant whose mailboxes all send had no way to register again: the leaked secret stayed active
(verifying forgeries) and, with the webhook deleted, AgentMail delivered the tenant nothing."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from webhooks import registration
from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("webhook_register", *args, stdout=out)
    return out.getvalue()


def test_after_the_webhook_is_deleted_at_agentmail_the_new_secret_replaces_the_leaked_one(
    sandbox, tenant_a
):
    endpoint = registration.webhook_register(tenant=tenant_a)
    leaked = endpoint.secrets.get().plaintext()
    org = sandbox.sdk()
    org.pods.webhooks.delete(tenant_a.agentmail_pod_id, endpoint.provider_webhook_id)

    said = _run(tenant_a.slug)

    (hook,) = org.pods.webhooks.list(tenant_a.agentmail_pod_id).webhooks
    endpoint.refresh_from_db()
    active = [s.plaintext() for s in endpoint.secrets.filter(retired_at__isnull=True)]
    assert hook.secret != leaked
    assert active == [hook.secret]
    assert endpoint.provider_webhook_id == hook.webhook_id
    assert said == (
        f"registered the webhook of {tenant_a.slug} at AgentMail again ({hook.webhook_id}): "
        "its new secret is stored and 1 earlier one was retired\n"
    )


def test_with_the_webhook_still_at_agentmail_it_says_what_to_delete_and_changes_nothing(
    sandbox, tenant_a
):
    endpoint = registration.webhook_register(tenant=tenant_a)
    before = list(endpoint.secrets.values_list("pk", "retired_at"))

    with pytest.raises(CommandError) as refused:
        _run(tenant_a.slug)

    assert str(refused.value) == (
        f"AgentMail still signs the webhooks of {tenant_a.slug} with the stored secret: delete "
        f"the webhook {endpoint.provider_webhook_id} of the pod {tenant_a.agentmail_pod_id} at "
        "AgentMail first (DEPLOYMENT.md, Rotating secrets); nothing was changed."
    )
    assert list(endpoint.secrets.values_list("pk", "retired_at")) == before


def test_a_tenant_without_a_pod_is_refused_and_no_pod_is_made(sandbox, tenant_a):
    with pytest.raises(CommandError) as refused:
        _run(tenant_a.slug)

    tenant_a.refresh_from_db()
    assert str(refused.value) == (
        f"{tenant_a.slug} has no AgentMail pod yet: its webhook is registered with its first "
        "mailbox; nothing was changed."
    )
    assert tenant_a.agentmail_pod_id == ""
    assert not WebhookEndpoint.objects.filter(tenant=tenant_a).exists()


def test_an_unknown_slug_is_refused():
    with pytest.raises(CommandError) as refused:
        _run("no-such-tenant")
    assert str(refused.value) == "No tenant has the slug 'no-such-tenant'."
