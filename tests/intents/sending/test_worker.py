"""A claimed batch is re-checked, sent and recorded together, but each intent keeps its own fate.

The worker commits a batch's attempt rows in one transaction and records its accepted sends in
another; these tests inject a fault into one intent of a batch and count what the sandbox received
for every intent.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest

from config.clock import db_now
from intents import sending
from intents.models import ProviderThrottle, SendAttempt, SendIntent, Suppression
from intents.services.suppressions import suppressions_record
from mailboxes.crypto import SecretUnreadable

pytestmark = pytest.mark.django_db(transaction=True)

State = SendIntent.State


def _sends(live, intent) -> int:
    return len(live.sandbox.ledger(idempotency_key=intent.idempotency_key))


def _batch(live, n: int) -> tuple[list[SendIntent], list[sending.Claim]]:
    intents = [live.approved(to=[f"customer{i}@example.com"]) for i in range(n)]
    claims = sending.intent_claim(worker="batch", limit=n)
    assert sorted(c.intent_id for c in claims) == sorted(i.pk for i in intents)
    return intents, claims


def test_a_check_failing_for_one_intent_stops_only_that_one(live):
    intents, claims = _batch(live, 4)
    # Suppressed after approval, before the batch's re-check.
    Suppression.objects.create(
        tenant=live.tenant, address="customer2@example.com", reason=Suppression.Reason.MANUAL
    )

    states = sending.execute_claims(claims)

    by_id = dict(zip([c.intent_id for c in claims], states, strict=True))
    assert [by_id[i.pk] for i in intents] == [
        State.ACCEPTED,
        State.ACCEPTED,
        State.BLOCKED,
        State.ACCEPTED,
    ]
    assert [_sends(live, i) for i in intents] == [1, 1, 0, 1]
    blocked = SendIntent.objects.get(pk=intents[2].pk)
    assert blocked.last_error_code == "recipient_suppressed"
    assert not SendAttempt.objects.filter(intent=blocked).exists()
    for intent in (intents[0], intents[1], intents[3]):
        intent.refresh_from_db()
        assert intent.provider_message_id
        assert intent.events.filter(action="intent.accepted", to_state=State.ACCEPTED).count() == 1


def test_a_sub_address_of_an_address_suppressed_after_approval_is_stopped_before_the_call(live):
    """ana+billing@ reaches ana@'s mailbox: her complaint covers it. A suppressed sub-address
    covers only itself: carl+news@'s bounce leaves carl@ and carl+other@ to be sent to."""
    to = ["ana+billing@example.com", "carl@example.com", "carl+other@example.com"]
    intents = [live.approved(to=[address]) for address in to]
    suppressions_record(
        tenant_id=live.tenant.pk,
        addresses=["ana@example.com", "carl+news@example.com"],
        reason=Suppression.Reason.COMPLAINED,
        source="evt_1",
    )
    claims = sending.intent_claim(worker="batch", limit=3)

    states = sending.execute_claims(claims)

    by_id = dict(zip([c.intent_id for c in claims], states, strict=True))
    assert [by_id[i.pk] for i in intents] == [State.BLOCKED, State.ACCEPTED, State.ACCEPTED]
    assert [_sends(live, i) for i in intents] == [0, 1, 1]
    assert live.sandbox.ledger(address="ana+billing@example.com") == []
    assert sorted(s["to"][0] for s in live.sandbox.ledger()) == sorted(to[1:])
    blocked = SendIntent.objects.get(pk=intents[0].pk)
    assert blocked.last_error_code == "recipient_suppressed"
    assert blocked.last_error_detail == (
        "ana+billing@example.com is on this tenant's suppression list as ana@example.com "
        "(complained): a sub-address reaches the same mailbox"
    )
    assert not SendAttempt.objects.filter(intent=blocked).exists()


def test_a_lease_lost_during_the_calls_fences_only_that_intent(live, settings):
    intents, claims = _batch(live, 3)
    # The calls are slowed to stay in flight while the lease is taken, not to time out: the
    # suite's 1 s read timeout left 0.4 s for a loaded machine, and a call ran out (uncertain).
    settings.AGENTMAIL_READ_TIMEOUT = 10
    live.sandbox.config(latency_ms=600)
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(states=sending.execute_claims(claims)))
    runner.start()
    # While the calls are in flight, the sweep and another worker take the second intent over.
    deadline = time.monotonic() + 10
    while not SendAttempt.objects.filter(intent_id=intents[1].pk).exists():
        assert time.monotonic() < deadline, "the batch never began"
        time.sleep(0.01)
    new_token = uuid.uuid4()
    SendIntent.objects.filter(pk=intents[1].pk).update(lease_token=new_token)
    runner.join(30)
    live.sandbox.config(latency_ms=0)

    by_id = dict(zip([c.intent_id for c in claims], result["states"], strict=True))
    assert [by_id[i.pk] for i in intents] == [State.ACCEPTED, "fenced", State.ACCEPTED]
    assert [_sends(live, i) for i in intents] == [1, 1, 1]
    taken = SendIntent.objects.get(pk=intents[1].pk)
    assert (taken.state, taken.lease_token, taken.provider_message_id) == (
        State.SENDING,
        new_token,
        "",
    )
    assert SendAttempt.objects.get(intent=taken).outcome == SendAttempt.Outcome.FENCED


