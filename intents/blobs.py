"""Where attachment bytes live: the blob store named by ``settings.ATTACHMENT_BLOB_STORE``.

The default keeps them in PostgreSQL (``AttachmentBlob.data``, bytea): one database to back up,
and the bytes commit in the same transaction as the version that names them. Another store (an
object store, say) implements the same two methods; it must write before the version's
transaction and be content-addressed, so that a write repeated after a crash is harmless, and
say whether the call stored bytes the tenant did not hold (``Stored.new_bytes``): the tenant's
storage quota counts those (``intents.services.storage``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from django.conf import settings
from django.db import connection
from django.utils.module_loading import import_string

from config.env import SettingsError
from intents.models import AttachmentBlob


class BlobPurged(Exception):
    """The blob's bytes were dropped by retention (``AttachmentBlob.data_purged_at``)."""


def preview_cache_key(tenant_id: int, sha256: str) -> str:
    """Where the review UI caches a rendering of a blob (a PDF's first page): retention deletes
    it with the bytes."""
    return f"review.pdf_preview:{tenant_id}:{sha256}"


# Insert the blob, or, if the tenant has it already, lock its row and refill bytes that retention
# dropped. ON CONFLICT DO UPDATE locks the conflicting row even when its WHERE is false, so a
# purge running at the same moment waits for this transaction, which names the blob, to end
# (intents.retention.attachment_bytes_purge).
_PUT = """
INSERT INTO {table} AS blob (tenant_id, sha256, size, data, created_at)
VALUES (%s, %s, %s, %s, now())
ON CONFLICT (tenant_id, sha256) DO UPDATE
   SET data = EXCLUDED.data, data_purged_at = NULL
 WHERE blob.data_purged_at IS NOT NULL
RETURNING blob.id
"""


@dataclass(frozen=True)
class Stored:
    """The tenant's blob for some bytes, and whether this put stored them (a new blob, or one
    whose bytes retention had dropped) rather than finding them held already."""

    blob: AttachmentBlob
    new_bytes: bool


class BlobStore(Protocol):
    def put(self, *, tenant_id: int, data: bytes) -> Stored: ...

    def read(self, blob: AttachmentBlob) -> bytes: ...


class DatabaseBlobStore:
    """Bytes in ``AttachmentBlob.data``; one row per tenant and SHA-256 (call in a transaction).
    Two drafts storing the same file at once share one row. The statement returns the row only
    when it wrote the bytes: a conflict whose WHERE is false updates, and returns, nothing."""

    def put(self, *, tenant_id: int, data: bytes) -> Stored:
        digest = hashlib.sha256(data).hexdigest()
        with connection.cursor() as cursor:
            cursor.execute(
                _PUT.format(table=connection.ops.quote_name(AttachmentBlob._meta.db_table)),
                [tenant_id, digest, len(data), data],
            )
            wrote = cursor.fetchone() is not None
        return Stored(AttachmentBlob.objects.get(tenant_id=tenant_id, sha256=digest), wrote)

    def read(self, blob: AttachmentBlob) -> bytes:
        if blob.data_purged_at is not None or blob.data is None:
            raise BlobPurged(blob.pk)
        return bytes(blob.data)


@cache
def blob_store_class() -> type:
    """The blob store class ATTACHMENT_BLOB_STORE names, resolved as every process starts (the
    intents app's ready): it was imported at the first attachment, so a misspelt one started
    (gunicorn runs no system checks) and made every draft with a file, and every send of one,
    a 500."""
    path = settings.ATTACHMENT_BLOB_STORE
    try:
        store = import_string(path)
    except ImportError:
        store = None
    if not (
        isinstance(store, type)
        and callable(getattr(store, "put", None))
        and callable(getattr(store, "read", None))
    ):
        raise SettingsError(
            "ATTACHMENT_BLOB_STORE must be the dotted path of a class with put and read, like "
            f"intents.blobs.DatabaseBlobStore, got {path!r}"
        )
    return store


@cache
def blob_store() -> BlobStore:
    return blob_store_class()()
