"""Several sends locked in one transaction are locked in id order, as every other locker of
sends takes them (``intents.sending.stops``): a statement without an ORDER BY locks rows in the
order its plan visits them, which is where they lie in the table, not their ids."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction
from django.db.models.functions import Now

from console.services import suppression_add
from intents.models import SendIntent
from intents.sending.lease import Claim
from intents.sending.record import intents_adopt_late_acceptances
from mailboxes import provider
from tests.factories import make_local_mailbox
from tests.intents.helpers import (
    blocked_on_a_lock,
    deadlocks_so_far,
    in_thread,
    noting_session,
    until_done_or_waiting,
    until_sessions_gone,
)
from tests.webhooks.conftest import intent_row  # noqa: F401 (a fixture, used by name)

pytestmark = pytest.mark.django_db(transaction=True)

ADDRESS = "jane@customer.test"


def _accepted(intent: SendIntent) -> tuple[Claim, provider.SendResult]:
    """AgentMail's late answer to an earlier call of ``intent``: accepted."""
    result = provider.SendResult(
        outcome=provider.Outcome.ACCEPTED,
        message_id=f"<{uuid.uuid4()}@agentmail.test>",
        thread_id="thr_late",
        http_status=200,
    )
    return Claim(intent.pk, uuid.uuid4(), "w"), result


def test_late_acceptances_of_two_sends_do_not_deadlock_with_a_suppression_of_their_address(
    tenant_a,
    member_of,
    intent_row,  # noqa: F811 (the fixture imported above)
):
    """Two uncertain sends, the lower one's row rewritten since (it now lies after the higher
    one). The late answers' adoption locked them as its plan found them, higher first; the admin
    suppressing their address locked them in id order. Each held one the other wanted next."""
    admin = member_of(tenant_a, "admin").user
    box = make_local_mailbox(tenant_a)
    lower = intent_row(box, to=[ADDRESS], message_id=None, state="uncertain")
    higher = intent_row(box, to=[ADDRESS], message_id=None, state="uncertain")
    SendIntent.objects.filter(pk=lower.pk).update(updated_at=Now())
    assert lower.pk < higher.pk
    before = deadlocks_so_far()

    adopted: list = []
    added: list = []
    pids: list[int] = []
    with transaction.atomic():
        # A reconciliation holding the lower send at that moment.
        list(SendIntent.objects.select_for_update().filter(pk=lower.pk).values_list("pk"))
        stop = in_thread(
            noting_session(
                lambda: suppression_add(
                    tenant=tenant_a, address=ADDRESS, note="asked", actor=admin
                ),
                pids,
            ),
            added,
        )
        assert blocked_on_a_lock(), "the suppression never reached the lower send"
        adopt = in_thread(
            noting_session(
                lambda: intents_adopt_late_acceptances([_accepted(higher), _accepted(lower)]),
                pids,
            ),
            adopted,
        )
        until_done_or_waiting(adopt, waiters=2)
    stop.join(30)
    adopt.join(30)
    until_sessions_gone(pids)

    assert deadlocks_so_far() == before
    assert not isinstance(added[0], Exception), added[0]
    assert adopted == [{lower.pk, higher.pk}]
    assert set(
        SendIntent.objects.filter(pk__in=[lower.pk, higher.pk]).values_list("state", flat=True)
    ) == {"accepted"}


def test_new_buckets_are_made_in_the_order_every_claimer_makes_them():
    """A key's first claim inserts its bucket, and an insert waits for another claimer's
    uncommitted insert of the same key: two claimers making the same buckets in different
    orders deadlock. A set's order differs between processes (string hashes are salted), so the
    buckets are made in sorted order, the order the existing ones are locked in."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from intents.sending.throttle import lock_throttles

    keys = {f"key-{uuid.uuid4().hex[:12]}" for _ in range(20)}
    with transaction.atomic(), CaptureQueriesContext(connection) as seen:
        lock_throttles(keys, _now())

    insert = next(q["sql"] for q in seen.captured_queries if q["sql"].startswith("INSERT"))
    made = [key for key in sorted(keys, key=insert.index)]
    assert made == sorted(keys)


def _now():
    from django.utils import timezone

    return timezone.now()
