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

Each mailbox has a bound too, ``MAILBOX_ATTACHMENT_STORAGE_SHARE`` of the tenant's quota, so
that one mailbox (one agent token limited to it) cannot fill the quota and leave every other
mailbox's agents refused. A blob is charged to each mailbox whose drafts name it
(``AttachmentCharge``, one row per mailbox and blob), from the version that first names it in
that mailbox until retention drops its bytes: a file two mailboxes attach counts in both shares
and once in the tenant's total, and what a mailbox is charged never depends on what the
mailboxes it cannot read hold. The unique row decides who pays: of two versions naming the
blob at once in one mailbox, the second's insert waits for the first and finds it. The
mailbox's total (``MailboxAttachmentStorage``) is added to by a guarded UPDATE like the
tenant's, just before it. The order of locks, everywhere: blobs, charges, the mailboxes'
totals (by mailbox id), the tenant's total.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Mapping

from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Sum, Value
from django.db.models.functions import Greatest

from intents import errors
from intents.models import (
    AttachmentBlob,
    AttachmentCharge,
    AttachmentStorage,
    DraftAttachment,
    MailboxAttachmentStorage,
)
from intents.selectors.storage import mailbox_bound, mailbox_used_bytes, storage_quota, used_bytes
from tenants.onboarding import operator_mailbox_storage_recounted, operator_storage_recounted

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


# Charge the mailbox for each blob it does not hold yet; the rows returned are those inserted.
# A pair another transaction is inserting waits for it: inserted there, nothing here.
_CHARGE_MAILBOX_BLOBS = """
INSERT INTO {table} (tenant_id, mailbox_id, blob_id, created_at)
SELECT %(tenant)s, %(mailbox)s, blob_id, now() FROM unnest(%(blobs)s::bigint[]) AS blob_id
 ORDER BY blob_id
ON CONFLICT (mailbox_id, blob_id) DO NOTHING
RETURNING blob_id
"""

# The mailbox's total, guarded by its bound as the tenant's is by its quota (_CHARGE).
_CHARGE_MAILBOX = """
INSERT INTO {table} AS storage (mailbox_id, tenant_id, bytes_used)
SELECT %(mailbox)s, %(tenant)s, %(added)s WHERE %(added)s <= coalesce(%(bound)s, %(added)s)
ON CONFLICT (mailbox_id) DO UPDATE SET bytes_used = storage.bytes_used + EXCLUDED.bytes_used
 WHERE %(bound)s::bigint IS NULL OR storage.bytes_used + EXCLUDED.bytes_used <= %(bound)s
RETURNING storage.bytes_used
"""


def storage_charge(
    *,
    tenant_id: int,
    added: int,
    held_elsewhere: int = 0,
    mailbox=None,
    blob_sizes: Mapping[int, int] | None = None,
) -> None:
    """Count ``added`` bytes the version's transaction stored for the tenant (call in it, after
    the blobs are written); refuse (``StorageQuotaExceeded``, the transaction then rolls back
    with everything it wrote) if they would take the tenant past its quota.

    ``mailbox`` and ``blob_sizes`` (every blob the version names, id -> size, its rows locked
    by the caller): charge the mailbox for those it does not hold yet, refused past its share
    (``MailboxStorageQuotaExceeded``), before the tenant's check.

    ``held_elsewhere``: bytes of files the tenant held already, but only in other mailboxes'
    drafts. They cost nothing, yet the check counts them as new: were they free here, a token
    limited to this mailbox would learn, at the quota's edge, which files the mailboxes it
    cannot read hold (a file they hold is taken, any other refused)."""
    quota = storage_quota(tenant_id)
    if mailbox is not None and blob_sizes:
        # A share of the whole quota bounds nothing the tenant's check does not (a mailbox's
        # files are among the tenant's): the tenant's refusal says what is full.
        bound = mailbox_bound(quota)
        _charge_mailbox(tenant_id, mailbox, blob_sizes, bound if bound < quota else None)
    checked = added + held_elsewhere
    if checked <= 0:
        return
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
    # Not the bytes in use: they are every mailbox's, and a token limited to some mailboxes
    # would read in them the files of the others come and go. The log and the console's storage
    # panel give them to those who may see them.
    raise errors.StorageQuotaExceeded(
        message=(
            f"The new files ({checked} bytes) would take the tenant's attachment storage past "
            f"its quota of {quota} bytes. Nothing was stored. Space comes back when retention "
            "deletes the files of decided drafts (a tenant admin sees what is in use on the "
            "console); a file this mailbox's drafts hold already (the same bytes) costs nothing."
        ),
        field="attachments",
    )


