"""A provider message id is recorded only if it fits what the ledger stores whole: 998 bytes of
UTF-8 (``webhooks.models.MESSAGE_ID_BYTES``), not 998 characters. An id of 600 accented letters
(1,215 bytes) was recorded as it came, while its delivery events were stored under the id cut to
998 bytes (``normalize.bounded_id``), which no intent had recorded: they waited for ever. One of
990 three-byte letters (2,985 bytes) was more than a PostgreSQL index entry holds, and recording
it raised on every round. Such an answer is uncertain, with a reason that says so, and the
replay with the same key gets the real id; a person resolving a send by hand is refused it
(found by probe 7, webhooks and delivery events)."""

from __future__ import annotations

import pytest
from django.db.models.functions import Now

from intents import errors, sending, services
from intents.models import SendIntent
from tests.intents.helpers import set_state
from webhooks.models import MESSAGE_ID_BYTES

LONGER_IN_BYTES = "<" + "é" * 600 + "@agentmail.to>"
# Letters that do not repeat: PostgreSQL compresses an index entry before it measures it.
PAST_AN_INDEX_ENTRY = "<" + "".join(chr(0x4E00 + i * 7919 % 20000) for i in range(980)) + "@x.to>"


def _step() -> None:
    sending.run_once(worker="w", limit=1)


def test_the_ids_used_here_are_short_in_characters_and_long_in_bytes():
    # The adapter's bound is the ledger's (webhooks.models.MESSAGE_ID_BYTES is that figure).
    assert len(LONGER_IN_BYTES) < MESSAGE_ID_BYTES < len(LONGER_IN_BYTES.encode())
    assert len(PAST_AN_INDEX_ENTRY) < MESSAGE_ID_BYTES < 2_704 < len(PAST_AN_INDEX_ENTRY.encode())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("message_id", [LONGER_IN_BYTES, PAST_AN_INDEX_ENTRY])
def test_an_answer_with_a_message_id_longer_in_bytes_than_recorded_is_uncertain(live, message_id):
    intent = live.approved()
    live.sandbox.fault("sends", "json_2xx_after", answer={"message_id": message_id})

    _step()
    intent.refresh_from_db()
    assert (intent.state, intent.provider_message_id) == ("uncertain", "")
    assert intent.last_error_code == "malformed_response"
    assert f"{len(message_id.encode())} bytes" in intent.last_error_detail

    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
    _step()
    intent.refresh_from_db()
    [sent] = live.sandbox.ledger(idempotency_key=intent.idempotency_key)
    assert (intent.state, intent.provider_message_id) == ("accepted", sent["message_id"])


@pytest.mark.django_db
def test_resolving_by_hand_refuses_a_message_id_longer_in_bytes_than_recorded(
    tenant_a, intent, approver
):
    set_state(intent, "needs_attention")

    with pytest.raises(errors.InvalidInput) as refused:
        services.intent_resolve_accepted(
            tenant=tenant_a,
            intent_id=intent.pk,
            actor=approver,
            provider_message_id=LONGER_IN_BYTES,
            evidence="The customer's copy",
        )

    assert refused.value.code == "message_id_invalid"
    assert "1215 bytes" in refused.value.message
    intent.refresh_from_db()
    assert (intent.state, intent.provider_message_id) == ("needs_attention", "")
