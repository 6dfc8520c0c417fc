"""Two reviewers deciding on one broadcast at the same moment: approve against reject, against
cancel, against pause (two approvals: test_broadcasts.test_two_reviewers_at_once_approve_once;
pause, cancel and resume with senders: test_races). Each decision runs in a thread of its own,
on its own connection, in its real transaction; both read the broadcast before either locks it,
then queue for its row (held here until both wait), so each order is run in turn. The later
decision is judged on the state the earlier one committed: it is refused with what happened, or,
a stop after an approval, it is applied to the approved broadcast before anything went out. The
sandbox's ledger gets what the final state allows, and nothing else."""

from __future__ import annotations

import time

import pytest
from django.db import transaction

from intents import errors, sending
from intents.models import Broadcast, IntentEvent, SendIntent
from intents.sending.fanout import broadcast_run
from intents.services.broadcast_controls import broadcast_cancel, broadcast_pause
from intents.services.broadcasts import broadcast_approve, broadcast_create, broadcast_reject
from tenants.templatetags.zones import zoned
from tests.intents.helpers import blocked_on_a_lock, in_thread, nudge_queued

pytestmark = pytest.mark.django_db(transaction=True)

RECIPIENTS = 3
UNSETTLED = (SendIntent.State.QUEUED, SendIntent.State.SENDING, SendIntent.State.UNCERTAIN)


def _pending(live) -> Broadcast:
    return broadcast_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        subject="Order {{ order }} is delayed",
        text="Hello {{ name }}",
        recipients=[
            {"address": f"c{i}@example.com", "variables": {"name": f"N{i}", "order": i}}
            for i in range(RECIPIENTS)
        ],
    )


def _decisions(live, broadcast, second) -> dict:
    """Each decision as its reviewer makes it: the approver approves, ``second`` does the other."""
    b, tenant = broadcast, live.tenant
    return {
        "approve": lambda: broadcast_approve(
            tenant=tenant, broadcast_id=b.pk, content_hash=b.content_hash, actor=live.approver
        ),
        "reject": lambda: broadcast_reject(
            tenant=tenant,
            broadcast_id=b.pk,
            actor=second,
            reason="Wrong list",
            content_hash=b.content_hash,
        ),
        "cancel": lambda: broadcast_cancel(
            tenant=tenant, broadcast_id=b.pk, actor=second, reason="Wrong list"
        ),
        "pause": lambda: broadcast_pause(tenant=tenant, broadcast_id=b.pk, actor=second),
    }


def _in_order(broadcast, first, then) -> tuple[list, list]:
    """``first`` and ``then`` in threads of their own, both waiting for the broadcast's row
    (``first`` ahead in its queue) while this thread holds it; their results or refusals."""
    earlier: list = []
    later: list = []
    with transaction.atomic():
        Broadcast.objects.select_for_update().filter(pk=broadcast.pk).values_list("pk").first()
        one = in_thread(first, earlier)
        assert blocked_on_a_lock(count=1), "the first decision never reached the row"
        two = in_thread(then, later)
        assert blocked_on_a_lock(count=2), "the second decision never reached the row"
    one.join(30)
    two.join(30)
    return earlier, later


def _sent(live, broadcast) -> int:
    """The fan-out run, then send rounds until every send is settled but a paused broadcast's
    (``drain_sends`` waits for those too); the sandbox's ledger of the broadcast's sends."""
    broadcast_run(broadcast.pk)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        nudge_queued()
        claimed = sending.run_once(worker="t", limit=20)
        unsettled = SendIntent.objects.filter(state__in=UNSETTLED).exclude(
            broadcast__state=Broadcast.State.PAUSED
        )
        if not claimed and not unsettled.exists():
            break
    broadcast_run(broadcast.pk)
    keys = set(
        SendIntent.objects.filter(broadcast=broadcast).values_list("idempotency_key", flat=True)
    )
    return len([s for s in live.sandbox.ledger() if s.get("idempotency_key") in keys])


def _outcome(result) -> str:
    if isinstance(result, errors.DraftError):
        return f"{type(result).__name__}: {result.message}"
    if isinstance(result, Exception):
        return f"unexpected {result!r}"
    return "done"


# (first, then) -> (the first's outcome, the second's, the final state, messages sent)
CASES = {
    # The later decision names the earlier one: who, and when (in the reader's zone).
    ("approve", "reject"): (
        "done",
        "NotPending: {who} approved this broadcast at {when}.",
        "completed",
        3,
    ),
    ("reject", "approve"): (
        "done",
        "NotPending: {who} rejected this broadcast at {when}.",
        "rejected",
        0,
    ),
    ("approve", "cancel"): ("done", "done", "cancelled", 0),
    ("cancel", "approve"): (
        "NotPending: This broadcast is pending review.",
        "done",
        "completed",
        3,
    ),
    ("approve", "pause"): ("done", "done", "paused", 0),
    ("pause", "approve"): (
        "NotPending: This broadcast is pending review.",
        "done",
        "completed",
        3,
    ),
}


@pytest.mark.parametrize(("first", "then"), list(CASES))
def test_two_reviewers_deciding_at_once_are_ordered_and_the_provider_gets_what_the_end_allows(
    live, member_of, settings, first, then
):
    settings.BROADCAST_RATE_PER_SECOND = 1000
    second = member_of(live.tenant, "approver").user
    broadcast = _pending(live)
    decide = _decisions(live, broadcast, second)

    earlier, later = _in_order(broadcast, decide[first], decide[then])
    sent = _sent(live, broadcast)

    final = Broadcast.objects.get(pk=broadcast.pk).state
    decided = IntentEvent.objects.filter(
        broadcast=broadcast, action__in=["broadcast.approved", "broadcast.rejected"]
    )
    one, two, end, count = CASES[(first, then)]
    decision = decided.select_related("actor_user").get()  # one, whatever the order
    named = {
        "who": decision.actor_user.display_name,
        "when": zoned(decision.created_at, "j M, H:i"),
    }
    assert (_outcome(earlier[0]), _outcome(later[0]), final, sent) == (
        one.format(**named),
        two.format(**named),
        end,
        count,
    )
