import importlib
import re

import pytest
from django.apps import apps

from mailboxes import provider, provisioning
from mailboxes.models import Mailbox
from tenants.models import Tenant
from tests.factories import TenantFactory
from tests.restore import restore_from_before_every_tenant
from webhooks import registration
from webhooks.models import WebhookEndpoint, WebhookSecret

pytestmark = pytest.mark.django_db


def test_mailbox_create_provisions_pod_inbox_key_and_webhook(tenant_a, sandbox):
    mailbox = provisioning.mailbox_create(
        tenant=tenant_a, username="help-desk", display_name="Help"
    )
    tenant_a.refresh_from_db()
    assert mailbox.status == Mailbox.Status.ACTIVE
    assert mailbox.inbox_id == "help-desk@agentmail.to"
    assert tenant_a.agentmail_pod_id
    assert mailbox.api_key().startswith("am_")
    key = sandbox.sdk().inboxes.api_keys.list(mailbox.inbox_id).api_keys
    assert [k.api_key_id for k in key] == [mailbox.provider_api_key_id]
    endpoint = WebhookEndpoint.objects.get(tenant=tenant_a)
    assert endpoint.status == WebhookEndpoint.Status.ACTIVE
    assert endpoint.secrets.get().plaintext().startswith("whsec_")


def test_provisioning_twice_leaves_one_of_everything(tenant_a, sandbox):
    first = provisioning.mailbox_create(tenant=tenant_a, username="twice")
    again = provisioning.mailbox_provision(mailbox=first)
    registration.webhook_register(tenant=tenant_a)
    org = sandbox.sdk()
    pod_id = tenant_a.agentmail_pod_id
    assert again.provider_api_key_id == first.provider_api_key_id
    assert [i.inbox_id for i in org.pods.inboxes.list(pod_id).inboxes] == ["twice@agentmail.to"]
    assert len(org.inboxes.api_keys.list("twice@agentmail.to").api_keys) == 1
    assert len(org.pods.webhooks.list(pod_id).webhooks) == 1
    assert Mailbox.objects.filter(tenant=tenant_a).count() == 1
    assert WebhookSecret.objects.filter(endpoint__tenant=tenant_a).count() == 1


def test_crash_after_key_creation_is_repaired_with_exactly_one_key(tenant_a, sandbox):
    mailbox = provisioning.mailbox_create(tenant=tenant_a, username="crashy")
    # Simulate a provisioner that died after AgentMail created a key but before we stored it:
    # the provider holds an orphan key with our name, our row holds none.
    provider.create_inbox_key(inbox_id=mailbox.inbox_id, name=f"countersign-mailbox-{mailbox.pk}")
    Mailbox.objects.filter(pk=mailbox.pk).update(
        api_key_sealed="", provider_api_key_id="", status=Mailbox.Status.PROVISIONING
    )
    repaired = provisioning.mailbox_provision(mailbox=Mailbox.objects.get(pk=mailbox.pk))
    keys = sandbox.sdk().inboxes.api_keys.list(mailbox.inbox_id).api_keys
    assert repaired.status == Mailbox.Status.ACTIVE
    assert [k.api_key_id for k in keys] == [repaired.provider_api_key_id]


def test_provisioning_deletes_a_replacement_key_left_by_a_run_that_died(tenant_a, sandbox):
    """A replace (mailboxes.key_health) names its key with a suffix; one whose secret was never
    stored is found and deleted by provisioning too, so the mailbox ends with exactly one key."""
    mailbox = provisioning.mailbox_create(tenant=tenant_a, username="rekeyed")
    name = f"countersign-mailbox-{mailbox.pk}-0123456789ab"
    provider.create_inbox_key(inbox_id=mailbox.inbox_id, name=name)
    Mailbox.objects.filter(pk=mailbox.pk).update(
        api_key_sealed="", provider_api_key_id="", status=Mailbox.Status.PROVISIONING
    )
    repaired = provisioning.mailbox_provision(mailbox=Mailbox.objects.get(pk=mailbox.pk))
    keys = sandbox.sdk().inboxes.api_keys.list(mailbox.inbox_id).api_keys
    assert [k.api_key_id for k in keys] == [repaired.provider_api_key_id]


def test_crash_before_local_row_update_reuses_the_same_inbox(tenant_a, sandbox):
    mailbox = provisioning.mailbox_create(tenant=tenant_a, username="halfway")
    Mailbox.objects.filter(pk=mailbox.pk).update(
        inbox_id="", api_key_sealed="", status=Mailbox.Status.PROVISIONING
    )
    provisioning.mailbox_provision(mailbox=Mailbox.objects.get(pk=mailbox.pk))
    inboxes = sandbox.sdk().pods.inboxes.list(tenant_a.agentmail_pod_id).inboxes
    assert [i.inbox_id for i in inboxes] == ["halfway@agentmail.to"]


