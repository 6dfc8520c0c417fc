"""A batch's received messages lock their threads' rows in the order everyone else locks them:
the pending drafts of all the batch's threads in id order, then their queued sends in id order,
before the first message is applied (``intents.services.intents.intents_lock_threads``).

Applied one message at a time, each message locked its own thread's drafts and sends, so a
batch took the sends of two threads in the order its messages came, not in id order: with a
change that stops sends (which holds them in id order, ``intents.sending.stops``) or with a
second batch whose messages came the other way round, each held a row the other wanted next,
and PostgreSQL cancelled one of them (an admin's save, or a whole batch).
"""

from __future__ import annotations

import pytest
from django.db import transaction

from intents.models import Draft, IntentEvent, SendIntent
from mailboxes.provisioning import mailbox_set_status
from tests.intents.helpers import (
    blocked_on_a_lock,
    deadlocks_so_far,
    in_thread,
    noting_session,
    until_done_or_waiting,
    until_sessions_gone,
)
from tests.webhooks.conftest import new_svix_id, received_payload
from webhooks.services import applier

pytestmark = pytest.mark.django_db(transaction=True)


def _customer_writes(client, hook, box, thread_id: str) -> str:
    svix_id = new_svix_id()
    hook.post(client, received_payload(box, thread_id=thread_id), svix_id=svix_id, apply=False)
    return svix_id


def _pending(box, thread_id: str) -> Draft:
    """A reply in review in the thread (to the customer's message that opened it)."""
    return Draft.objects.create(
        tenant=box.tenant,
        mailbox=box,
        thread_id=thread_id,
        in_reply_to=f"<opened-{thread_id}@customer.test>",
        status=Draft.Status.PENDING,
    )


def _locked(draft: Draft) -> None:
    """Hold the draft's row in the caller's transaction (a person editing it at that moment)."""
    list(Draft.objects.select_for_update().filter(pk=draft.pk).values_list("pk"))


def test_a_batch_holding_two_threads_replies_does_not_deadlock_with_a_mailbox_disabled(
    client, tenant_a, member_of, hook_for, mailbox_row, intent_row
):
    """The customer wrote again in two threads; the batch held the first thread's reply (the
    higher id) and then waited for the second thread's draft, while the admin's disable held
    the lower reply and waited for the higher one."""
    admin = member_of(tenant_a, "admin").user
    hook = hook_for(tenant_a)
    box = mailbox_row(tenant_a)
    lower = intent_row(box, thread_id="thr_2", message_id=None, state="queued")
    higher = intent_row(box, thread_id="thr_1", message_id=None, state="queued")
    assert lower.pk < higher.pk
    held_up = _pending(box, "thr_2")
    _customer_writes(client, hook, box, "thr_1")
    _customer_writes(client, hook, box, "thr_2")
    before = deadlocks_so_far()

    batched: list = []
    disabled: list = []
    pids: list[int] = []
    with transaction.atomic():
        _locked(held_up)
        batch = in_thread(noting_session(applier.events_apply_batch, pids), batched)
        assert blocked_on_a_lock(), "the batch never reached the second thread's draft"
        disable = in_thread(
            noting_session(
                lambda: mailbox_set_status(
                    tenant=tenant_a, mailbox_id=box.pk, status="disabled", actor=admin
                ),
                pids,
            ),
            disabled,
        )
        until_done_or_waiting(disable, waiters=2)
    batch.join(30)
    disable.join(30)
    until_sessions_gone(pids)

    assert deadlocks_so_far() == before
    assert not isinstance(disabled[0], Exception), disabled[0]
    assert batched == [(2, 2)]
    for intent in (lower, higher):
        intent.refresh_from_db()
        assert intent.held_reason.startswith("customer wrote again")
    assert IntentEvent.objects.filter(action="intent.held").count() == 2
    assert set(
        SendIntent.objects.filter(pk__in=[lower.pk, higher.pk]).values_list("state", flat=True)
    ) == {"queued"}


def test_two_batches_whose_messages_came_in_opposite_thread_orders_do_not_deadlock(
    client, tenant_a, hook_for, mailbox_row
):
    """One batch took the threads 1, 3, 2 and the next 2, 1: the first held thread 1's draft
    and waited for thread 3's (held by a person), the second held thread 2's and waited for
    thread 1's; once the person let go, the first wanted thread 2's."""
    hook = hook_for(tenant_a)
    box = mailbox_row(tenant_a)
    drafts = {thread: _pending(box, thread) for thread in ("thr_1", "thr_2", "thr_3")}
    for thread in ("thr_1", "thr_3", "thr_2", "thr_2", "thr_1"):
        _customer_writes(client, hook, box, thread)
    before = deadlocks_so_far()

    first: list = []
    second: list = []
    pids: list[int] = []
    with transaction.atomic():
        _locked(drafts["thr_3"])
        one = in_thread(noting_session(lambda: applier.events_apply_batch(limit=3), pids), first)
        assert blocked_on_a_lock(), "the first batch never reached thread 3's draft"
        two = in_thread(noting_session(lambda: applier.events_apply_batch(limit=2), pids), second)
        until_done_or_waiting(two, waiters=2)
    one.join(30)
    two.join(30)
    until_sessions_gone(pids)

    assert deadlocks_so_far() == before
    assert first == [(3, 3)]
    assert second == [(2, 2)]
