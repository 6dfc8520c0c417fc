import pytest

from mailboxes import provider, provisioning
from mailboxes.models import Mailbox
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
