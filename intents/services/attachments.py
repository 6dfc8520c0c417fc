"""The attachments a new draft version carries: checked uploads, or the previous version's files
kept as they are; stored by reference (a blob per tenant and SHA-256) in the version's
transaction. The content hash covers each file's name, type and digest (intents/hashing.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.utils.translation import gettext as _

from intents import errors
from intents.attachments import CleanUpload, Upload, clean_uploads
from intents.blobs import blob_store
from intents.models import AttachmentBlob, DraftAttachment, DraftVersion
from intents.services.content import answered_message
from mailboxes import provider

log = logging.getLogger("intents.services")


@dataclass(frozen=True)
class Planned:
    """One file a version about to be written will carry: new bytes, or a stored blob."""

    filename: str
    content_type: str
    sha256: str
    size: int
    data: bytes | None = None
    blob_id: int | None = None


def planned_uploads(uploads: Iterable[Upload]) -> list[Planned]:
    """New files, checked (``clean_uploads`` refuses with a 422 naming the file)."""
    return [_from_clean(item) for item in clean_uploads(uploads)]


def _from_clean(item: CleanUpload) -> Planned:
    return Planned(item.filename, item.content_type, item.sha256, item.size, data=item.data)


def planned_copy(version: DraftVersion | None) -> list[Planned]:
    """The files of ``version``, unchanged (a revision that leaves its attachments alone)."""
    if version is None:
        return []
    return [
        Planned(a.filename, a.content_type, a.sha256, a.size, blob_id=a.blob_id)
        for a in version.attachments.all()
    ]


def planned(uploads: Sequence[Upload] | None, keep_from: DraftVersion | None) -> list[Planned]:
    """``uploads`` when given (an empty list removes every file), else ``keep_from``'s files."""
    if uploads is None:
        return planned_copy(keep_from)
    return planned_uploads(uploads)


def hash_entries(files: Iterable[Planned]) -> list[tuple[str, str, str]]:
    return [(f.filename, f.content_type, f.sha256) for f in files]


def _hold_kept_blobs(blob_ids: list[int]) -> None:
    """A kept file names a stored blob without writing it: share-lock those rows until the
    version commits, so a retention purge (which locks them for update, then looks for versions
    naming them) waits and sees this one; refuse if a purge already dropped the bytes. (The
    foreign keys' own checks lock them only at commit: they are deferred.)"""
    if not blob_ids:
        return
    table = connection.ops.quote_name(AttachmentBlob._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FILTER (WHERE data_purged_at IS NOT NULL) FROM "  # noqa: S608
            f"(SELECT data_purged_at FROM {table} WHERE id = ANY(%s) FOR SHARE) AS kept",
            [sorted(set(blob_ids))],
        )
        (purged,) = cursor.fetchone()
    if purged:
        raise errors.DraftError(
            "body_purged",
            _("The files were deleted at the end of the retention period; they cannot be sent."),
        )


def attach(tenant, version: DraftVersion, files: Sequence[Planned]) -> None:
    """Store the files' bytes (once per tenant and digest) and the version's rows (call in the
    version's transaction)."""
    if not files:
        return
    _hold_kept_blobs([item.blob_id for item in files if item.blob_id is not None])
    store = blob_store()
    rows = []
    for position, item in enumerate(files):
        blob_id = item.blob_id
        if blob_id is None:
            assert item.data is not None
            blob_id = store.put(tenant_id=tenant.pk, data=item.data).pk
        rows.append(
            DraftAttachment(
                version=version,
                tenant=tenant,
                position=position,
                filename=item.filename,
                content_type=item.content_type,
                size=item.size,
                sha256=item.sha256,
                blob_id=blob_id,
            )
        )
    DraftAttachment.objects.bulk_create(rows)


def forwarded_uploads(*, tenant, mailbox, in_reply_to: str, attachment_ids: Sequence[str]):
    """The files of the customer's message a draft answers, fetched from AgentMail, to send back
    with the reply: ``attachment_ids`` name them (``attachments[].attachment_id`` of the Message).

    A network call: call it outside any transaction, before the draft service that stores them
    (which checks them like uploaded files). Only a message this mailbox received can be
    forwarded from, and only with the mailbox's own key.
    """
    ids = list(attachment_ids or ())
    if not ids:
        return []
    field = "forward_attachments"
    if not in_reply_to:
        raise errors.InvalidInput(
            "forward_needs_reply",
            "forward_attachments needs in_reply_to: files are forwarded from the message the "
            "draft answers.",
            field,
        )
    if len(set(ids)) != len(ids):
        raise errors.InvalidInput(
            "forward_duplicate", "forward_attachments names a file twice.", field
        )
    answered_message(tenant=tenant, mailbox=mailbox, in_reply_to=in_reply_to, thread_id="")
    api_key = mailbox.api_key()
    files = []
    for index, attachment_id in enumerate(ids):
        try:
            received = provider.fetch_attachment(
                api_key=api_key,
                inbox_id=mailbox.inbox_id,
                message_id=in_reply_to,
                attachment_id=attachment_id,
                max_bytes=int(settings.ATTACHMENT_MAX_FILE_BYTES),
            )
        except provider.ProviderError as exc:
            if exc.status == 404:
                raise errors.InvalidInput(
                    "forward_attachment_unknown",
                    f"forward_attachments[{index}]: {attachment_id!r} is not an attachment of "
                    f"{in_reply_to}.",
                    f"{field}[{index}]",
                ) from None
            if exc.code == "too_large":
                raise errors.InvalidInput(
                    "attachment_too_large",
                    f"forward_attachments[{index}]: {attachment_id!r} is larger than "
                    f"{settings.ATTACHMENT_MAX_FILE_BYTES} bytes, the limit per file.",
                    f"{field}[{index}]",
                ) from None
            log.warning(
                "intents.attachment.forward_failed",
                extra={"mailbox_id": mailbox.pk, "code": exc.code, "status": exc.status},
            )
            raise errors.ProviderUnavailable(
                message=f"AgentMail did not hand over attachment {attachment_id!r}; retry later.",
                field=f"{field}[{index}]",
            ) from None
        files.append(Upload(received.filename, received.content_type, received.content))
    return files
