"""A change that stops sends (a tenant suspended, a mailbox disabled, an approver's right taken
away) waits, inside its transaction, for the sends already past their pre-call check.

The worker checks the tenant, the mailbox and the approver's right right before each provider
call and commits the attempt row before calling (``intents.sending.precheck``). A change that
committed after that check had read the rows, but before its attempt rows committed, let a call
go out after it that the change knew nothing about. Now the change first locks the sends it
affects (``intents.sending.stops``): it waits for a check holding them, whose attempt rows it then
counts as in flight, and a check that comes after it waits for its commit and sees the change.

intents sits above tenants and mailboxes, so the locking is theirs and is reached through this
signal, which intents connects in its AppConfig.ready.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import cast

from django.db import connection
from django.db.transaction import TransactionManagementError
from django.dispatch import Signal

# Sent inside the changing transaction with the scope of the sends it stops: ``tenant_id``, and
# optionally ``mailbox_id`` (one mailbox), ``approver_id`` (sends this user approved) and
# ``keep_mailboxes`` (mailbox ids the approver keeps the right for). The receiver answers how
# many of those sends have a call in flight.
sends_stopping = Signal()


def sends_in_flight_hold(
    *,
    tenant_id: int,
    mailbox_id: int | None = None,
    approver_id: int | None = None,
    keep_mailboxes: Collection[int] | None = None,
) -> int:
    """Lock the sends this change stops until the caller's transaction ends, and return how many
    of them have a call in flight (an attempt row with no answer yet): those went out before the
    change and are reported as they finish. Call it before locking the row the change updates
    (tenant, mailbox): the worker locks sends first and then touches those rows."""
    if not connection.in_atomic_block:
        raise TransactionManagementError("a change that stops sends holds them in its transaction")
    answers = sends_stopping.send(
        sender=None,
        tenant_id=tenant_id,
        mailbox_id=mailbox_id,
        approver_id=approver_id,
        keep_mailboxes=keep_mailboxes,
    )
    if not answers:
        # Without the receiver the change would race the worker unseen again: refuse instead.
        raise RuntimeError("nothing holds the sends a change stops (intents is not ready)")
    return sum(cast(int, count) for _receiver, count in answers)
