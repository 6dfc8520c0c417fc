"""The tenants' attachment storage and quota (``intents.services.storage`` keeps the totals): for
the quota check, the admin's health panel and ``/metrics``. One row per tenant, whatever the
history. A tenant's quota is its own when an operator set one (``Tenant.attachment_storage_quota``,
``manage.py tenant_storage_quota``), else the deployment's ``TENANT_ATTACHMENT_STORAGE_BYTES``.
A mailbox's bound is ``MAILBOX_ATTACHMENT_STORAGE_SHARE`` of its tenant's quota."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.conf import settings

from intents.models import AttachmentStorage, MailboxAttachmentStorage
from mailboxes.models import Mailbox
from tenants.models import Tenant


@dataclass(frozen=True)
class StorageUse:
    used: int
    quota: int

    @property
    def percent(self) -> int:
        """Of the quota, rounded down (100 when full or past it)."""
        return min(100, self.used * 100 // self.quota) if self.quota else 100

    @property
    def left(self) -> int:
        return max(0, self.quota - self.used)


def storage_quota(tenant_id: int) -> int:
    """The tenant's effective quota, read now (an operator's change applies to the next draft)."""
    return (
        Tenant.objects.only("attachment_storage_quota_bytes")
        .get(pk=tenant_id)
        .attachment_storage_quota
    )


def mailbox_bound(quota: int) -> int:
    """One mailbox's share of a tenant quota of ``quota`` bytes."""
    return math.floor(quota * float(settings.MAILBOX_ATTACHMENT_STORAGE_SHARE))


def mailbox_storage_bound(tenant_id: int) -> int:
    """What each mailbox of the tenant may hold, read now (from its quota, as the check reads it)."""
    return mailbox_bound(storage_quota(tenant_id))


def mailbox_used_bytes(mailbox_id: int) -> int:
    row = (
        MailboxAttachmentStorage.objects.filter(mailbox_id=mailbox_id)
        .values_list("bytes_used")
        .first()
    )
    return int(row[0]) if row else 0


def used_bytes(tenant_id: int) -> int:
    row = AttachmentStorage.objects.filter(tenant_id=tenant_id).values_list("bytes_used").first()
    return int(row[0]) if row else 0


def attachment_storage(*, tenant) -> StorageUse:
    return StorageUse(used=used_bytes(tenant.pk), quota=tenant.attachment_storage_quota)


@dataclass(frozen=True)
class MailboxStorageUse(StorageUse):
    address: str


def attachment_storage_by_mailbox(*, tenant) -> list[MailboxStorageUse]:
    """Each mailbox of the tenant (disabled ones too: their files still count) with its bytes
    against its bound, by address (one query)."""
    used = dict(
        MailboxAttachmentStorage.objects.filter(tenant=tenant).values_list(
            "mailbox_id", "bytes_used"
        )
    )
    bound = mailbox_bound(tenant.attachment_storage_quota)
    return [
        MailboxStorageUse(used=int(used.get(pk, 0)), quota=bound, address=address)
        for pk, address in Mailbox.objects.filter(tenant=tenant)
        .order_by("address")
        .values_list("pk", "address")
    ]


def attachment_storage_by_tenant() -> dict[int, int]:
    """Bytes held per tenant id (a tenant that never stored a file is missing: 0)."""
    return dict(AttachmentStorage.objects.values_list("tenant_id", "bytes_used"))


def storage_quota_by_tenant() -> dict[int, int]:
    """Every tenant's effective quota, by id (one query)."""
    tenants = Tenant.objects.only("pk", "attachment_storage_quota_bytes")
    return {tenant.pk: tenant.attachment_storage_quota for tenant in tenants}
