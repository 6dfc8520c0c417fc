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
from intents.attachments import CleanUpload, Upload, clean_uploads, saveable_name
from intents.blobs import blob_store
from intents.models import AttachmentBlob, DraftAttachment, DraftVersion
from intents.services.content import answered_message
from intents.services.storage import storage_charge
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
    source_message_id: str = ""
    source_sender: str = ""


def planned_uploads(uploads: Iterable[Upload]) -> list[Planned]:
    """New files, checked (``clean_uploads`` refuses with a 422 naming the file)."""
    return [_from_clean(item) for item in clean_uploads(uploads)]


def _from_clean(item: CleanUpload) -> Planned:
    return Planned(
        item.filename,
        item.content_type,
        item.sha256,
        item.size,
        data=item.data,
        source_message_id=item.source_message_id,
        source_sender=item.source_sender,
    )


def planned_copy(version: DraftVersion | None) -> list[Planned]:
    """The files of ``version``, unchanged (a revision that leaves its attachments alone)."""
    if version is None:
        return []
    return [
        Planned(
            a.filename,
            a.content_type,
            a.sha256,
            a.size,
            blob_id=a.blob_id,
            source_message_id=a.source_message_id,
            source_sender=a.source_sender,
        )
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
    version's transaction). Bytes the tenant did not hold yet count against its storage quota,
    files the draft's mailbox did not hold yet against the mailbox's share of it: past either,
    ``StorageQuotaExceeded`` (``MailboxStorageQuotaExceeded``) and the transaction writes
    nothing."""
    if not files:
        return
    _hold_kept_blobs([item.blob_id for item in files if item.blob_id is not None])
    store = blob_store()
    # Each put locks its blob's row until the version commits (a new row, or a held one: ON
    # CONFLICT DO UPDATE locks it). In the order the files were given, two drafts attaching the
    # same two files in opposite orders each waited for the other's second one: a deadlock, and
    # one of them failed. In digest order every version takes them in one order.
    blob_ids: dict[str, int] = {}
    added = 0
    found: dict[int, int] = {}  # blob id -> size: bytes the tenant held already
    for item in sorted(files, key=lambda f: f.sha256):
        if item.blob_id is None and item.sha256 not in blob_ids:
            assert item.data is not None
            stored = store.put(tenant_id=tenant.pk, data=item.data)
            blob_ids[item.sha256] = stored.blob.pk
            if stored.new_bytes:
                added += stored.blob.size
            else:
                found[stored.blob.pk] = stored.blob.size
    rows = []
    for position, item in enumerate(files):
        blob_id = item.blob_id if item.blob_id is not None else blob_ids[item.sha256]
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
                source_message_id=item.source_message_id,
                source_sender=item.source_sender,
            )
        )
    storage_charge(
        tenant_id=tenant.pk,
        added=added,
        held_elsewhere=_held_only_elsewhere(version.draft.mailbox_id, found),
        mailbox=version.draft.mailbox,
        blob_sizes={row.blob_id: row.size for row in rows},
    )
    DraftAttachment.objects.bulk_create(rows)


def _held_only_elsewhere(mailbox_id: int, found: dict[int, int]) -> int:
    """The bytes of the blobs in ``found`` (id -> size) that no draft of this mailbox names:
    the tenant holds them for other mailboxes only (``storage_charge``, ``held_elsewhere``)."""
    if not found:
        return 0
    here = set(
        DraftAttachment.objects.filter(
            blob_id__in=list(found), version__draft__mailbox_id=mailbox_id
        )
        .values_list("blob_id", flat=True)
        .distinct()
    )
    return sum(size for blob_id, size in found.items() if blob_id not in here)


def forwarded_uploads(
    *, tenant, mailbox, in_reply_to: str, attachment_ids: Sequence[str], uploaded: int = 0
):
    """The files of the customer's message a draft answers, fetched from AgentMail, to send back
    with the reply: ``attachment_ids`` name them (``attachments[].attachment_id`` of the Message).

    A network call: call it outside any transaction, before the draft service that stores them
    (which checks them like uploaded files). Only a message this mailbox received can be
    forwarded from, and only with the mailbox's own key. The draft's limits on files and bytes
    hold before and during the fetches (``uploaded``: the files the request uploads beside
    these): checked only afterwards, a request naming a hundred of the customer's files fetched
    them all first, holding a web or MCP thread (shared by every tenant) and the bytes.

    Each file names the message it came from and that message's sender: the version's rows
    keep them, for the draft page ("from Ben's message of 3 Dec") and for the approval from a
    list, which leaves out a reply that would send them to someone else.
    """
    ids = list(attachment_ids or ())
    if not ids:
        return []
    _check_forward_request(ids, in_reply_to, uploaded)
    source = answered_message(tenant=tenant, mailbox=mailbox, in_reply_to=in_reply_to, thread_id="")
    api_key = mailbox.api_key()
    budget = int(settings.ATTACHMENT_MAX_DRAFT_BYTES)
    files = []
    # All the fetches within one call's time (two calls a file): each one alone may take that
    # long, and ten files took ten times it, past the web server's own timeout, which cut the
    # request off with no answer at all.
    with provider.calls_within(provider.call_seconds()):
        for index, attachment_id in enumerate(ids):
            received = _fetch_forwarded(
                mailbox,
                api_key,
                in_reply_to,
                index=index,
                attachment_id=attachment_id,
                budget=budget,
            )
            budget -= len(received.content)
            files.append(
                Upload(
                    saveable_name(received.filename),
                    received.content_type,
                    received.content,
                    source_message_id=source.message_id,
                    source_sender=source.sender,
                    # A refusal of its name or content names the id the agent asked for.
                    field=f"forward_attachments[{index}]",
                )
            )
    return files


def _check_forward_request(ids: list[str], in_reply_to: str, uploaded: int) -> None:
    """Refuse, before any network call, what no fetch could make acceptable."""
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
    most = int(settings.ATTACHMENT_MAX_FILES)
    if len(ids) + uploaded > most:
        raise errors.InvalidInput(
            "too_many_attachments",
            f"A draft may carry at most {most} attachments; this one has {len(ids) + uploaded}.",
            field=field,
        )


def _fetch_forwarded(
    mailbox, api_key: str, in_reply_to: str, *, index: int, attachment_id: str, budget: int
) -> provider.ReceivedAttachment:
    """One file of the answered message, refused as it streams in once it passes the limit per
    file or what is left of the draft's (``budget`` bytes)."""
    field = f"forward_attachments[{index}]"
    per_file = int(settings.ATTACHMENT_MAX_FILE_BYTES)
    try:
        return provider.fetch_attachment(
            api_key=api_key,
            inbox_id=mailbox.inbox_id,
            message_id=in_reply_to,
            attachment_id=attachment_id,
            max_bytes=max(0, min(per_file, budget)),
        )
    except provider.ProviderError as exc:
        if exc.status == 404:
            raise errors.InvalidInput(
                "forward_attachment_unknown",
                f"{field}: {attachment_id!r} is not an attachment of {in_reply_to}.",
                field,
            ) from None
        if exc.code == "too_large" and budget < per_file:
            raise errors.InvalidInput(
                "attachments_too_large",
                f"{field}: with {attachment_id!r} the files pass the limit of "
                f"{settings.ATTACHMENT_MAX_DRAFT_BYTES} bytes per draft.",
                field,
            ) from None
        if exc.code == "too_large":
            raise errors.InvalidInput(
                "attachment_too_large",
                f"{field}: {attachment_id!r} is larger than {per_file} bytes, the limit per file.",
                field,
            ) from None
        log.warning(
            "intents.attachment.forward_failed",
            extra={"mailbox_id": mailbox.pk, "code": exc.code, "status": exc.status},
        )
        raise errors.ProviderUnavailable(
            message=f"AgentMail did not hand over attachment {attachment_id!r}; retry later.",
            field=field,
        ) from None