def test_bad_username_is_refused_and_nothing_is_created(tenant_a, sandbox):
    calls_before = len(sandbox.requests())
    with pytest.raises(provisioning.ProvisioningError) as refused:
        provisioning.mailbox_create(tenant=tenant_a, username="Bad Name!")
    assert refused.value.field == "username"
    assert not Mailbox.objects.exists()
    assert len(sandbox.requests()) == calls_before


def test_address_taken_by_another_tenant_is_refused(tenant_a, tenant_b, sandbox):
    provisioning.mailbox_create(tenant=tenant_a, username="shared-name")
    with pytest.raises(provisioning.ProvisioningError, match="already taken"):
        provisioning.mailbox_create(tenant=tenant_b, username="shared-name")
    assert Mailbox.objects.filter(tenant=tenant_b).count() == 0


def test_inbox_key_is_refused_on_another_tenants_inbox(
    tenant_a, tenant_b, mailbox_factory, sandbox
):
    mine = mailbox_factory(tenant_a)
    theirs = mailbox_factory(tenant_b)
    result = provider.send_message(
        api_key=mine.api_key(),
        request=provider.SendRequest(
            inbox_id=theirs.inbox_id,
            to=["x@example.com"],
            cc=[],
            bcc=[],
            subject="s",
            text="t",
            html="",
            labels=[],
            idempotency_key="cross-tenant-1",
        ),
    )
    assert result.outcome == provider.Outcome.PERMANENT
    assert result.http_status == 404
    assert sandbox.ledger(idempotency_key="cross-tenant-1") == []


def test_a_held_provisioning_lease_refuses_a_second_run_and_an_expired_one_is_taken_over(
    tenant_a, sandbox
):
    import uuid
    from datetime import timedelta

    from django.db.models.functions import Now

    mailbox = provisioning.mailbox_create(tenant=tenant_a, username="leased")
    other_run = uuid.uuid4()
    held = Mailbox.objects.filter(pk=mailbox.pk)
    held.update(provisioning_lease=other_run, provisioning_lease_until=Now() + timedelta(minutes=1))
    with pytest.raises(provisioning.ProvisioningError, match="already running"):
        provisioning.mailbox_provision(mailbox=mailbox)
    assert held.get().provisioning_lease == other_run
    # The other run died: its lease expires, and the next run takes over and releases it.
    held.update(provisioning_lease_until=Now() - timedelta(seconds=1))
    assert provisioning.mailbox_provision(mailbox=mailbox).status == Mailbox.Status.ACTIVE
    assert held.values_list("provisioning_lease", "provisioning_lease_until").get() == (None, None)


def test_a_tenant_and_mailbox_that_reuse_ids_of_another_database_get_their_own_pod_and_inbox(
    sandbox,
):
    """All tenants of a deployment share one AgentMail organization, which answers a create
    whose client_id it has seen with the original object. Client ids built from primary keys
    alone (``cs-tenant-7``) are seen again by a database restored from an older backup (the
    tenants and mailboxes created after the backup point had those ids), by a second deployment
    on the same organization, by a database built anew: the new customer was handed the old
    customer's pod, and its mailbox the old customer's inbox, with its mail."""
    old_tenant = TenantFactory(slug="old-customer")
    old_mailbox = provisioning.mailbox_create(tenant=old_tenant, username="old-help")
    old_tenant.refresh_from_db()
    tenant_pk, mailbox_pk = old_tenant.pk, old_mailbox.pk
    old_key_id = old_mailbox.provider_api_key_id
    restore_from_before_every_tenant(next_tenant_id=tenant_pk, next_mailbox_id=mailbox_pk)

    new_tenant = TenantFactory(slug="new-customer")
    new_mailbox = provisioning.mailbox_create(tenant=new_tenant, username="new-help")
    new_tenant.refresh_from_db()

    assert (new_tenant.pk, new_mailbox.pk) == (tenant_pk, mailbox_pk)
    assert new_tenant.agentmail_pod_id != old_tenant.agentmail_pod_id
    assert new_mailbox.inbox_id == "new-help@agentmail.to"
    org = sandbox.sdk()
    assert [i.inbox_id for i in org.pods.inboxes.list(new_tenant.agentmail_pod_id).inboxes] == [
        "new-help@agentmail.to"
    ]
    assert [k.api_key_id for k in org.inboxes.api_keys.list("old-help@agentmail.to").api_keys] == [
        old_key_id
    ]


