"""The tenant's pod webhook at the sandbox AgentMail, registered again after AgentMail's webhook was
replaced (deleted and created anew, as an operator does when its secret leaked): the new secret
verifies at once, and the one it replaced no longer does."""

from __future__ import annotations

import json

import pytest

from intents.models import Suppression
from tests.webhooks.conftest import Hook, delivery_payload, new_svix_id
from webhooks import registration
from webhooks.models import RecipientDelivery, WebhookEvent

pytestmark = pytest.mark.django_db


def test_a_secret_replaced_at_agentmail_stops_verifying_when_the_new_one_is_stored(
    client, sandbox, tenant_a, mailbox_row, intent_row
):
    endpoint = registration.webhook_register(tenant=tenant_a)
    leaked = endpoint.secrets.get().plaintext()
    org = sandbox.sdk()
    org.pods.webhooks.delete(tenant_a.agentmail_pod_id, endpoint.provider_webhook_id)
    endpoint = registration.webhook_register(tenant=tenant_a)
    (current,) = [h.secret for h in org.pods.webhooks.list(tenant_a.agentmail_pod_id).webhooks]
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    body = json.dumps(delivery_payload("bounced", intent), separators=(",", ":"))
    hook = Hook(endpoint, current)

    forged = hook.post_raw(
        client, body.encode(), hook.headers(body, svix_id=new_svix_id(), secret=leaked)
    )
    stored_after_forgery = (
        WebhookEvent.objects.count(),
        RecipientDelivery.objects.count(),
        Suppression.objects.count(),
    )
    genuine = hook.post_raw(client, body.encode(), hook.headers(body, svix_id=new_svix_id()))

    assert current != leaked
    assert (forged.status_code, forged.json()["detail"]) == (400, "bad_signature")
    assert stored_after_forgery == (0, 0, 0)
    assert genuine.status_code == 200
    assert list(endpoint.secrets.filter(retired_at__isnull=True).values_list("pk", flat=True)) == [
        s.pk for s in endpoint.secrets.all() if s.plaintext() == current
    ]


@pytest.mark.django_db(transaction=True)
def test_two_registrations_at_once_make_one_endpoint(sandbox, tenant_a):
    """Two mailboxes of a new tenant provisioned at the same moment each register the tenant's
    webhook. Both read "no endpoint yet" and both inserted one: two receivers for one tenant,
    AgentMail's webhook (one per client_id) pointing at one of them, the backfill and the
    late-rejection check reading the other."""
    from django.db import connection, transaction

    from tenants.models import Tenant
    from tests.intents.helpers import blocked_on_a_lock, in_thread
    from webhooks.models import WebhookEndpoint

    registration.tenant_connect(tenant=tenant_a)  # the pod first, as provisioning does
    outcomes: list = []
    table = connection.ops.quote_name(WebhookEndpoint._meta.db_table)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {table} IN SHARE MODE")  # inserts wait until the block ends
        first = in_thread(
            lambda: registration.webhook_register(tenant=Tenant.objects.get(pk=tenant_a.pk)),
            outcomes,
        )
        assert blocked_on_a_lock(), "the first registration never reached its insert"
        second = in_thread(
            lambda: registration.webhook_register(tenant=Tenant.objects.get(pk=tenant_a.pk)),
            outcomes,
        )
        assert blocked_on_a_lock(count=2), "the second registration never waited"
    first.join(30)
    second.join(30)

    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert WebhookEndpoint.objects.filter(tenant=tenant_a).count() == 1
    assert {o.pk for o in outcomes} == {WebhookEndpoint.objects.get(tenant=tenant_a).pk}


def test_registering_again_retires_a_replaced_secret_an_older_release_left_active(
    client, sandbox, tenant_a, mailbox_row, intent_row
):
    """Found by an outside probe: a release before 0d7e3ee stored each new secret beside the old
    ones, so a tenant whose leaked webhook was replaced then still has both active. Registering
    again, as DEPLOYMENT.md says, returned the current secret, which was known: nothing was
    retired, and the leaked secret kept verifying forgeries. Every active secret but the one
    AgentMail signs with is retired, whether that one is new or not."""
    endpoint = registration.webhook_register(tenant=tenant_a)
    leaked = endpoint.secrets.get().plaintext()
    org = sandbox.sdk()
    org.pods.webhooks.delete(tenant_a.agentmail_pod_id, endpoint.provider_webhook_id)
    endpoint = registration.webhook_register(tenant=tenant_a)
    # As the older release left it: the replaced secret still active beside the current one.
    endpoint.secrets.update(retired_at=None)

    endpoint = registration.webhook_register(tenant=tenant_a)
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    body = json.dumps(delivery_payload("bounced", intent), separators=(",", ":"))
    (current,) = [h.secret for h in org.pods.webhooks.list(tenant_a.agentmail_pod_id).webhooks]
    hook = Hook(endpoint, current)
    forged = hook.post_raw(
        client, body.encode(), hook.headers(body, svix_id=new_svix_id(), secret=leaked)
    )

    assert forged.status_code == 400 and forged.json()["detail"] == "bad_signature"
    assert WebhookEvent.objects.count() == 0
    assert [s.plaintext() for s in endpoint.secrets.filter(retired_at__isnull=True)] == [current]


def test_a_tenant_that_reuses_the_id_of_another_databases_tenant_gets_its_own_webhook(sandbox):
    """The tenant's webhook was created with client_id ``cs-webhook-<tenant id>``, and AgentMail
    answers a client_id it has seen with the original webhook: a tenant of a database restored
    from an older backup (or of another deployment on the same organization) that got the id of
    a tenant created elsewhere was handed that tenant's webhook, its URL (the other database's
    receiver, so none of the new tenant's events reached it) and its signing secret."""
    from tests.factories import TenantFactory
    from tests.restore import restore_from_before_every_tenant

    old_tenant = TenantFactory(slug="old-customer")
    old_endpoint = registration.webhook_register(tenant=old_tenant)
    old_secret = old_endpoint.secrets.get().plaintext()
    tenant_pk = old_tenant.pk
    restore_from_before_every_tenant(next_tenant_id=tenant_pk)

    new_tenant = TenantFactory(slug="new-customer")
    endpoint = registration.webhook_register(tenant=new_tenant)
    new_tenant.refresh_from_db()

    hooks = sandbox.sdk().pods.webhooks.list(new_tenant.agentmail_pod_id).webhooks
    assert new_tenant.pk == tenant_pk
    assert [(h.webhook_id, h.url) for h in hooks] == [
        (
            endpoint.provider_webhook_id,
            f"http://127.0.0.1:9/webhooks/agentmail/{endpoint.public_id}/",
        )
    ]
    assert endpoint.provider_webhook_id != old_endpoint.provider_webhook_id
    assert endpoint.secrets.get().plaintext() != old_secret
