"""The tenant's attachment storage quota (intents/services/storage.py): a version whose new bytes
would pass it is refused with nothing written, a file the tenant holds already costs nothing, and
two drafts stored at the same moment cannot both slip past it."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import transaction

from intents import errors
from intents.attachments import Upload
from intents.models import AttachmentBlob, AttachmentStorage, Draft
from intents.selectors.storage import storage_quota, used_bytes
from tenants.models import AuditEvent
from tests.factories import make_local_mailbox
from tests.intents.helpers import blocked_on_a_lock, in_thread, run_concurrently

KIB = 1024


def _file(tag: str, size: int = 40 * KIB) -> Upload:
    """A text file of ``size`` bytes whose content (and so digest) differs per ``tag``."""
    data = (tag.encode() * size)[:size]
    return Upload(f"{tag}.txt", "text/plain", data)


@pytest.fixture
def quota(settings):
    """Room for two 40 KiB files and a bit: the third is refused. The tenant's quota alone: a
    mailbox may use all of it (tests/intents/test_mailbox_storage.py bounds it)."""
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = 100 * KIB
    settings.MAILBOX_ATTACHMENT_STORAGE_SHARE = 1
    return settings.TENANT_ATTACHMENT_STORAGE_BYTES


@pytest.mark.django_db
def test_new_bytes_past_the_quota_are_refused_and_nothing_is_written(
    quota, new_draft, tenant_a, tenant_b
):
    new_draft(attachments=[_file("a")])
    new_draft(attachments=[_file("a"), _file("b")])  # "a" again costs nothing

    with pytest.raises(errors.StorageQuotaExceeded) as refused:
        new_draft(attachments=[_file("c")])

    assert (refused.value.code, refused.value.status, refused.value.field) == (
        "storage_quota_exceeded",
        413,
        "attachments",
    )
    assert f"past its quota of {quota} bytes" in refused.value.message
    assert Draft.objects.filter(tenant=tenant_a).count() == 2
    assert AttachmentBlob.objects.filter(tenant=tenant_a).count() == 2
    assert used_bytes(tenant_a.pk) == 80 * KIB
    # Bytes the tenant holds already still pass at the quota.
    new_draft(attachments=[_file("b")])
    assert used_bytes(tenant_a.pk) == 80 * KIB
    assert not AttachmentStorage.objects.filter(tenant=tenant_b).exists()


@pytest.mark.django_db(transaction=True)
def test_a_draft_storing_at_the_same_moment_waits_and_is_then_refused(quota, new_draft, tenant_a):
    # Another mailbox: two drafts of one mailbox take turns on its row already.
    other = make_local_mailbox(tenant_a, username="other")
    new_draft(attachments=[_file("a")])
    outcome: list = []

    with transaction.atomic():
        new_draft(attachments=[_file("b")])
        rival = in_thread(lambda: new_draft(mailbox=other, attachments=[_file("c")]), outcome)
        assert blocked_on_a_lock(), "the second draft never waited for the first's total"
    rival.join(30)

    assert isinstance(outcome[0], errors.StorageQuotaExceeded)
    assert used_bytes(tenant_a.pk) == 80 * KIB
    assert AttachmentBlob.objects.filter(tenant=tenant_a).count() == 2


@pytest.mark.django_db(transaction=True)
def test_of_six_drafts_at_once_only_those_that_fit_are_stored(quota, new_draft, tenant_a):
    mailboxes = [make_local_mailbox(tenant_a, username=f"box{i}") for i in range(6)]

    results = run_concurrently(
        lambda i: new_draft(mailbox=mailboxes[i], attachments=[_file(f"f{i}")]), 6
    )

    stored = [r for r in results if isinstance(r, Draft)]
    refused = [r for r in results if isinstance(r, errors.StorageQuotaExceeded)]
    assert (len(stored), len(refused)) == (2, 4)
    assert used_bytes(tenant_a.pk) == 80 * KIB
    assert AttachmentBlob.objects.filter(tenant=tenant_a).count() == 2


@pytest.mark.django_db
def test_the_recount_sets_each_total_to_what_the_blobs_hold(quota, new_draft, tenant_a, tenant_b):
    new_draft(attachments=[_file("a"), _file("b")])
    # Files stored by a process of the release before the quota: never counted.
    AttachmentStorage.objects.filter(tenant=tenant_a).update(bytes_used=0)
    out = io.StringIO()

    call_command("attachment_storage_recount", stdout=out)

    assert used_bytes(tenant_a.pk) == 80 * KIB
    assert used_bytes(tenant_b.pk) == 0
    assert f"{tenant_a.slug}: 0 -> {80 * KIB} bytes" in out.getvalue()


@pytest.mark.django_db
def test_a_correction_writes_one_operator_audit_row_and_a_run_that_changes_nothing_none(
    quota, new_draft, tenant_a, tenant_b
):
    """Found by a probe: the correction of a tenant's counter left a log line only, where every
    other operator command that changes state writes an audit row the tenant's admins can read."""
    new_draft(attachments=[_file("a"), _file("b")])
    AttachmentStorage.objects.filter(tenant=tenant_a).update(bytes_used=7)
    audit = AuditEvent.objects.filter(action="tenant.storage_recounted")

    call_command("attachment_storage_recount", stdout=io.StringIO())
    after_the_correction = list(
        audit.values_list("tenant", "actor", "object_type", "object_id", "data")
    )
    call_command("attachment_storage_recount", stdout=io.StringIO())
    call_command("attachment_storage_recount", "--tenant", tenant_b.slug, stdout=io.StringIO())

    assert after_the_correction == [
        (
            tenant_a.pk,
            None,
            "tenant",
            str(tenant_a.pk),
            {
                "before": {"attachment_storage_used": 7},
                "after": {"attachment_storage_used": 80 * KIB},
            },
        )
    ]
    assert audit.count() == 1


@pytest.mark.django_db
def test_a_tenants_own_quota_lets_through_what_the_default_refuses_until_set_back(
    quota, settings, new_draft, tenant_a, tenant_b
):
    """``manage.py tenant_storage_quota``: the operator's figure for one tenant is what the
    guarded charge checks; another tenant keeps the deployment's; ``--default`` restores it."""
    settings.ATTACHMENT_MAX_DRAFT_BYTES = 80 * KIB  # the least a quota may be
    new_draft(attachments=[_file("a"), _file("b")])
    with pytest.raises(errors.StorageQuotaExceeded):
        new_draft(attachments=[_file("c")])

    call_command(
        "tenant_storage_quota", tenant_a.slug, "--bytes", str(200 * KIB), stdout=io.StringIO()
    )
    stored = new_draft(attachments=[_file("c")])
    quotas_while_own = (storage_quota(tenant_a.pk), storage_quota(tenant_b.pk))
    call_command("tenant_storage_quota", tenant_a.slug, "--default", stdout=io.StringIO())
    with pytest.raises(errors.StorageQuotaExceeded) as refused:
        new_draft(attachments=[_file("d")])

    assert stored.pk is not None
    assert quotas_while_own == (200 * KIB, quota)
    assert used_bytes(tenant_a.pk) == 120 * KIB
    assert f"past its quota of {quota} bytes" in refused.value.message
    assert AttachmentBlob.objects.filter(tenant=tenant_a).count() == 3
