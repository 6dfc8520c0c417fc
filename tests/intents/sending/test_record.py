"""A 2xx from AgentMail is proof of a send only if its message id can be ours.

The sandbox answers well-formed but surprising bodies (faults ``json_2xx_before``: an answer
made up without processing anything; ``json_2xx_after``: the real send, its answer altered). Each
test counts what the provider really accepted for the intent's key (its ledger).
"""

from __future__ import annotations

import pytest
from django.db.models.functions import Now

from intents import sending
from intents.models import IntentEvent, SendIntent
from tests.factories import approve_new_draft

pytestmark = pytest.mark.django_db(transaction=True)


def _sends(live, intent) -> list[dict]:
    return live.sandbox.ledger(idempotency_key=intent.idempotency_key)


def _step() -> None:
    sending.run_once(worker="w", limit=1)


def _step_when_due(intent) -> None:
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
    _step()


def _sent_in_other_tenant(tenant_b, member_of, mailbox_factory) -> SendIntent:
    intent = approve_new_draft(
        tenant_b,
        mailbox_factory(tenant_b),
        member_of(tenant_b, "approver").user,
        to=["someone@example.com"],
        subject="Tenant B's reply",
        text="Tenant B's text.",
    )
    _step()
    intent.refresh_from_db()
    assert intent.state == "accepted"
    return intent


@pytest.mark.parametrize("owner", ["same_tenant", "other_tenant"])
def test_an_answer_naming_a_message_another_intent_recorded_is_not_proof(
    live, owner, tenant_b, member_of, mailbox_factory
):
    """AgentMail answers 200 with a message id another intent already recorded (here, a made-up
    answer: nothing was processed). Taken as proof, the reply was marked sent and never went out,
    and that message's delivery events were the other intent's. Uncertain instead: the replay
    with the same key sends it once, under its own id."""
    if owner == "same_tenant":
        earlier = live.approved(to=["first@example.com"])
        _step()
        earlier.refresh_from_db()
    else:
        earlier = _sent_in_other_tenant(tenant_b, member_of, mailbox_factory)
    intent = live.approved(text="The second reply.")
    taken = {"message_id": earlier.provider_message_id, "thread_id": earlier.provider_thread_id}
    live.sandbox.fault("sends", "json_2xx_before", answer=taken)

    _step()
    intent.refresh_from_db()
    assert (intent.state, intent.provider_message_id, _sends(live, intent)) == ("uncertain", "", [])
    assert intent.last_error_code == "message_id_taken"

    _step_when_due(intent)
    intent.refresh_from_db()
    [sent] = _sends(live, intent)
    assert (intent.state, intent.provider_message_id) == ("accepted", sent["message_id"])
    assert sent["message_id"] != earlier.provider_message_id
    assert SendIntent.objects.filter(provider_message_id=earlier.provider_message_id).count() == 1


@pytest.mark.parametrize(
    "answer",
    [
        {"message_id": "<" + "x" * 2000 + "@agentmail.to>"},
        {"message_id": "<nul\x00byte@agentmail.to>"},
    ],
    ids=["message_id_too_long", "message_id_with_nul"],
)
def test_a_message_id_we_cannot_store_is_uncertain_then_replayed_once(live, answer):
    """A processed send answered with a message id the database cannot hold (longer than a
    header line, or with a NUL): recording it raised, the worker's round failed and the intent
    sat in `sending` until its lease ran out; a provider that always answered so made every
    round fail. Uncertain instead, and the replay with the same key gets the real answer."""
    intent = live.approved()
    live.sandbox.fault("sends", "json_2xx_after", answer=answer)

    _step()
    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == ("uncertain", "malformed_response")
    assert len(_sends(live, intent)) == 1

    _step_when_due(intent)
    intent.refresh_from_db()
    [sent] = _sends(live, intent)
    assert (intent.state, intent.provider_message_id) == ("accepted", sent["message_id"])


def test_a_thread_id_we_cannot_store_does_not_stop_the_proof(live):
    """The message id is good, the thread id is not (a NUL): the send is accepted with its
    message id, and the unusable thread id is left out rather than failing the record."""
    intent = live.approved()
    live.sandbox.fault("sends", "json_2xx_after", answer={"thread_id": "thread\x00id"})

    _step()
    intent.refresh_from_db()
    [sent] = _sends(live, intent)
    assert (intent.state, intent.provider_message_id) == ("accepted", sent["message_id"])
    assert intent.provider_thread_id == ""
    assert IntentEvent.objects.filter(intent=intent, action="intent.accepted").count() == 1


def test_a_key_revoked_at_agentmail_ends_each_send_once_and_nothing_is_retried(live):
    """The mailbox's key is revoked at AgentMail after a send whose answer was lost: the replay
    is refused 401, so the first call's fate is unknown and a person decides (the send did go
    out: the ledger holds it); a fresh send is refused 401 and fails. One call each after the
    revocation, and nothing is due again."""
    from mailboxes import provider

    lost = live.approved()
    live.sandbox.fault("sends", "drop_after")
    _step()
    lost.refresh_from_db()
    assert (lost.state, len(_sends(live, lost))) == ("uncertain", 1)
    provider.delete_inbox_key(
        inbox_id=live.mailbox.inbox_id, api_key_id=live.mailbox.provider_api_key_id
    )

    _step_when_due(lost)
    fresh = live.approved(text="Sent after the key was revoked.")
    _step()
    lost.refresh_from_db()
    fresh.refresh_from_db()
    assert (lost.state, lost.last_error_code) == ("needs_attention", "unknown_api_key")
    assert (fresh.state, fresh.last_error_code) == ("failed", "unknown_api_key")
    assert (len(_sends(live, lost)), _sends(live, fresh)) == (1, [])

    SendIntent.objects.update(next_attempt_at=Now())
    assert sending.run_once(worker="w", limit=10) == 0
    assert len(live.sandbox.requests(idempotency_key=lost.idempotency_key)) == 2
    assert len(live.sandbox.requests(idempotency_key=fresh.idempotency_key)) == 1
