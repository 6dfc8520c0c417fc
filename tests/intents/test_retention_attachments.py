"""Retention reaches attachments: a blob's bytes go once every version naming it has had its body
purged; the names, sizes and digests stay. A draft attaching the same bytes at the same moment
either keeps them from going or stores them again (tests of the lock both ways)."""

from __future__ import annotations

import hashlib
import threading
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connections, transaction
from django.urls import reverse
from django.utils import timezone

from intents import errors, services, tasks
from intents.attachments import Upload
from intents.blobs import BlobPurged, blob_store, preview_cache_key
from intents.models import (
    AttachmentBlob,
    AttachmentStorage,
    Draft,
    DraftAttachment,
    DraftVersion,
    IntentEvent,
)
from intents.retention import attachment_bytes_purge, draft_bodies_purge
from intents.selectors.storage import used_bytes
from intents.services.attachments import Planned, attach
from tests.intents.helpers import blocked_on_a_lock

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f"
    b"\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d"
    b"\x00\x00\x00\x00IEND\xaeB`\x82"
)
INVOICE = b"%PDF-1.4\n% an invoice, not a real one\n" + bytes(range(256)) * 4


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def rejected(tenant_a, member_of, mailbox_factory):
    """rejected(files, days) -> a draft carrying those files, rejected ``days`` ago."""
    person = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)

    def make(files, *, days: int) -> Draft:
        draft = services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["c@example.com"],
            subject="Re: invoice",
            text="private body",
            actor_user=person,
            attachments=[Upload(name, kind, data) for name, kind, data in files],
        )
        services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="no", actor=person)
        age(draft, days)
        return draft

    return make


@pytest.fixture
def again(tenant_a, member_of, mailbox_factory):
    """again() -> a new pending draft attaching the invoice's bytes once more."""
    person = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)

    def make() -> Draft:
        return services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["c@example.com"],
            subject="Re: invoice",
            text="again",
            actor_user=person,
            attachments=[Upload("again.pdf", "application/pdf", INVOICE)],
        )

    return make


def age(draft: Draft, days: int) -> None:
    Draft.objects.filter(pk=draft.pk).update(updated_at=timezone.now() - timedelta(days=days))


def blob(tenant, data: bytes) -> AttachmentBlob:
    return AttachmentBlob.objects.get(tenant=tenant, sha256=_sha(data))


def purged_journal(draft: Draft) -> int:
    return IntentEvent.objects.filter(
        draft=draft, action="draft.attachment_bytes_purged", actor_kind="sweep"
    ).count()


@pytest.mark.django_db
def test_bytes_go_when_the_last_version_naming_them_is_purged(rejected, tenant_a):
    old = rejected([("a.pdf", "application/pdf", INVOICE), ("l.png", "image/png", PNG)], days=91)
    fresh = rejected([("b.pdf", "application/pdf", INVOICE)], days=10)
    cache.set(preview_cache_key(tenant_a.pk, _sha(PNG)), b"rendered")
    cache.set(preview_cache_key(tenant_a.pk, _sha(INVOICE)), b"rendered")

    assert draft_bodies_purge() == 1
    assert attachment_bytes_purge() == 1  # the PNG; the invoice is still the fresh draft's

    png, invoice = blob(tenant_a, PNG), blob(tenant_a, INVOICE)
    assert png.data is None and png.data_purged_at is not None
    assert (png.size, png.sha256) == (len(PNG), _sha(PNG))
    assert bytes(invoice.data) == INVOICE and invoice.data_purged_at is None
    assert cache.get(preview_cache_key(tenant_a.pk, _sha(PNG))) is None
    assert cache.get(preview_cache_key(tenant_a.pk, _sha(INVOICE))) == b"rendered"
    assert DraftAttachment.objects.filter(version__draft=old).count() == 2
    assert (purged_journal(old), purged_journal(fresh)) == (1, 0)

    age(fresh, 91)
    assert draft_bodies_purge() == 1
    assert attachment_bytes_purge() == 1
    assert attachment_bytes_purge() == 0

    assert blob(tenant_a, INVOICE).data is None
    assert (purged_journal(old), purged_journal(fresh)) == (2, 1)
    with pytest.raises(BlobPurged):
        blob_store().read(blob(tenant_a, INVOICE))


@pytest.mark.django_db
def test_the_daily_job_purges_the_bytes_and_a_later_draft_stores_them_again(
    rejected, again, tenant_a, member_of, signed_in
):
    old = rejected([("a.pdf", "application/pdf", INVOICE)], days=91)
    tasks.retention_purge()
    assert blob(tenant_a, INVOICE).data_purged_at is not None

    later = again()

    stored = blob(tenant_a, INVOICE)
    assert bytes(stored.data) == INVOICE and stored.data_purged_at is None
    viewer = signed_in(member_of(tenant_a, "viewer").user)
    old_file = DraftAttachment.objects.get(version__draft=old)
    new_file = DraftAttachment.objects.get(version__draft=later)
    assert old_file.blob_id == new_file.blob_id
    gone = viewer.get(reverse("attachment_download", args=[tenant_a.slug, old.pk, old_file.pk]))
    preview = viewer.get(reverse("attachment_preview", args=[tenant_a.slug, old.pk, old_file.pk]))
    kept = viewer.get(reverse("attachment_download", args=[tenant_a.slug, later.pk, new_file.pk]))
    page = viewer.get(reverse("draft", args=[tenant_a.slug, old.pk])).content.decode()
    # The old draft's file stays gone although the same bytes are stored again for another one.
    assert (gone.status_code, preview.status_code) == (410, 410)
    assert b"retention period" in gone.content
    assert gone["Content-Security-Policy"].startswith("sandbox")
    assert kept.status_code == 200 and kept.content == INVOICE
    assert "deleted with the body" in page
    assert reverse("attachment_download", args=[tenant_a.slug, old.pk, old_file.pk]) not in page


