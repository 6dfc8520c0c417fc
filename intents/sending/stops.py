"""Changes that stop sends wait for the pre-call checks they affect (``tenants.send_stops``).

The pre-call check locks its batch's intents, reads the tenant, the mailbox, the approver's right
and the suppressions, and commits the attempt rows; the call comes after that commit. A
suspension, a disabled mailbox, a right taken away, a narrower recipient policy or an address
suppressed by hand that committed between the check's read and that commit went unseen by both:
the call went out after the change, and the change's audit row did not know.

``intents_hold_in_flight`` closes that window without a lock in the worker's path: the changing
transaction locks the intents it affects that may be on their way to a call (``queued``, which a
claim may lease at any moment; ``sending``; ``uncertain``, whose replay may be a first send), in
id order as every locker of intents does. If a check holds them, the change waits for its commit
and then counts its attempt rows as in flight; a check that comes later waits for the change's
commit and reads the tenant, mailbox and memberships again after that wait
(``locked.reread_stops``, ``CheckFacts.load``), so it sees the change and blocks.

Lock order: intents, then the row the change updates. The worker holds intents while it takes a
KEY SHARE lock on the tenant (the attempt row's foreign key) and the record path holds them while
it locks the mailbox (``mailbox_key_refused``); a change that locked its tenant or mailbox first
and then waited for the intents would deadlock with either. Membership rows may come first: no
path that holds intents locks a membership. Claims and the sweep skip locked rows; the record and
reconcile paths lock intents in id order too, and then nothing the change holds.

The births lock (``tenants.send_stops.send_births_wait``, a per-tenant advisory lock: shared by
an approval and a fan-out page, exclusive for the change) comes before every row lock on both
sides: the change takes it before the intents, a birth before the draft or the broadcast. A
fan-out page that locked its broadcast first and then waited for a change closed a cycle with the
worker, which holds sends while it waits for that broadcast's row (``hold_broadcasts``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection

from django.db.models import Q, TextField
from django.db.models.functions import Cast

from common.addresses import SUB_ADDRESS_SEPARATOR, suppression_keys
from intents.models import SendAttempt, SendIntent
from intents.policy import normalize_address

log = logging.getLogger("intents.sending")

State = SendIntent.State
ON_THEIR_WAY = [State.QUEUED, State.SENDING, State.UNCERTAIN]


def intents_hold_in_flight(
    *,
    tenant_id: int,
    mailbox_id: int | None = None,
    approver_id: int | None = None,
    keep_mailboxes: Collection[int] | None = None,
    address: str | None = None,
) -> int:
    """Lock (until the caller's commit) the tenant's intents on their way to a call, narrowed to
    one mailbox, one approver, mailboxes outside ``keep_mailboxes``, and sends to ``address``
    (its normal form, the form recipients are stored in); returns how many have an attempt in
    flight. One statement through ``intent_tenant_state`` when none is on its way."""
    qs = SendIntent.objects.filter(tenant_id=tenant_id, state__in=ON_THEIR_WAY)
    if mailbox_id is not None:
        qs = qs.filter(mailbox_id=mailbox_id)
    if approver_id is not None:
        qs = qs.filter(approver_id=approver_id)
    if keep_mailboxes is not None:
        qs = qs.exclude(mailbox_id__in=list(keep_mailboxes))
    if address is not None:
        qs = qs.filter(_sends_to(qs, address))
    held = list(qs.select_for_update().order_by("id").values_list("id", flat=True))
    if not held:
        return 0
    in_flight = (
        SendAttempt.objects.filter(intent_id__in=held, outcome=SendAttempt.Outcome.PENDING)
        # A label lookup only reads: nothing of it goes out after the change.
        .exclude(kind=SendAttempt.Kind.LOOKUP)
        .values("intent_id")
        .distinct()
        .count()
    )
    log.info(
        "intents.sends.stop_held",
        extra={"tenant_id": tenant_id, "held": len(held), "in_flight": in_flight},
    )
    return in_flight


def _sends_to(scope, address: str) -> Q:
    """The sends of ``scope`` that an entry for ``address`` (its normal form) covers: written to
    it, or to a sub-address of it (``suppression_keys``: ana+billing@ is delivered to ana@, whose
    entry the pre-call check blocks it by). ``scope`` is read unlocked: a send's recipients never
    change, and none is born while the change holds the births lock.

    Recipients are stored in the form of the day they were approved, under the approval hash,
    and never rewritten: before the domain was kept in ASCII (``ana@bücher.de``), or before an
    address was composed again after lower-casing, a non-ASCII address had another spelling.
    The pre-call check normalises them and blocks such a send; missed here, a check that read
    the suppressions just before the save sent it unseen and uncounted. Only a non-ASCII or IDN
    address had another spelling, and only in a row holding a non-ASCII character: those rows
    are compared normalised."""
    stored = (
        Q(recipients__to__contains=[address])
        | Q(recipients__cc__contains=[address])
        | Q(recipients__bcc__contains=[address])
    )
    local, _at, domain = address.rpartition("@")
    if local and SUB_ADDRESS_SEPARATOR not in local:
        # In the same statement: the recipients as JSON text, each address a quoted string.
        sub_address = (
            f'"{re.escape(local)}{re.escape(SUB_ADDRESS_SEPARATOR)}[^"@]*@{re.escape(domain)}"'
        )
        stored |= Q(pk__in=_as_text(scope).filter(recipients_text__regex=sub_address).values("pk"))
    if address.isascii() and "xn--" not in address:
        return stored
    older = _as_text(scope).filter(recipients_text__regex=r"[^\x01-\x7f]")
    spelled_otherwise = [
        pk
        for pk, recipients in older.values_list("pk", "recipients")
        if address in _covered_by(recipients)
    ]
    return stored | Q(pk__in=spelled_otherwise)


def _as_text(scope):
    return scope.annotate(recipients_text=Cast("recipients", TextField()))


def _covered_by(recipients: dict) -> set[str]:
    """The entries that would cover one of these recipients (``suppression_keys`` of each, in
    its normal form)."""
    out: set[str] = set()
    for raw in [*recipients.get("to", []), *recipients.get("cc", []), *recipients.get("bcc", [])]:
        try:
            out.update(suppression_keys(normalize_address(raw)))
        except ValueError:
            continue  # the pre-call check blocks it as invalid
    return out


def on_sends_stopping(sender, **scope) -> int:
    """The receiver of ``tenants.send_stops.sends_stopping``."""
    return intents_hold_in_flight(
        tenant_id=scope["tenant_id"],
        mailbox_id=scope.get("mailbox_id"),
        approver_id=scope.get("approver_id"),
        keep_mailboxes=scope.get("keep_mailboxes"),
        address=scope.get("address"),
    )
