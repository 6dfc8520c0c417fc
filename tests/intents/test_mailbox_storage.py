"""Each mailbox's share of the tenant's attachment storage quota (intents/services/storage.py):
a mailbox (one agent token scoped to it, say) cannot fill the whole quota and block the others.
A file is charged to each mailbox whose drafts name it, once per mailbox, from the version that
first names it until retention drops its bytes; the recount reproduces the charges."""

from __future__ import annotations

import importlib
import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from intents import errors, services, tasks
from intents.attachments import Upload
from intents.models import (
    AttachmentBlob,
    AttachmentCharge,
    Draft,
    MailboxAttachmentStorage,
)
from intents.selectors.storage import mailbox_storage_bound, mailbox_used_bytes, used_bytes
from tenants.models import AuditEvent
from tests.factories import make_local_mailbox
from tests.intents.helpers import run_concurrently

KIB = 1024


def _file(tag: str, size: int = 40 * KIB) -> Upload:
    data = (tag.encode() * size)[:size]
    return Upload(f"{tag}.txt", "text/plain", data)


@pytest.fixture
def share(settings):
    """A tenant quota of 200 KiB, half of it (100 KiB) per mailbox: two 40 KiB files fit in one
    mailbox, the third is refused."""
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = 200 * KIB
    settings.MAILBOX_ATTACHMENT_STORAGE_SHARE = 0.5
    return 100 * KIB


@pytest.fixture
def other_mailbox(tenant_a):
    return make_local_mailbox(tenant_a, username="billing")


@pytest.mark.django_db
def test_a_mailbox_past_its_share_is_refused_and_another_mailbox_still_attaches(
    share, new_draft, tenant_a, local_mailbox, other_mailbox
):
    new_draft(attachments=[_file("a")])
    new_draft(attachments=[_file("b")])

    with pytest.raises(errors.MailboxStorageQuotaExceeded) as refused:
        new_draft(attachments=[_file("c")])
    other = new_draft(mailbox=other_mailbox, attachments=[_file("d")])

    assert (refused.value.code, refused.value.status, refused.value.field) == (
        "mailbox_storage_quota_exceeded",
        413,
        "attachments",
    )
    assert f"{80 * KIB} of {share} bytes" in refused.value.message
    assert refused.value.extensions == {
        "mailbox": local_mailbox.address,
        "mailbox_storage_used": 80 * KIB,
        "mailbox_storage_limit": share,
        "attachments_bytes": 40 * KIB,
    }
    assert mailbox_storage_bound(tenant_a.pk) == share
    assert other.pk is not None
    assert Draft.objects.filter(mailbox=local_mailbox).count() == 2
    assert (mailbox_used_bytes(local_mailbox.pk), mailbox_used_bytes(other_mailbox.pk)) == (
        80 * KIB,
        40 * KIB,
    )
    assert used_bytes(tenant_a.pk) == 120 * KIB
    # A file the mailbox holds already costs it nothing, at its share's edge too.
    new_draft(attachments=[_file("a"), _file("b")])
    assert mailbox_used_bytes(local_mailbox.pk) == 80 * KIB


@pytest.mark.django_db
def test_a_file_shared_by_two_mailboxes_is_charged_to_each_and_once_to_the_tenant(
    share, new_draft, tenant_a, local_mailbox, other_mailbox
):
    new_draft(attachments=[_file("a")])
    new_draft(mailbox=other_mailbox, attachments=[_file("a")])

    assert (mailbox_used_bytes(local_mailbox.pk), mailbox_used_bytes(other_mailbox.pk)) == (
        40 * KIB,
        40 * KIB,
    )
    assert used_bytes(tenant_a.pk) == 40 * KIB
    assert AttachmentBlob.objects.filter(tenant=tenant_a).count() == 1
    assert AttachmentCharge.objects.filter(tenant=tenant_a).count() == 2


@pytest.mark.django_db
def test_retention_frees_the_mailboxs_share(
    share, new_draft, tenant_a, local_mailbox, other_mailbox, approver
):
    drafts = [new_draft(attachments=[_file("a")]), new_draft(attachments=[_file("b")])]
    new_draft(mailbox=other_mailbox, attachments=[_file("b")])
    for draft in drafts:
        services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="no", actor=approver)
    Draft.objects.filter(pk__in=[d.pk for d in drafts]).update(
        updated_at=timezone.now() - timedelta(days=91)
    )
    with pytest.raises(errors.MailboxStorageQuotaExceeded):
        new_draft(attachments=[_file("c")])

    tasks.retention_purge()
    new_draft(attachments=[_file("c")])

    # "a" went with its drafts; "b" is kept by the other mailbox's draft, and stays charged to
    # each mailbox that named it until its bytes go.
    assert mailbox_used_bytes(local_mailbox.pk) == 80 * KIB
    assert mailbox_used_bytes(other_mailbox.pk) == 40 * KIB
    assert used_bytes(tenant_a.pk) == 80 * KIB
    assert not AttachmentCharge.objects.filter(blob__data_purged_at__isnull=False).exists()