@pytest.mark.django_db
def test_bytes_retention_drops_no_longer_count_against_the_storage_quota(
    rejected, again, tenant_a, settings
):
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = 2 * len(INVOICE) + len(PNG)
    settings.MAILBOX_ATTACHMENT_STORAGE_SHARE = 1
    rejected([("a.pdf", "application/pdf", INVOICE), ("l.png", "image/png", PNG)], days=91)
    with pytest.raises(errors.StorageQuotaExceeded):
        rejected([("b.pdf", "application/pdf", INVOICE + b"% page 2\n")], days=1)
    assert used_bytes(tenant_a.pk) == len(INVOICE) + len(PNG)

    tasks.retention_purge()
    assert used_bytes(tenant_a.pk) == 0

    rejected([("b.pdf", "application/pdf", INVOICE + b"% page 2\n")], days=1)
    again()  # the purged invoice's bytes, stored again, count again
    assert used_bytes(tenant_a.pk) == 2 * len(INVOICE) + len(b"% page 2\n")


@pytest.mark.django_db
def test_the_purge_never_takes_a_total_below_zero(rejected, tenant_a):
    """Files an older release stored were never counted: retention still runs."""
    rejected([("a.pdf", "application/pdf", INVOICE)], days=91)
    AttachmentStorage.objects.filter(tenant=tenant_a).update(bytes_used=10)

    tasks.retention_purge()

    assert blob(tenant_a, INVOICE).data_purged_at is not None
    assert used_bytes(tenant_a.pk) == 0


@pytest.mark.django_db
def test_a_kept_file_whose_bytes_were_purged_is_refused(rejected, tenant_a):
    old = rejected([("a.pdf", "application/pdf", INVOICE)], days=91)
    tasks.retention_purge()
    version = DraftVersion.objects.get(draft=rejected([], days=1))
    kept = Planned(
        "a.pdf", "application/pdf", _sha(INVOICE), len(INVOICE), blob_id=blob(tenant_a, INVOICE).pk
    )

    with pytest.raises(errors.DraftError) as refused, transaction.atomic():
        attach(tenant_a, version, [kept])

    assert refused.value.code == "body_purged"
    assert DraftAttachment.objects.filter(version=version).count() == 0
    assert DraftAttachment.objects.filter(version__draft=old).count() == 1


def _in_thread(fn, results: list) -> threading.Thread:
    def run() -> None:
        try:
            results.append(fn())
        except BaseException as exc:
            results.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_purge_waits_for_a_draft_storing_the_same_bytes_and_keeps_them(rejected, again, tenant_a):
    rejected([("a.pdf", "application/pdf", INVOICE)], days=91)
    draft_bodies_purge()
    results: list = []

    with transaction.atomic():
        again()
        purge = _in_thread(attachment_bytes_purge, results)
        assert blocked_on_a_lock(), "the purge never waited for the draft naming the blob"
    purge.join(30)

    assert results == [0]
    stored = blob(tenant_a, INVOICE)
    assert bytes(stored.data) == INVOICE and stored.data_purged_at is None
    assert used_bytes(tenant_a.pk) == len(INVOICE)  # counted once, never taken off


@pytest.mark.django_db(transaction=True)
def test_a_draft_storing_bytes_a_purge_holds_stores_them_again(rejected, again, tenant_a):
    rejected([("a.pdf", "application/pdf", INVOICE)], days=91)
    draft_bodies_purge()
    results: list = []

    with transaction.atomic():
        assert attachment_bytes_purge() == 1
        writer = _in_thread(again, results)
        assert blocked_on_a_lock(), "the draft never waited for the purge holding the blob"
    writer.join(30)

    assert isinstance(results[0], Draft)
    stored = blob(tenant_a, INVOICE)
    assert bytes(stored.data) == INVOICE and stored.data_purged_at is None
    assert used_bytes(tenant_a.pk) == len(INVOICE)  # taken off by the purge, counted again


@pytest.mark.django_db(transaction=True)
def test_a_purge_waits_for_a_version_keeping_the_file_and_keeps_the_bytes(
    rejected, tenant_a, member_of
):
    """A version that keeps its predecessor's files writes no blob; its lock on them is what
    makes a purge at the same moment wait and then see it."""
    old = rejected([("a.pdf", "application/pdf", INVOICE)], days=91)
    draft_bodies_purge()
    version = DraftVersion.objects.get(draft=rejected([], days=1))
    kept = Planned(
        "a.pdf", "application/pdf", _sha(INVOICE), len(INVOICE), blob_id=blob(tenant_a, INVOICE).pk
    )
    results: list = []

    with transaction.atomic():
        attach(tenant_a, version, [kept])
        purge = _in_thread(attachment_bytes_purge, results)
        assert blocked_on_a_lock(), "the purge never waited for the version keeping the file"
    purge.join(30)

    assert results == [0]
    assert bytes(blob(tenant_a, INVOICE).data) == INVOICE
    assert DraftAttachment.objects.filter(version__draft=old).count() == 1