def _charge_mailbox(
    tenant_id: int, mailbox, blob_sizes: Mapping[int, int], bound: int | None
) -> None:
    """Charge the mailbox for the blobs it does not hold yet; past ``bound`` (None: no bound),
    refuse."""
    charges = connection.ops.quote_name(AttachmentCharge._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            _CHARGE_MAILBOX_BLOBS.format(table=charges),
            {"tenant": tenant_id, "mailbox": mailbox.pk, "blobs": sorted(blob_sizes)},
        )
        added = sum(blob_sizes[blob_id] for (blob_id,) in cursor.fetchall())
        if not added:
            return
        cursor.execute(
            _CHARGE_MAILBOX.format(
                table=connection.ops.quote_name(MailboxAttachmentStorage._meta.db_table)
            ),
            {"tenant": tenant_id, "mailbox": mailbox.pk, "added": added, "bound": bound},
        )
        row = cursor.fetchone()
    if row is not None or bound is None:
        return
    used = mailbox_used_bytes(mailbox.pk)
    log.warning(
        "intents.attachment.mailbox_storage_quota_exceeded",
        extra={"tenant_id": tenant_id, "mailbox_id": mailbox.pk, "used": used, "added": added},
    )
    raise errors.MailboxStorageQuotaExceeded(
        message=(
            f"The new files ({added} bytes) would take mailbox {mailbox.address} past its share "
            f"of the tenant's attachment storage: {used} of {bound} bytes are in use. Nothing "
            "was stored. Space comes back when retention deletes the files of this mailbox's "
            "decided drafts; a file this mailbox's drafts hold already costs nothing."
        ),
        mailbox=mailbox.address,
        used=used,
        limit=bound,
        added=added,
    )


def storage_release(gone: list[tuple[int, int, int]]) -> None:
    """Take the bytes of the blobs retention dropped ((blob id, tenant id, size) rows, their
    rows locked) off each tenant's total and off each mailbox charged for them, deleting those
    charges (call in the purge's transaction). Mailboxes, then tenants, in id order: two purges
    never wait on each other in a cycle. Never below 0: a blob a process of the previous
    release stored while the upgrade ran was not counted, and retention must not stall on that
    (the recount corrects it)."""
    sizes = {blob_id: size for blob_id, _, size in gone}
    charged = AttachmentCharge.objects.filter(blob_id__in=list(sizes))
    by_mailbox: Tally[int] = Tally()
    for mailbox_id, blob_id in charged.order_by("mailbox_id", "blob_id").values_list(
        "mailbox_id", "blob_id"
    ):
        by_mailbox[mailbox_id] += sizes[blob_id]
    charged.delete()
    for mailbox_id in sorted(by_mailbox):
        MailboxAttachmentStorage.objects.filter(mailbox_id=mailbox_id).update(
            bytes_used=Greatest(F("bytes_used") - by_mailbox[mailbox_id], Value(0))
        )
    freed: Tally[int] = Tally()
    for _, tenant_id, size in gone:
        freed[tenant_id] += size
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


