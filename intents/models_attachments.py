"""Attachments of draft versions: content-addressed blobs and the per-version rows that name them.
intents.models re-exports both.

A blob is stored once per tenant and SHA-256 (two drafts attaching the same invoice share it);
per tenant, not globally, so that retention and deletion of one tenant never touch another's
bytes. The bytes live in ``data`` with the database backend (``ATTACHMENT_BLOB_STORE``, the
default); another backend keeps them elsewhere and leaves ``data`` null. The job queue never
carries them: the worker reads them by reference when it sends.

Retention (``intents.retention.attachment_bytes_purge``) drops a blob's bytes once every version
naming it has had its body purged, and stamps ``data_purged_at``; the row stays, with its size and
digest (what the audit record and the content hashes cite). A later draft attaching the same bytes
stores them again (``DatabaseBlobStore.put``).

``AttachmentStorage`` is the tenant's total of stored bytes, held against its quota
(``TENANT_ATTACHMENT_STORAGE_BYTES``, ``intents.services.storage``).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class AttachmentBlob(models.Model):
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    sha256 = models.CharField(max_length=64)
    size = models.PositiveIntegerField()
    data = models.BinaryField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    data_purged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "sha256"], name="attachmentblob_unique"),
            models.CheckConstraint(
                condition=Q(sha256__regex=r"^[0-9a-f]{64}$"), name="attachmentblob_sha256_hex"
            ),
        ]

    def __str__(self) -> str:
        return f"Blob {self.sha256[:12]} ({self.size} bytes)"


class DraftAttachment(models.Model):
    """One file of one immutable DraftVersion: what the content hash covers (name, type, digest)."""

    version = models.ForeignKey(
        "intents.DraftVersion", on_delete=models.CASCADE, related_name="attachments"
    )
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    position = models.PositiveSmallIntegerField()
    filename = models.CharField(max_length=255)
    content_type = models.CharField(max_length=255)
    size = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    blob = models.ForeignKey(AttachmentBlob, on_delete=models.PROTECT, related_name="+")
    # A file forwarded from a customer's message: that message's provider id and its sender as
    # recorded (``InboundMessage.sender``); empty for a file the agent or a person uploaded. Not
    # in the content hash: it changes nothing that is sent, and a version's rows never change
    # (the hash names the version). The draft page says whose file it is, and a list's approval
    # leaves out a reply that sends it to someone else (``intents.policy.files_of_others``).
    source_message_id = models.CharField(max_length=998, blank=True, default="")
    source_sender = models.CharField(max_length=320, blank=True, default="")

    class Meta:
        ordering = ["version_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "position"], name="draftattachment_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.filename} ({self.content_type}, {self.size} bytes)"


class AttachmentStorage(models.Model):
    """The attachment bytes a tenant holds: the ``size`` of each of its blobs that still has its
    bytes (``data_purged_at`` null), once per blob however many versions name it. Added to in the
    transaction that stores a blob's bytes (a guarded UPDATE against the quota), taken from in
    the one where retention drops them (``intents.services.storage``); a tenant that never
    stored a file has no row (0)."""

    tenant = models.OneToOneField(
        "tenants.Tenant", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    bytes_used = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(bytes_used__gte=0), name="attachmentstorage_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"Attachment storage of tenant {self.tenant_id}: {self.bytes_used} bytes"


class AttachmentCharge(models.Model):
    """A blob's bytes charged to one mailbox's share of the tenant's quota
    (``MAILBOX_ATTACHMENT_STORAGE_SHARE``): written, once per mailbox and blob, by the version
    that first names the blob in one of the mailbox's drafts since its bytes were stored;
    deleted with the bytes (retention). A blob several mailboxes name is charged to each of
    them (and once to the tenant): each share bounds what one mailbox makes the tenant hold,
    and a mailbox's use never depends on what the mailboxes it cannot read hold. The unique
    pair is what keeps two versions naming the blob at once from charging it twice."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    # Each charge writes every index of the table: the unique pair serves the mailbox's
    # lookups and the named index the blob's, so neither key has an index of its own.
    mailbox = models.ForeignKey(
        "mailboxes.Mailbox", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    blob = models.ForeignKey(
        AttachmentBlob, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["mailbox", "blob"], name="attachmentcharge_unique_per_mailbox"
            ),
        ]
        indexes = [models.Index(fields=["blob"], name="attachmentcharge_blob")]

    def __str__(self) -> str:
        return f"Blob {self.blob_id} charged to mailbox {self.mailbox_id}"


class MailboxAttachmentStorage(models.Model):
    """The attachment bytes charged to one mailbox (the sizes of its ``AttachmentCharge`` rows),
    held against its share of the tenant's quota by a guarded UPDATE in the version's
    transaction; a mailbox that never stored a file has no row (0)."""

    mailbox = models.OneToOneField(
        "mailboxes.Mailbox", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    bytes_used = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(bytes_used__gte=0), name="mailboxattachmentstorage_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"Attachment storage of mailbox {self.mailbox_id}: {self.bytes_used} bytes"
