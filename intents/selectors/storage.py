"""The tenants' attachment storage and quota (``intents.services.storage`` keeps the totals): for
the quota check, the admin's health panel and ``/metrics``. One row per tenant, whatever the
history. A tenant's quota is its own when an operator set one (``Tenant.attachment_storage_quota``,
``manage.py tenant_storage_quota``), else the deployment's ``TENANT_ATTACHMENT_STORAGE_BYTES``."""

from __future__ import annotations

from dataclasses import dataclass

from intents.models import AttachmentStorage
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


def used_bytes(tenant_id: int) -> int:
    row = AttachmentStorage.objects.filter(tenant_id=tenant_id).values_list("bytes_used").first()
    return int(row[0]) if row else 0


def attachment_storage(*, tenant) -> StorageUse:
    return StorageUse(used=used_bytes(tenant.pk), quota=tenant.attachment_storage_quota)


def attachment_storage_by_tenant() -> dict[int, int]:
    """Bytes held per tenant id (a tenant that never stored a file is missing: 0)."""
    return dict(AttachmentStorage.objects.values_list("tenant_id", "bytes_used"))


def storage_quota_by_tenant() -> dict[int, int]:
    """Every tenant's effective quota, by id (one query)."""
    tenants = Tenant.objects.only("pk", "attachment_storage_quota_bytes")
    return {tenant.pk: tenant.attachment_storage_quota for tenant in tenants}
