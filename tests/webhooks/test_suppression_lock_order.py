"""A batch of webhook events takes its locks in the order the console and the worker take them:
intents first, suppressions last (``suppressing.SuppressionPlan``).

A batch that wrote a bounce's suppression at once, and then held a queued reply because the
customer wrote again, deadlocked with an admin suppressing the same address by hand at that
moment: the admin's save held the reply (``sends_in_flight_hold``) and waited for the batch's
suppression row, the batch waited for the reply. PostgreSQL cancelled one of them.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from console.services import suppression_add
from intents.models import Draft, IntentEvent, Suppression
from tests.intents.helpers import (
    blocked_on_a_lock,
    deadlocks_so_far,
    in_thread,
    noting_session,
    until_done_or_waiting,
    until_sessions_gone,
)
from tests.webhooks.conftest import delivery_payload, new_svix_id, received_payload
from webhooks.models import WebhookEvent
from webhooks.services import applier, apply

pytestmark = pytest.mark.django_db(transaction=True)

ADDRESS = "jane@customer.test"


def test_a_batch_that_suppresses_and_holds_does_not_deadlock_with_an_admin_suppressing_by_hand(
    client, tenant_a, member_of, hook_for, mailbox_row, intent_row
):
    admin = member_of(tenant_a, "admin").user
    hook = hook_for(tenant_a)
    box = mailbox_row(tenant_a)
    sent = intent_row(box, to=[ADDRESS])
    # A reply to the same customer, queued in the thread the customer writes in again: the
    # admin's save locks it (a send on its way to the address), the batch holds it.
    queued = intent_row(box, to=[ADDRESS], thread_id="thr_q", message_id=None, state="queued")
    # A pending draft of that thread: the batch locks it just before the queued replies, so the
    # test can stop the batch there, after its bounce and before it touches the reply.
    pending = Draft.objects.create(
        tenant=tenant_a,
        mailbox=box,
        thread_id="thr_q",
        in_reply_to="<opened-thr_q@customer.test>",
        status=Draft.Status.PENDING,
    )
    bounce, again = new_svix_id(), new_svix_id()
    hook.post(client, delivery_payload("bounced", sent), svix_id=bounce, apply=False)
    payload = received_payload(box, thread_id="thr_q", sender=f"Jane <{ADDRESS}>")
    hook.post(client, payload, svix_id=again, apply=False)
    before = deadlocks_so_far()

    batched: list = []
    added: list = []
    pids: list[int] = []
    with transaction.atomic():
        list(Draft.objects.select_for_update().filter(pk=pending.pk).values_list("pk"))
        batch = in_thread(noting_session(applier.events_apply_batch, pids), batched)
        assert blocked_on_a_lock(), "the batch never reached the thread's drafts"
        console = in_thread(
            noting_session(
                lambda: suppression_add(
                    tenant=tenant_a, address=ADDRESS, note="asked", actor=admin
                ),
                pids,
            ),
            added,
        )
        # Fixed: the console saves and ends. Before: it waits for the batch's suppression row.
        until_done_or_waiting(console, waiters=2)
    batch.join(30)
    console.join(30)
    until_sessions_gone(pids)

    assert deadlocks_so_far() == before
    assert not isinstance(added[0], Exception), added[0]
    assert batched == [(2, 2)]
    manual = Suppression.objects.get(tenant=tenant_a, address=ADDRESS)
    assert manual.reason == Suppression.Reason.MANUAL
    events = {e.svix_id: e for e in WebhookEvent.objects.all()}
    assert {svix_id: events[svix_id].state for svix_id in (bounce, again)} == {
        bounce: "applied",
        again: "applied",
    }
    # The person's entry came first and is never overwritten: the bounce changed no row.
    journal = IntentEvent.objects.get(actor_label=bounce, action="delivery.bounced")
    assert journal.data["suppressed"] == []
    assert events[bounce].outcome == "1 of 1 recipients moved to bounced"
    queued.refresh_from_db()
    assert queued.held_reason.startswith("customer wrote again")


def test_a_batch_still_journals_which_suppressions_each_event_changed(
    client, tenant_a, hook_for, mailbox_row, intent_row
):
    """Written at the end of the batch, in event order: each event still says whose row it
    changed, as if written when it was applied."""
    hook = hook_for(tenant_a)
    box = mailbox_row(tenant_a)
    intent = intent_row(box, to=[ADDRESS], cc=["ops@customer.test"])
    order = [
        ("bounced", [ADDRESS]),  # new row
        ("bounced", [ADDRESS, "ops@customer.test"]),  # only ops is new
        ("complained", [ADDRESS]),  # stronger: changed again
        ("bounced", [ADDRESS]),  # weaker: nothing
        ("delivered", [ADDRESS]),  # suppresses nothing
    ]
    ids = [new_svix_id() for _ in order]
    for svix_id, (kind, recipients) in zip(ids, order, strict=True):
        payload = delivery_payload(kind, intent, recipients=recipients)
        hook.post(client, payload, svix_id=svix_id, apply=False)

    assert applier.events_apply_batch() == (5, 5)

    journal = {
        row.actor_label: row.data["suppressed"]
        for row in IntentEvent.objects.filter(actor_kind="webhook", actor_label__in=ids)
    }
    assert [journal[svix_id] for svix_id in ids] == [
        [ADDRESS],
        ["ops@customer.test"],
        [ADDRESS],
        [],
        [],
    ]
    outcomes = dict(WebhookEvent.objects.values_list("svix_id", "outcome"))
    assert [outcomes[svix_id] for svix_id in ids] == [
        "1 of 1 recipients moved to bounced; 1 suppressed",
        "1 of 2 recipients moved to bounced; 1 suppressed",
        "1 of 1 recipients moved to complained; 1 suppressed",
        "0 of 1 recipients moved to bounced",
        "0 of 1 recipients moved to delivered",
    ]
    assert dict(Suppression.objects.filter(tenant=tenant_a).values_list("address", "reason")) == {
        ADDRESS: "complained",
        "ops@customer.test": "bounced",
    }


# Three addresses whose rows two appliers both write: the blocker holds C's row (an admin
# removing it at that moment), so the test can stop the batch between its rows.
A, B, C = "ana@customer.test", "ben@customer.test", "cleo@customer.test"


def _one_event_out_of_order(client, hook, box, intent_row) -> list[str]:
    """One bounce naming the three in the order the provider listed them: B, C, A."""
    sent = intent_row(box, to=[B, C, A])
    svix_id = new_svix_id()
    hook.post(client, delivery_payload("bounced", sent), svix_id=svix_id, apply=False)
    return [svix_id]


def _three_events(client, hook, box, intent_row) -> list[str]:
    """Three bounces, of three sends, one address each, in the order B, C, A."""
    ids = []
    for address in (B, C, A):
        sent = intent_row(box, to=[address])
        ids.append(new_svix_id())
        hook.post(client, delivery_payload("bounced", sent), svix_id=ids[-1], apply=False)
    return ids


@pytest.mark.parametrize("batch_events", [_one_event_out_of_order, _three_events])
def test_two_appliers_suppressing_the_same_addresses_take_their_rows_in_one_order(
    client, tenant_a, hook_for, mailbox_row, intent_row, batch_events
):
    """A batch wrote its suppressions event by event, each in the order its payload named the
    addresses (B, C, A); the sweep's applier, at the same moment, a bounce naming A and B. Each
    held one row the other wanted next: PostgreSQL cancelled one of them. In one order (tenant,
    address) for every writer, the second waits for the first and then goes on."""
    hook = hook_for(tenant_a)
    box = mailbox_row(tenant_a)
    Suppression.objects.create(tenant=tenant_a, address=C, reason=Suppression.Reason.BOUNCED)
    batch_ids = batch_events(client, hook, box, intent_row)
    other = intent_row(box, to=[A, B])
    single = new_svix_id()
    hook.post(client, delivery_payload("bounced", other), svix_id=single, apply=False)
    before = deadlocks_so_far()

    batched: list = []
    swept: list = []
    pids: list[int] = []
    with transaction.atomic():
        list(Suppression.objects.select_for_update().filter(address=C).values_list("pk"))
        batch = in_thread(
            noting_session(lambda: applier.events_apply_batch(limit=len(batch_ids)), pids), batched
        )
        assert blocked_on_a_lock(), "the batch never reached the suppression row held"
        event = WebhookEvent.objects.get(svix_id=single)
        sweep = in_thread(noting_session(lambda: apply.event_apply(event_id=event.pk), pids), swept)
        until_done_or_waiting(sweep, waiters=2)
    batch.join(30)
    sweep.join(30)
    until_sessions_gone(pids)

    assert deadlocks_so_far() == before
    assert batched == [(len(batch_ids), len(batch_ids))]
    assert swept == ["applied"]
    states = dict(WebhookEvent.objects.values_list("svix_id", "state"))
    assert {states[svix_id] for svix_id in [*batch_ids, single]} == {"applied"}
    assert dict(Suppression.objects.filter(tenant=tenant_a).values_list("address", "reason")) == {
        A: "bounced",
        B: "bounced",
        C: "bounced",
    }