def test_bad_data_in_one_intent_does_not_hold_back_the_others(live, mailbox_factory):
    good = [live.approved(to=[f"customer{i}@example.com"]) for i in range(2)]
    broken_box = mailbox_factory(live.tenant)
    bad = live.approved(mailbox=broken_box)
    # Its sealed key no longer opens (say, a key removed from SECRET_ENCRYPTION_KEYS too early).
    sealed = broken_box.api_key_sealed
    broken_box.api_key_sealed = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    broken_box.save(update_fields=["api_key_sealed"])
    claims = sending.intent_claim(worker="batch", limit=3)
    assert len(claims) == 3

    with pytest.raises(SecretUnreadable):
        sending.execute_claims(claims)

    assert [_sends(live, i) for i in good] == [1, 1]
    assert _sends(live, bad) == 0
    assert {SendIntent.objects.get(pk=i.pk).state for i in good} == {State.ACCEPTED}
    # No attempt row, so the sweep will give it back to the queue when its lease expires.
    assert SendIntent.objects.get(pk=bad.pk).state == State.SENDING
    assert not SendAttempt.objects.filter(intent_id=bad.pk).exists()


def test_a_503_with_retry_after_holds_the_replay_until_then(live):
    """The replay of a send answered 503 waits at least the Retry-After the service gave, then
    sends once with the same key."""
    live.sandbox.fault("send", "503_before", retry_after=600, times=1)
    intent = live.approved()
    before = db_now()

    assert sending.run_once(worker="w", limit=1, intent_id=intent.pk) == 1

    intent.refresh_from_db()
    assert intent.state == State.UNCERTAIN
    assert intent.next_attempt_at >= before + timedelta(seconds=600)
    assert sending.run_once(worker="w", limit=1, intent_id=intent.pk) == 0
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=db_now())
    assert sending.run_once(worker="w", limit=1, intent_id=intent.pk) == 1
    assert SendIntent.objects.get(pk=intent.pk).state == State.ACCEPTED
    assert _sends(live, intent) == 1


@pytest.mark.parametrize("retry_after", [10**9, 10**12, 10**18])
def test_a_429_with_a_huge_retry_after_is_recorded_and_gives_up(live, retry_after):
    """A 429 certainly did not send. A Retry-After beyond the safe window fails the intent
    (max_age) and pauses the key for a day at most. It raised OverflowError out of run_once,
    leaving the intent sending with a pending attempt (the sweep then made it uncertain), or
    paused the key for decades."""
    live.sandbox.fault("send", "429", retry_after=retry_after, times=1)
    intent = live.approved()

    assert sending.run_once(worker="w", limit=1, intent_id=intent.pk) == 1

    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == (State.FAILED, "max_age")
    assert SendAttempt.objects.get(intent=intent).outcome != SendAttempt.Outcome.PENDING
    assert ProviderThrottle.objects.get().refilled_at <= db_now() + timedelta(days=1)
    assert len(live.sandbox.requests(idempotency_key=intent.idempotency_key)) == 1
    assert _sends(live, intent) == 0


def test_a_batch_claimed_before_the_key_was_refused_makes_no_call_and_keeps_its_attempts(live):
    """Another worker's call finds the mailbox's key refused while this batch is claimed: the
    batch's re-check gives each lease back unsent (no attempt row, the claim's count undone),
    queued as before; nothing is called with the refused key."""
    from mailboxes.key_health import mailbox_key_refused

    intents, claims = _batch(live, 2)
    assert mailbox_key_refused(
        mailbox_id=live.mailbox.pk,
        api_key_id=live.mailbox.provider_api_key_id,
        detail="401 unknown_api_key: Unknown or revoked API key",
    )

    assert sending.execute_claims(claims) == [State.QUEUED, State.QUEUED]
    rows = SendIntent.objects.filter(pk__in=[i.pk for i in intents])
    assert sorted(rows.values_list("state", "attempts")) == [(State.QUEUED, 0)] * 2
    assert not SendAttempt.objects.filter(intent__in=intents).exists()
    assert [live.sandbox.requests(idempotency_key=i.idempotency_key) for i in intents] == [[], []]


def test_a_send_to_its_own_mailbox_approved_before_the_rule_is_blocked_before_the_call(live):
    """A reply whose recipients name the sending mailbox would come back into its inbox and
    may start the agent again. One approved before drafts refused it stops at the pre-call
    check, under its own code."""
    from intents.hashing import version_hash

    intent = live.approved(to=["customer@example.com"])
    version = intent.draft_version
    version.cc = [live.mailbox.address]
    version.content_hash = version_hash(version)
    version.save(update_fields=["cc", "content_hash"])
    SendIntent.objects.filter(pk=intent.pk).update(
        recipients=version.recipients, content_hash=version.content_hash
    )
    claims = sending.intent_claim(worker="own", limit=1)

    assert sending.execute_claims(claims) == [State.BLOCKED]
    assert SendIntent.objects.get(pk=intent.pk).last_error_code == "recipient_own_mailbox"
    assert _sends(live, intent) == 0
