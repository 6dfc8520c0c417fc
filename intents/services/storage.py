"""The tenant's attachment storage against its quota (its own, when an operator set one, else
``TENANT_ATTACHMENT_STORAGE_BYTES``: ``intents.selectors.storage.storage_quota``).

What counts: the bytes a tenant holds, each blob once (a blob is per tenant and SHA-256, so an
invoice that twenty drafts attach costs its size once, and a version that keeps its files costs
nothing), from the transaction that stores them until retention drops them. A file whose bytes
retention dropped counts again when a draft stores it again.

The total is one row per tenant (``AttachmentStorage``), written only here: added to in the
version's transaction, by a guarded UPDATE that refuses to pass the quota, so two drafts stored
at once cannot both slip past it (the second waits for the first's row lock, then sees its
total); taken from in retention's transaction. Both come last among the locks of their
transaction (the blobs' rows before it; new rows and the journal after), so the row is held
for the rest of one short transaction and no two of them wait on each other in a cycle through
it. Only a version with new bytes takes it. The journal rows of those transactions
(``draft.created``, ``draft.version_added`` with the files' sizes,
``draft.attachment_bytes_purged``) record why the total moved.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from django.db import connection, transaction
from django.db.models import F, Sum, Value
from django.db.models.functions import Greatest

from intents import errors
from intents.models import AttachmentBlob, AttachmentStorage
from intents.selectors.storage import storage_quota, used_bytes
from tenants.onboarding import operator_storage_recounted

log = logging.getLogger("intents.services")

# Insert the tenant's row or add to it, only while the total stays within the quota. A refusal
# returns no row; when the row is there, ON CONFLICT DO UPDATE waited for its lock and read the
# total other transactions committed meanwhile (READ COMMITTED), so the check is exact.
_CHARGE = """
INSERT INTO {table} AS storage (tenant_id, bytes_used)
SELECT %(tenant)s, %(added)s WHERE %(checked)s <= %(quota)s
ON CONFLICT (tenant_id) DO UPDATE SET bytes_used = storage.bytes_used + EXCLUDED.bytes_used
 WHERE storage.bytes_used + %(checked)s <= %(quota)s
RETURNING storage.bytes_used
"""


def storage_charge(*, tenant_id: int, added: int, held_elsewhere: int = 0) -> None:
    """Count ``added`` bytes the version's transaction stored for the tenant (call in it, after
    the blobs are written); refuse (``StorageQuotaExceeded``, the transaction then rolls back
    with everything it wrote) if they would take the tenant past its quota.

    ``held_elsewhere``: bytes of files the tenant held already, but only in other mailboxes'
    drafts. They cost nothing, yet the check counts them as new: were they free here, a token
    limited to this mailbox would learn, at the quota's edge, which files the mailboxes it
    cannot read hold (a file they hold is taken, any other refused)."""
    checked = added + held_elsewhere
    if checked <= 0:
        return
    quota = storage_quota(tenant_id)
    table = connection.ops.quote_name(AttachmentStorage._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            _CHARGE.format(table=table),
            {"tenant": tenant_id, "added": added, "checked": checked, "quota": quota},
        )
        row = cursor.fetchone()
    if row is not None:
        return
    used = used_bytes(tenant_id)
    log.warning(
        "intents.attachment.storage_quota_exceeded",
        extra={"tenant_id": tenant_id, "used": used, "added": checked, "quota": quota},
    )
    raise errors.StorageQuotaExceeded(
        message=(
            f"The new files ({checked} bytes) would take the tenant's attachment storage past "
            f"its quota: {used} of {quota} bytes are in use. Nothing was stored. Space comes "
            "back when retention deletes the files of decided drafts; a file this mailbox's "
            "drafts hold already (the same bytes) costs nothing."
        ),
        field="attachments",
    )


def storage_release(freed: Mapping[int, int]) -> None:
    """Take the bytes retention dropped (tenant id -> bytes) off each tenant's total (call in
    the purge's transaction). Tenants in id order: two purges never wait on each other in a
    cycle. Never below 0: a blob a process of the previous release stored while the upgrade
    ran was not counted, and retention must not stall on that (the recount corrects it)."""
    for tenant_id in sorted(freed):
        if freed[tenant_id]:
            AttachmentStorage.objects.filter(tenant_id=tenant_id).update(
                bytes_used=Greatest(F("bytes_used") - freed[tenant_id], Value(0))
            )


def storage_recount(*, tenant_id: int) -> tuple[int, int]:
    """Set the tenant's total to what its blobs hold (the operators' command, after an upgrade
    or a restore). Exact while drafts are stored and purged: it takes the row's lock first, so
    the sum, read after, sees every blob whose transaction counted it, and a transaction still
    to count one waits and adds it after. A correction writes the tenant's operator audit row in
    the same transaction; a total found right writes none. Returns (before, after)."""
    with transaction.atomic():
        AttachmentStorage.objects.bulk_create(
            [AttachmentStorage(tenant_id=tenant_id)], ignore_conflicts=True
        )
        row = AttachmentStorage.objects.select_for_update().get(tenant_id=tenant_id)
        held = AttachmentBlob.objects.filter(
            tenant_id=tenant_id, data_purged_at__isnull=True
        ).aggregate(total=Sum("size"))["total"]
        after = int(held or 0)
        if after != row.bytes_used:
            AttachmentStorage.objects.filter(tenant_id=tenant_id).update(bytes_used=after)
            operator_storage_recounted(tenant_id=tenant_id, before=row.bytes_used, after=after)
    log.info(
        "intents.attachment.storage_recounted",
        extra={"tenant_id": tenant_id, "before": row.bytes_used, "after": after},
    )
    return row.bytes_used, after
