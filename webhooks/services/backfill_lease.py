"""One backfill run at a time per tenant (``BackfillLease``): a run takes the tenant's lease
without waiting before it asks about the tenant's mailboxes, and gives it back after; a run that
finds it held by another skips the tenant (the next run asks again)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models.functions import Now

from webhooks.models import BackfillLease


def lease_length() -> timedelta:
    """Twice the task's time limit: a run begins its calls only inside that limit
    (``backfill_bounds.run_window``), so a live holder never outlasts its lease, and a crashed
    one keeps the tenant from the runs after it for minutes, not for ever."""
    return timedelta(seconds=2 * float(settings.Q_CLUSTER.get("timeout", 120)))


def _take(tenant_id: int, holder: uuid.UUID) -> bool:
    # A lapsed lease is taken over by a conditional UPDATE: of two runs, the second waits for
    # the first's row lock, reads the row again and matches nothing.
    lapsed = BackfillLease.objects.filter(tenant_id=tenant_id, held_until__lt=Now()).update(
        holder=holder, held_until=Now() + lease_length()
    )
    if lapsed:
        return True
    try:
        with transaction.atomic():
            BackfillLease.objects.create(
                tenant_id=tenant_id, holder=holder, held_until=Now() + lease_length()
            )
    except IntegrityError:
        return False  # another run holds it (or took it over just now)
    return True


@contextmanager
def backfill_tenant_held(tenant_id: int) -> Iterator[bool]:
    """True inside the block if this run holds the tenant; False if another run does."""
    holder = uuid.uuid4()
    taken = _take(tenant_id, holder)
    try:
        yield taken
    finally:
        if taken:
            BackfillLease.objects.filter(tenant_id=tenant_id, holder=holder).delete()
