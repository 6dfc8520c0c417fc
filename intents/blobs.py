"""Where attachment bytes live: the blob store named by ``settings.ATTACHMENT_BLOB_STORE``.

The default keeps them in PostgreSQL (``AttachmentBlob.data``, bytea): one database to back up,
and the bytes commit in the same transaction as the version that names them. Another store (an
object store, say) implements the same two methods; it must write before the version's
transaction and be content-addressed, so that a write repeated after a crash is harmless.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from intents.models import AttachmentBlob


class BlobStore(Protocol):
    def put(self, *, tenant_id: int, data: bytes) -> AttachmentBlob: ...

    def read(self, blob: AttachmentBlob) -> bytes: ...


class DatabaseBlobStore:
    """Bytes in ``AttachmentBlob.data``; one row per tenant and SHA-256 (call in a transaction)."""

    def put(self, *, tenant_id: int, data: bytes) -> AttachmentBlob:
        digest = hashlib.sha256(data).hexdigest()
        # ON CONFLICT DO NOTHING: two drafts storing the same file at once share one row.
        AttachmentBlob.objects.bulk_create(
            [AttachmentBlob(tenant_id=tenant_id, sha256=digest, size=len(data), data=data)],
            ignore_conflicts=True,
        )
        return AttachmentBlob.objects.get(tenant_id=tenant_id, sha256=digest)

    def read(self, blob: AttachmentBlob) -> bytes:
        return bytes(blob.data) if blob.data is not None else b""


@cache
def blob_store() -> BlobStore:
    return import_string(settings.ATTACHMENT_BLOB_STORE)()