@pytest.mark.django_db(transaction=True)
def test_of_six_drafts_of_one_mailbox_at_once_only_those_within_its_share_are_stored(
    share, new_draft, tenant_a, local_mailbox
):
    results = run_concurrently(lambda i: new_draft(attachments=[_file(f"f{i}")]), 6)

    stored = [r for r in results if isinstance(r, Draft)]
    refused = [r for r in results if isinstance(r, errors.MailboxStorageQuotaExceeded)]
    assert (len(stored), len(refused)) == (2, 4)
    assert mailbox_used_bytes(local_mailbox.pk) == 80 * KIB
    assert used_bytes(tenant_a.pk) == 80 * KIB
    assert AttachmentCharge.objects.filter(mailbox=local_mailbox).count() == 2


@pytest.mark.django_db(transaction=True)
def test_six_drafts_naming_one_file_at_once_charge_the_mailbox_once(
    share, new_draft, tenant_a, local_mailbox
):
    results = run_concurrently(lambda i: new_draft(attachments=[_file("same")]), 6)

    assert all(isinstance(r, Draft) for r in results), results
    assert mailbox_used_bytes(local_mailbox.pk) == 40 * KIB
    assert used_bytes(tenant_a.pk) == 40 * KIB


@pytest.mark.django_db
def test_the_recount_reproduces_each_mailboxs_charges(
    share, new_draft, tenant_a, local_mailbox, other_mailbox
):
    new_draft(attachments=[_file("a"), _file("b")])
    new_draft(mailbox=other_mailbox, attachments=[_file("a")])
    # As a process of the release before the shares left it: no charge, no total.
    AttachmentCharge.objects.filter(mailbox=other_mailbox).delete()
    MailboxAttachmentStorage.objects.filter(mailbox=other_mailbox).delete()
    MailboxAttachmentStorage.objects.filter(mailbox=local_mailbox).update(bytes_used=3)
    out = io.StringIO()

    call_command("attachment_storage_recount", stdout=out)
    first = (mailbox_used_bytes(local_mailbox.pk), mailbox_used_bytes(other_mailbox.pk))
    again = io.StringIO()
    call_command("attachment_storage_recount", stdout=again)

    assert first == (80 * KIB, 40 * KIB)
    assert f"{local_mailbox.address}: 3 -> {80 * KIB} bytes" in out.getvalue()
    assert f"{other_mailbox.address}: 0 -> {40 * KIB} bytes" in out.getvalue()
    assert local_mailbox.address not in again.getvalue()
    assert other_mailbox.address not in again.getvalue()
    assert AttachmentCharge.objects.filter(tenant=tenant_a).count() == 3
    audit = AuditEvent.objects.filter(action="mailbox.storage_recounted").order_by("pk")
    assert list(audit.values_list("object_id", "data")) == [
        (
            str(local_mailbox.pk),
            {
                "before": {"attachment_storage_used": 3},
                "after": {"attachment_storage_used": 80 * KIB},
            },
        ),
        (
            str(other_mailbox.pk),
            {
                "before": {"attachment_storage_used": 0},
                "after": {"attachment_storage_used": 40 * KIB},
            },
        ),
    ]


@pytest.mark.django_db
def test_the_migrations_backfill_charges_what_the_running_code_did(
    share, new_draft, tenant_a, local_mailbox, other_mailbox
):
    """intents.0034 on a database the release before filled: each mailbox is charged the files
    its drafts still need, and its total is their sizes."""
    backfill = importlib.import_module("intents.migrations.0034_mailbox_attachment_storage")
    new_draft(attachments=[_file("a"), _file("b")])
    new_draft(mailbox=other_mailbox, attachments=[_file("a")])
    charged = sorted(AttachmentCharge.objects.values_list("mailbox_id", "blob_id"))
    totals = sorted(MailboxAttachmentStorage.objects.values_list("mailbox_id", "bytes_used"))
    AttachmentCharge.objects.all().delete()
    MailboxAttachmentStorage.objects.all().delete()

    with connection.cursor() as cursor:
        cursor.execute(backfill.BACKFILL)

    assert sorted(AttachmentCharge.objects.values_list("mailbox_id", "blob_id")) == charged
    assert (
        sorted(MailboxAttachmentStorage.objects.values_list("mailbox_id", "bytes_used")) == totals
    )
    assert totals == [(local_mailbox.pk, 80 * KIB), (other_mailbox.pk, 40 * KIB)]
