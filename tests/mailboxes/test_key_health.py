"""Replacing a mailbox's key (``mailbox_key_replace``): a new key at AgentMail, stored, and every
other key named for the mailbox deleted there, the stored one never. Counted at the sandbox."""

import pytest

from mailboxes import provider
from mailboxes.key_health import mailbox_key_refused, mailbox_key_replace
from mailboxes.models import Mailbox
from mailboxes.provisioning import ProvisioningError
from tenants.models import AuditEvent
from tenants.services import NotAnAdmin

pytestmark = pytest.mark.django_db


def _keys(sandbox, mailbox) -> dict[str, str]:
    """The inbox's keys at AgentMail: name by key id."""
    listed = sandbox.sdk().inboxes.api_keys.list(mailbox.inbox_id).api_keys
    return {k.api_key_id: k.name for k in listed}


def _row(mailbox) -> tuple:
    return Mailbox.objects.values_list(
        "api_key_sealed", "provider_api_key_id", "key_refused_at", "provisioning_lease"
    ).get(pk=mailbox.pk)


def test_a_replaced_key_works_the_old_one_is_deleted_at_agentmail_and_the_refusal_cleared(
    tenant_a, member_of, mailbox_factory, sandbox
):
    mailbox = mailbox_factory(tenant_a)
    old_id, old_key = mailbox.provider_api_key_id, mailbox.api_key()
    mailbox_key_refused(mailbox_id=mailbox.pk, api_key_id=old_id, detail="401 unknown_api_key")
    admin = member_of(tenant_a, "admin").user

    replaced = mailbox_key_replace(tenant=tenant_a, mailbox_id=mailbox.pk, actor=admin)

    new_id = replaced.provider_api_key_id
    assert new_id != old_id and not replaced.key_refused
    assert list(_keys(sandbox, mailbox)) == [new_id]
    assert _keys(sandbox, mailbox)[new_id].startswith(f"countersign-mailbox-{mailbox.pk}-")
    assert provider.check_key(api_key=replaced.api_key(), inbox_id=mailbox.inbox_id).ok
    assert provider.check_key(api_key=old_key, inbox_id=mailbox.inbox_id).http_status == 401
    audit = AuditEvent.objects.get(action="mailbox.key_replaced")
    assert (audit.actor, audit.object_id) == (admin, str(mailbox.pk))
    assert audit.data == {"old_api_key_id": old_id, "api_key_id": new_id}
    assert _row(replaced)[3] is None


def test_leftovers_of_a_run_that_died_are_deleted_and_other_keys_kept(
    tenant_a, member_of, mailbox_factory, sandbox
):
    """A run that died between AgentMail's create and our commit left a key named for the
    mailbox: the next replace deletes it with the old key. A key with another name, or named
    for mailbox 12 when this is mailbox 1 (a bare prefix would match it), is not ours."""
    mailbox = mailbox_factory(tenant_a)
    inbox_id = mailbox.inbox_id
    dead = provider.create_inbox_key(inbox_id=inbox_id, name=f"countersign-mailbox-{mailbox.pk}-x")
    other = provider.create_inbox_key(inbox_id=inbox_id, name=f"countersign-mailbox-{mailbox.pk}0")
    manual = provider.create_inbox_key(inbox_id=inbox_id, name="kept-by-hand")
    admin = member_of(tenant_a, "admin").user

    replaced = mailbox_key_replace(tenant=tenant_a, mailbox_id=mailbox.pk, actor=admin)

    kept = set(_keys(sandbox, mailbox))
    assert kept == {replaced.provider_api_key_id, other.api_key_id, manual.api_key_id}
    assert dead.api_key_id not in kept


def test_agentmail_refusing_to_make_a_key_changes_nothing(
    tenant_a, member_of, mailbox_factory, sandbox
):
    mailbox = mailbox_factory(tenant_a)
    before, keys = _row(mailbox), _keys(sandbox, mailbox)
    sandbox.fault("create_api_key", "500_before")

    with pytest.raises(ProvisioningError, match="nothing changed"):
        mailbox_key_replace(
            tenant=tenant_a, mailbox_id=mailbox.pk, actor=member_of(tenant_a, "admin").user
        )

    assert _row(mailbox) == before
    assert _keys(sandbox, mailbox) == keys
    assert not AuditEvent.objects.filter(action="mailbox.key_replaced").exists()


def test_an_old_key_agentmail_did_not_delete_is_said_and_deleted_by_the_next_replace(
    tenant_a, member_of, mailbox_factory, sandbox
):
    """The new key is stored when the delete of the old one fails: the admin is told the old one
    may still work, and the next replace deletes it (and the key it replaces)."""
    mailbox = mailbox_factory(tenant_a)
    old_id = mailbox.provider_api_key_id
    admin = member_of(tenant_a, "admin").user
    sandbox.fault("delete_api_key", "500_before")

    with pytest.raises(ProvisioningError, match="did not delete the old one"):
        mailbox_key_replace(tenant=tenant_a, mailbox_id=mailbox.pk, actor=admin)
    stored = Mailbox.objects.get(pk=mailbox.pk).provider_api_key_id
    assert stored != old_id and set(_keys(sandbox, mailbox)) == {old_id, stored}

    again = mailbox_key_replace(tenant=tenant_a, mailbox_id=mailbox.pk, actor=admin)
    assert list(_keys(sandbox, mailbox)) == [again.provider_api_key_id]
    assert AuditEvent.objects.filter(action="mailbox.key_replaced").count() == 2


@pytest.mark.parametrize("role", ["approver", "viewer"])
def test_only_an_admin_replaces_a_key(tenant_a, member_of, mailbox_factory, sandbox, role):
    mailbox = mailbox_factory(tenant_a)
    before, calls = _row(mailbox), len(sandbox.requests())

    with pytest.raises(NotAnAdmin):
        mailbox_key_replace(
            tenant=tenant_a, mailbox_id=mailbox.pk, actor=member_of(tenant_a, role).user
        )

    assert _row(mailbox) == before
    assert len(sandbox.requests()) == calls


def test_a_mailbox_without_a_key_yet_is_sent_to_provisioning(
    tenant_a, member_of, mailbox_factory, sandbox
):
    mailbox = mailbox_factory(tenant_a)
    Mailbox.objects.filter(pk=mailbox.pk).update(
        api_key_sealed="", provider_api_key_id="", status=Mailbox.Status.PROVISIONING
    )
    calls = len(sandbox.requests())

    with pytest.raises(ProvisioningError, match="retry its provisioning"):
        mailbox_key_replace(
            tenant=tenant_a, mailbox_id=mailbox.pk, actor=member_of(tenant_a, "admin").user
        )

    assert len(sandbox.requests()) == calls