def _backfill(module: str, function: str) -> None:
    getattr(importlib.import_module(module), function)(apps, None)


def test_rows_half_provisioned_before_the_upgrade_get_the_pod_inbox_and_webhook_already_made(
    tenant_a, sandbox
):
    """Rows made before client ids were drawn per row keep the id-derived ones (the migrations'
    backfill): a provisioning of the release before that created the pod, the inbox and the
    webhook and died before recording them repeats with the same client ids, and AgentMail
    answers with what it made. A new one each would have left them orphaned (and the inbox's
    address taken: the mailbox could never be provisioned)."""
    mailbox = Mailbox.objects.create(
        tenant=tenant_a, username="upgraded", address="upgraded@agentmail.to"
    )
    endpoint = WebhookEndpoint.objects.create(tenant=tenant_a)
    Tenant.objects.filter(pk=tenant_a.pk).update(agentmail_client_id=None)
    Mailbox.objects.filter(pk=mailbox.pk).update(agentmail_client_id=None)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(agentmail_client_id=None)
    _backfill("tenants.migrations.0015_agentmail_client_id", "keep_the_id_derived_client_id")
    _backfill("mailboxes.migrations.0011_agentmail_client_id", "keep_the_id_derived_client_id")
    _backfill("webhooks.migrations.0014_agentmail_client_id", "keep_the_tenant_derived_client_id")
    pod_id = provider.create_pod(client_id=f"cs-tenant-{tenant_a.pk}", name="countersign-old")
    provider.create_inbox(
        pod_id=pod_id,
        username="upgraded",
        domain="agentmail.to",
        display_name="",
        client_id=f"cs-mailbox-{mailbox.pk}",
    )
    hook = provider.register_pod_webhook(
        pod_id=pod_id,
        url=f"http://127.0.0.1:9/webhooks/agentmail/{endpoint.public_id}/",
        client_id=f"cs-webhook-{tenant_a.pk}",
    )

    provisioned = provisioning.mailbox_provision(mailbox=Mailbox.objects.get(pk=mailbox.pk))
    tenant_a.refresh_from_db()
    endpoint.refresh_from_db()

    assert (tenant_a.agentmail_client_id, provisioned.agentmail_client_id) == (
        f"cs-tenant-{tenant_a.pk}",
        f"cs-mailbox-{mailbox.pk}",
    )
    assert tenant_a.agentmail_pod_id == pod_id
    assert provisioned.inbox_id == "upgraded@agentmail.to"
    assert provisioned.status == Mailbox.Status.ACTIVE
    assert endpoint.provider_webhook_id == hook.webhook_id
    org = sandbox.sdk()
    assert [p.pod_id for p in org.pods.list().pods if p.name.startswith("countersign-")] == [pod_id]
    assert [h.webhook_id for h in org.pods.webhooks.list(pod_id).webhooks] == [hook.webhook_id]


def test_a_row_inserted_by_the_release_before_provisions_with_the_id_derived_client_id(tenant_a):
    """During a rolling upgrade a process of the release before inserts rows without the column
    (null) and provisions them with the id-derived client ids: this release repeats those."""
    Tenant.objects.filter(pk=tenant_a.pk).update(agentmail_client_id=None)
    mailbox = Mailbox.objects.create(
        tenant=tenant_a, username="rolling", address="rolling@agentmail.to"
    )
    Mailbox.objects.filter(pk=mailbox.pk).update(agentmail_client_id=None)
    endpoint = WebhookEndpoint.objects.create(tenant=tenant_a, agentmail_client_id=None)

    assert Tenant.objects.get(pk=tenant_a.pk).pod_client_id == f"cs-tenant-{tenant_a.pk}"
    assert Mailbox.objects.get(pk=mailbox.pk).client_id == f"cs-mailbox-{mailbox.pk}"
    assert endpoint.client_id == f"cs-webhook-{tenant_a.pk}"


def test_every_new_row_draws_a_client_id_of_its_own_in_agentmails_alphabet(tenant_a, tenant_b):
    mailboxes = [
        Mailbox.objects.create(tenant=t, username="same", address=f"same@{t.slug}.test")
        for t in (tenant_a, tenant_b)
    ]
    endpoints = [WebhookEndpoint.objects.create(tenant=t) for t in (tenant_a, tenant_b)]
    ids = [
        tenant_a.pod_client_id,
        tenant_b.pod_client_id,
        *(m.client_id for m in mailboxes),
        *(e.client_id for e in endpoints),
    ]

    assert len(set(ids)) == 6
    assert all(re.fullmatch(r"cs-(tenant|mailbox|webhook)-[0-9a-f]{32}", i) for i in ids), ids