def storage_recount_mailboxes(*, tenant_id: int) -> list[tuple[int, int, int]]:
    """Set each of the tenant's mailboxes' totals to what its charges hold, after making the
    charges right: a file a draft of the mailbox still needs (a version with its body names it)
    is charged to it, as the version would have charged it had a process of this release stored
    it; a charge of a blob whose bytes are gone (a purge by a process of the previous release)
    goes. Charges beyond those are left as they are: they are what the running code wrote.
    Exact while drafts are stored and purged: the blobs are locked first, then the charges, then
    each total (by mailbox id), the order every charge and purge takes them in; the sum is read
    after the total's lock. Call before the tenant's ``storage_recount``, never in one
    transaction with it. Returns the corrections, (mailbox id, before, after)."""
    with transaction.atomic():
        _charges_made_right(tenant_id)
        corrected = _mailbox_totals_set(tenant_id)
    for mailbox_id, before, after in corrected:
        log.info(
            "intents.attachment.mailbox_storage_recounted",
            extra={
                "tenant_id": tenant_id,
                "mailbox_id": mailbox_id,
                "before": before,
                "after": after,
            },
        )
    return corrected


def _charges_made_right(tenant_id: int) -> None:
    """``storage_recount_mailboxes``' first step, in its transaction: the charges of blobs whose
    bytes are gone deleted, the files drafts still need charged (blobs locked first)."""
    blobs = AttachmentBlob.objects.filter(tenant_id=tenant_id).order_by("sha256")
    charged = AttachmentCharge.objects.filter(tenant_id=tenant_id)
    dead = list(
        blobs.select_for_update()
        .filter(data_purged_at__isnull=False, pk__in=charged.values("blob_id"))
        .values_list("pk", flat=True)
    )
    if dead:
        charged.filter(blob_id__in=dead).delete()
    needed = (
        DraftAttachment.objects.filter(
            tenant_id=tenant_id,
            version__body_purged_at__isnull=True,
            blob__data_purged_at__isnull=True,
        )
        .exclude(
            Exists(
                AttachmentCharge.objects.filter(
                    mailbox_id=OuterRef("version__draft__mailbox_id"),
                    blob_id=OuterRef("blob_id"),
                )
            )
        )
        .values_list("version__draft__mailbox_id", "blob_id")
        .distinct()
    )
    pairs = set(needed)
    if pairs:
        live = set(
            blobs.select_for_update()
            .filter(pk__in={blob_id for _, blob_id in pairs}, data_purged_at__isnull=True)
            .values_list("pk", flat=True)
        )
        AttachmentCharge.objects.bulk_create(
            [
                AttachmentCharge(tenant_id=tenant_id, mailbox_id=m, blob_id=b)
                for m, b in sorted(pairs)
                if b in live
            ],
            ignore_conflicts=True,
        )


def _mailbox_totals_set(tenant_id: int) -> list[tuple[int, int, int]]:
    """``storage_recount_mailboxes``' second step, in its transaction: each mailbox's total set
    to its charges' sum, read after the total's lock; the corrections, audited."""
    charged = AttachmentCharge.objects.filter(tenant_id=tenant_id)
    corrected = []
    mailboxes = sorted(
        set(charged.values_list("mailbox_id", flat=True))
        | set(
            MailboxAttachmentStorage.objects.filter(tenant_id=tenant_id).values_list(
                "mailbox_id", flat=True
            )
        )
    )
    for mailbox_id in mailboxes:
        MailboxAttachmentStorage.objects.bulk_create(
            [MailboxAttachmentStorage(mailbox_id=mailbox_id, tenant_id=tenant_id)],
            ignore_conflicts=True,
        )
        row = MailboxAttachmentStorage.objects.select_for_update().get(mailbox_id=mailbox_id)
        held = AttachmentCharge.objects.filter(
            mailbox_id=mailbox_id, blob__data_purged_at__isnull=True
        ).aggregate(total=Sum("blob__size"))["total"]
        after = int(held or 0)
        if after != row.bytes_used:
            MailboxAttachmentStorage.objects.filter(mailbox_id=mailbox_id).update(bytes_used=after)
            operator_mailbox_storage_recounted(
                tenant_id=tenant_id, mailbox_id=mailbox_id, before=row.bytes_used, after=after
            )
            corrected.append((mailbox_id, row.bytes_used, after))
    return corrected
