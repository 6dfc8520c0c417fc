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


def test_a_key_revoked_at_agentmail_holds_the_mailbox_and_keeps_an_uncertain_send_unknown(
    live, member_of
):
    """The mailbox's key is revoked at AgentMail after a send whose answer was lost. The replay
    is refused 401: the refusal is the key's, so the mailbox is marked (audited) and the send
    stays uncertain, the fact that its first call may have sent kept (it did: the ledger holds
    it); it used to go to a person, and a fresh send to ``failed``. The fresh send approved
    after the refusal is held, queued and never called; nothing is due, no worker calls the
    refused key again, and an admin's check still finds it refused (one read call)."""
    from mailboxes import provider
    from mailboxes.key_health import mailbox_key_check
    from mailboxes.models import Mailbox
    from mailboxes.provisioning import ProvisioningError
    from tenants.models import AuditEvent

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
    mailbox = Mailbox.objects.get(pk=live.mailbox.pk)
    assert mailbox.key_refused and "unknown_api_key" in mailbox.key_refused_detail
    assert (lost.state, lost.last_error_code) == ("uncertain", "key_refused")
    assert (fresh.state, fresh.attempts) == ("queued", 0)
    assert (len(_sends(live, lost)), _sends(live, fresh)) == (1, [])
    assert AuditEvent.objects.filter(action="mailbox.key_refused").count() == 1

    SendIntent.objects.update(next_attempt_at=Now())
    assert sending.run_once(worker="w", limit=10) == 0
    assert sending.seconds_until_next_due() is None
    assert len(live.sandbox.requests(idempotency_key=lost.idempotency_key)) == 2
    assert live.sandbox.requests(idempotency_key=fresh.idempotency_key) == []

    admin = member_of(live.tenant, "admin").user
    checks_before = len(live.sandbox.requests(route="list_messages"))
    with pytest.raises(ProvisioningError, match="still refuses"):
        mailbox_key_check(tenant=live.tenant, mailbox_id=mailbox.pk, actor=admin)
    assert len(live.sandbox.requests(route="list_messages")) == checks_before + 1
    assert Mailbox.objects.get(pk=mailbox.pk).key_refused


def test_queued_sends_on_a_refused_key_make_one_call_then_each_goes_once_after_a_check(
    live, member_of
):
    """Three approved replies, and AgentMail refuses the mailbox's key (401 unknown_api_key):
    the first call marks the mailbox, and no other call follows (one, not three); nothing fails.
    Once the key works again and an admin checks it (one read), the three go out, each once,
    each with the idempotency key it was given at approval."""
    from mailboxes.key_health import mailbox_key_check
    from tenants.models import AuditEvent

    replies = [live.approved(text=f"Reply {n}.") for n in range(3)]
    keys = [r.idempotency_key for r in replies]
    live.sandbox.fault("sends", "401_unknown_key", times=0)

    _step()
    assert sending.run_once(worker="w", limit=10) == 0
    calls = [len(live.sandbox.requests(idempotency_key=k)) for k in keys]
    sent = [live.sandbox.ledger(idempotency_key=k) for k in keys]
    assert (sorted(calls), sent) == ([0, 0, 1], [[], [], []])
    assert sorted(SendIntent.objects.values_list("state", flat=True)) == ["queued"] * 3
    live.mailbox.refresh_from_db()
    assert live.mailbox.key_refused

    live.sandbox.clear_faults()
    admin = member_of(live.tenant, "admin").user
    assert not mailbox_key_check(
        tenant=live.tenant, mailbox_id=live.mailbox.pk, actor=admin
    ).key_refused
    assert sending.run_once(worker="w", limit=10) == 3

    for reply, key in zip(replies, keys, strict=True):
        reply.refresh_from_db()
        [sent] = live.sandbox.ledger(idempotency_key=key)
        assert (reply.state, reply.idempotency_key) == ("accepted", key)
        assert reply.provider_message_id == sent["message_id"]
    assert sum(len(live.sandbox.requests(idempotency_key=k)) for k in keys) == 4
    assert list(
        AuditEvent.objects.filter(action__startswith="mailbox.key_r")
        .values_list("action", "actor")
        .order_by("id")
    ) == [("mailbox.key_refused", None), ("mailbox.key_restored", admin.pk)]


def test_sends_held_for_a_deleted_key_go_out_once_each_with_the_key_that_replaces_it(
    live, member_of
):
    """The mailbox's key is deleted at AgentMail: the first call marks the mailbox and the three
    replies wait, uncalled; checking the key again cannot help. Once an admin replaces the key,
    the three go out, each once, with the new key and the idempotency key given at approval."""
    from mailboxes import provider
    from mailboxes.key_health import mailbox_key_check, mailbox_key_replace
    from mailboxes.provisioning import ProvisioningError

    replies = [live.approved(text=f"Reply {n}.") for n in range(3)]
    keys = [r.idempotency_key for r in replies]
    old_id = live.mailbox.provider_api_key_id
    provider.delete_inbox_key(inbox_id=live.mailbox.inbox_id, api_key_id=old_id)
    _step()
    assert sending.run_once(worker="w", limit=10) == 0
    assert [live.sandbox.ledger(idempotency_key=k) for k in keys] == [[], [], []]
    admin = member_of(live.tenant, "admin").user
    with pytest.raises(ProvisioningError, match="replace the key"):
        mailbox_key_check(tenant=live.tenant, mailbox_id=live.mailbox.pk, actor=admin)

    new_id = mailbox_key_replace(
        tenant=live.tenant, mailbox_id=live.mailbox.pk, actor=admin
    ).provider_api_key_id
    assert sending.run_once(worker="w", limit=10) == 3

    for reply, key in zip(replies, keys, strict=True):
        reply.refresh_from_db()
        [sent] = live.sandbox.ledger(idempotency_key=key)
        assert (reply.state, reply.provider_message_id) == ("accepted", sent["message_id"])
        assert sent["api_key_id"] == new_id != old_id


@pytest.mark.parametrize("state", ["queued", "uncertain"])
def test_a_send_prepared_with_the_replaced_key_is_not_the_new_keys_refusal(live, member_of, state):
    """A worker prepared a send with the old key; the key is replaced (the old one deleted at
    AgentMail) before its call, which AgentMail refuses 401. That refusal is the old key's: the
    mailbox is not marked, the send stays as it was (queued, or uncertain when its first call may
    have sent: it did, the ledger holds it) and goes out with the new key, once in all."""
    from mailboxes import provider
    from mailboxes.key_health import mailbox_key_replace
    from mailboxes.models import Mailbox
    from tenants.models import AuditEvent

    intent = live.approved()
    if state == "uncertain":
        live.sandbox.fault("sends", "drop_after")
        _step()
        SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
        [claim] = sending.intent_claim_uncertain(worker="w", limit=1)
    else:
        [claim] = sending.intent_claim(worker="w", limit=1)
    prepared = sending.intent_begin_attempt(claim)
    admin = member_of(live.tenant, "admin").user
    mailbox_key_replace(tenant=live.tenant, mailbox_id=live.mailbox.pk, actor=admin)

    answer = provider.send_message(api_key=prepared.api_key, request=prepared.request)
    assert answer.http_status == 401
    assert sending.intent_record_result(claim, prepared, answer) == state
    assert not Mailbox.objects.get(pk=live.mailbox.pk).key_refused
    assert not AuditEvent.objects.filter(action="mailbox.key_refused").exists()

    _step_when_due(intent)
    intent.refresh_from_db()
    assert intent.state == "accepted"
    assert len(_sends(live, intent)) == 1
