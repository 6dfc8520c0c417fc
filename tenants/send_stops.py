"""A change that stops sends (a tenant suspended, a mailbox disabled, an approver's right taken
away, a mailbox's recipient policy changed, an address suppressed by hand, the second approver
rule turned on) waits, inside its transaction, for the sends already past their pre-call check.

The worker checks the tenant, the mailbox and the approver's right right before each provider
call and commits the attempt row before calling (``intents.sending.precheck``). A change that
committed after that check had read the rows, but before its attempt rows committed, let a call
go out after it that the change knew nothing about. Now the change first locks the sends it
affects (``intents.sending.stops``): it waits for a check holding them, whose attempt rows it then
counts as in flight, and a check that comes after it waits for its commit and sees the change.

intents sits above tenants and mailboxes, so the locking is theirs and is reached through this
signal, which intents connects in its AppConfig.ready.

A send born while a change runs (an approval, a broadcast's fan-out page) is a row the change's
hold cannot see: it read the right, the mailbox and the tenant before the change committed, and
a worker could check and send it before the change did, uncounted (a deactivated approver's
reply went out; the change said nothing was in flight). So the birth and the change also take
one advisory lock of the tenant (``send_births_wait``, shared; the change, exclusive): a birth
waits for a running change and then reads what it changed; a change waits for births in flight
and then holds the sends they made.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import cast

from django.db import connection
from django.db.transaction import TransactionManagementError
from django.dispatch import Signal
from django.utils.translation import ngettext_lazy

# Sent inside the changing transaction with the scope of the sends it stops: ``tenant_id``, and
# optionally ``mailbox_id`` (one mailbox), ``approver_id`` (sends this user approved),
# ``keep_mailboxes`` (mailbox ids the approver keeps the right for) and ``address`` (sends to
# this address, in its normal form: a person suppressed it). The receiver answers how
# many of those sends have a call in flight.
sends_stopping = Signal()


@dataclass(frozen=True)
class Stopped[T]:
    """What a change that stops sends returns: the row it changed, and how many of the sends it
    stops were already past their last check (``sends_in_flight_hold``). Those go out; the
    person who made the change is told so, as its audit row says."""

    changed: T
    sends_in_flight: int = 0


# What the person who made the change reads after it, by what it stopped; %(count)d > 0.
IN_FLIGHT_AFTER = {
    "mailbox": ngettext_lazy(
        "%(count)d send was already on its way and will go out; nothing else from this mailbox "
        "will be sent.",
        "%(count)d sends were already on their way and will go out; nothing else from this "
        "mailbox will be sent.",
        "count",
    ),
    "tenant": ngettext_lazy(
        "%(count)d send was already on its way and will go out; nothing else from this tenant "
        "will be sent.",
        "%(count)d sends were already on their way and will go out; nothing else from this "
        "tenant will be sent.",
        "count",
    ),
    "approver": ngettext_lazy(
        "%(count)d send they approved was already on its way and will go out; nothing else "
        "they approved will be sent.",
        "%(count)d sends they approved were already on their way and will go out; nothing else "
        "they approved will be sent.",
        "count",
    ),
    # The person's own role lowered, or their own membership ended, by themselves.
    "own_approvals": ngettext_lazy(
        "%(count)d send you approved was already on its way and will go out; nothing else you "
        "approved will be sent.",
        "%(count)d sends you approved were already on their way and will go out; nothing else "
        "you approved will be sent.",
        "count",
    ),
    "policy": ngettext_lazy(
        "%(count)d send from this mailbox was already on its way and will go out; the new "
        "policy applies to everything else.",
        "%(count)d sends from this mailbox were already on their way and will go out; the new "
        "policy applies to everything else.",
        "count",
    ),
    "second_approver": ngettext_lazy(
        "%(count)d send was already on its way and will go out; the second approver rule "
        "applies to everything else.",
        "%(count)d sends were already on their way and will go out; the second approver rule "
        "applies to everything else.",
        "count",
    ),
    "address": ngettext_lazy(
        "%(count)d send to this address was already on its way and will go out; nothing else "
        "will be sent to it.",
        "%(count)d sends to this address were already on their way and will go out; nothing "
        "else will be sent to it.",
        "count",
    ),
    "rights": ngettext_lazy(
        "%(count)d send they approved from a mailbox taken away was already on its way and will "
        "go out; nothing else they approved from those mailboxes will be sent.",
        "%(count)d sends they approved from mailboxes taken away were already on their way and "
        "will go out; nothing else they approved from those mailboxes will be sent.",
        "count",
    ),
    "broadcast_cancelled": ngettext_lazy(
        "%(count)d send of this broadcast was already on its way and will go out; no other "
        "will be sent.",
        "%(count)d sends of this broadcast were already on their way and will go out; no other "
        "will be sent.",
        "count",
    ),
    "broadcast_paused": ngettext_lazy(
        "%(count)d send of this broadcast was already on its way and will go out; no other "
        "goes out until it is resumed.",
        "%(count)d sends of this broadcast were already on their way and will go out; no other "
        "goes out until it is resumed.",
        "count",
    ),
}


def with_sends_in_flight(done: str, stopped: Stopped, what: str) -> str:
    """``done`` (what the change did, as its page says it) and, when the change found sends
    already past their last check, that those go out (``what``: a key of IN_FLIGHT_AFTER). A
    stop that let nothing through says nothing more."""
    if not stopped.sends_in_flight:
        return done
    return f"{done} {IN_FLIGHT_AFTER[what] % {'count': stopped.sends_in_flight}}"


def _births_lock_sql(mode: str) -> str:
    return f"SELECT {mode}(hashtextextended('send-births:' || %s::text, 0))"


def send_births_wait(*, tenant_id: int) -> None:
    """Call first in a transaction that creates sends of the tenant (an approval, a fan-out
    page), before it reads what allows them: it waits for a change that stops the tenant's sends
    to commit, and that change waits for this transaction. Births do not wait for each other."""
    if not connection.in_atomic_block:
        raise TransactionManagementError("a send is born inside its transaction")
    with connection.cursor() as cursor:
        cursor.execute(_births_lock_sql("pg_advisory_xact_lock_shared"), [tenant_id])


def sends_in_flight_hold(
    *,
    tenant_id: int,
    mailbox_id: int | None = None,
    approver_id: int | None = None,
    keep_mailboxes: Collection[int] | None = None,
    address: str | None = None,
) -> int:
    """Lock the sends this change stops until the caller's transaction ends, and return how many
    of them have a call in flight (an attempt row with no answer yet): those went out before the
    change and are reported as they finish. Call it before locking the row the change updates
    (tenant, mailbox): the worker locks sends first and then touches those rows."""
    if not connection.in_atomic_block:
        raise TransactionManagementError("a change that stops sends holds them in its transaction")
    # Sends being born now are not rows yet: wait for them, and make the next ones wait for us.
    with connection.cursor() as cursor:
        cursor.execute(_births_lock_sql("pg_advisory_xact_lock"), [tenant_id])
    answers = sends_stopping.send(
        sender=None,
        tenant_id=tenant_id,
        mailbox_id=mailbox_id,
        approver_id=approver_id,
        keep_mailboxes=keep_mailboxes,
        address=address,
    )
    if not answers:
        # Without the receiver the change would race the worker unseen again: refuse instead.
        raise RuntimeError("nothing holds the sends a change stops (intents is not ready)")
    return sum(cast(int, count) for _receiver, count in answers)
