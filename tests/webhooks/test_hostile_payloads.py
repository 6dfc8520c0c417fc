"""Signed deliveries whose content is hostile or broken: inbound mail is outsiders' text, so the
receiver stores it safely and answers 2xx (or refuses it whole with a 400), never a 5xx."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from intents import errors
from intents import services as intent_services
from intents.models import Draft, IntentEvent
from tests.webhooks.conftest import delivery_payload, new_svix_id, received_payload
from webhooks import selectors
from webhooks.models import InboundMessage, RecipientDelivery, WebhookEvent
from webhooks.normalize import normalize
from webhooks.services import apply

REPLACEMENT = "\ufffd"


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def mailbox(tenant_a, mailbox_row):
    return mailbox_row(tenant_a)


@pytest.mark.parametrize(
    "bad", ["\x00", "\ud800", "\udfff", "\udc00\ud800"], ids=["NUL", "high", "low", "reversed"]
)
def test_received_mail_with_nul_or_lone_surrogates_is_stored_applied_and_holds(
    client, hook, mailbox, intent_row, bad
):
    queued = intent_row(mailbox, thread_id="thr_1", message_id=None, state="queued")
    payload = received_payload(
        mailbox,
        thread_id="thr_1",
        message_id="<m1@customer.test>",
        subject=f"Refund{bad}now",
        sender=f"Jane{bad} <jane@customer.test>",
        preview=f"please{bad}cancel",
        text=f"body{bad}" * 10,
    )
    payload["message"]["labels"] = ["received", f"x{bad}"]
    payload["message"][f"x-key{bad}"] = "value"

    response = hook.post(client, payload)

    event = WebhookEvent.objects.get()
    inbound = InboundMessage.objects.get()
    queued.refresh_from_db()
    assert response.status_code == 200
    # Stored first (the answer), then applied by the batch applier the post drove.
    assert response.json()["state"] == "pending"
    assert event.state == "applied"
    assert inbound.subject == f"Refund{REPLACEMENT * len(bad)}now"
    assert inbound.sender == f"Jane{REPLACEMENT * len(bad)} <jane@customer.test>"
    assert inbound.preview == f"please{REPLACEMENT * len(bad)}cancel"
    assert event.payload["message"]["subject"] == inbound.subject
    assert event.payload["message"]["labels"] == ["received", f"x{REPLACEMENT * len(bad)}"]
    # subject, sender (twice: the thread repeats it), preview, ten in the text, a label, a key
    assert event.payload["replaced_characters"] == 16 * len(bad)
    assert queued.held_reason.startswith("customer wrote again")
    assert IntentEvent.objects.filter(intent=queued, action="intent.held").count() == 1
    assert selectors.inbound_for_thread(
        tenant=mailbox.tenant, mailbox=mailbox, thread_id="thr_1"
    ) == [inbound]


def test_a_delivery_event_with_nul_in_its_object_is_stored_and_applied(
    client, hook, mailbox, intent_row
):
    intent = intent_row(mailbox, to=["jane@customer.test"])
    payload = delivery_payload("bounced", intent)
    payload["bounce"]["sub_type"] = "General\x00\ud83d"
    payload["bounce"]["diagnostic\x00"] = "550\x00"

    response = hook.post(client, payload)

    event = WebhookEvent.objects.get()
    assert response.status_code == 200
    assert event.state == "applied"
    assert event.payload["bounce"]["sub_type"] == "General" + REPLACEMENT * 2
    assert event.payload["bounce"]["diagnostic" + REPLACEMENT] == "550" + REPLACEMENT
    assert RecipientDelivery.objects.get(intent=intent).state == "bounced"


def test_an_event_left_pending_with_replaced_characters_applies_on_replay(client, hook, mailbox):
    payload = received_payload(mailbox, thread_id="thr_1", subject="Hi\x00there")
    response = hook.post(client, payload)
    event = WebhookEvent.objects.get()
    InboundMessage.objects.all().delete()
    WebhookEvent.objects.filter(pk=event.pk).update(state="pending", applied_at=None)

    apply.events_replay_pending()

    assert response.status_code == 200
    assert WebhookEvent.objects.get().state == "applied"
    assert InboundMessage.objects.get().subject == "Hi" + REPLACEMENT + "there"


def _signed_post(client, hook, body: str):
    return hook.post_raw(client, body.encode(), hook.headers(body, svix_id=new_svix_id()))


@pytest.mark.parametrize("depth", [100_000, 1_000, 40])
def test_a_deeply_nested_signed_body_is_400_and_stores_nothing(client, hook, mailbox, depth):
    event = received_payload(mailbox, thread_id="thr_1")
    nested = "[" * depth + "1" + "]" * depth
    body = json.dumps(event)[:-1] + f', "extra": {nested}}}'

    response = _signed_post(client, hook, body)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["detail"] == "body_too_deep"
    assert WebhookEvent.objects.count() == 0
    assert InboundMessage.objects.count() == 0


@pytest.mark.parametrize("number", ["1e400", "-1e999", "NaN", "Infinity"])
def test_a_signed_body_with_a_number_jsonb_cannot_hold_is_400_and_stores_nothing(
    client, hook, mailbox, number
):
    """Valid JSON to Python (1e400 reads as inf), not to PostgreSQL: the ledger insert failed
    with a 500, and Svix retried it for a day."""
    event = received_payload(mailbox, thread_id="thr_1")
    body = json.dumps(event)[:-1] + f', "size": {number}}}'

    response = _signed_post(client, hook, body)

    assert response.status_code == 400
    assert response.json()["detail"] == "number_not_finite"
    assert WebhookEvent.objects.count() == 0
    assert InboundMessage.objects.count() == 0


def test_a_signed_body_naming_a_key_twice_is_400_and_stores_nothing(client, hook, mailbox):
    """The signature covers both values of a key given twice; Python's json kept the last, so the
    event was stored and applied with the second sender (or inbox, message id) while any reader
    taking the first, as many parsers do, saw another event."""
    event = received_payload(mailbox, thread_id="thr_1", sender="Jane <jane@customer.test>")
    body = json.dumps(event).replace('"from": ', '"from": "Boss <boss@acme.test>", "from": ', 1)

    response = _signed_post(client, hook, body)

    assert response.status_code == 400
    assert response.json()["detail"] == "duplicate_key"
    assert WebhookEvent.objects.count() == 0
    assert InboundMessage.objects.count() == 0


def test_a_real_shaped_body_is_well_within_the_depth_limit(client, hook, mailbox):
    event = received_payload(mailbox, thread_id="thr_1")
    event["message"]["headers"] = {"x": [{"y": [{"z": ["deep"]}]}]}

    assert _signed_post(client, hook, json.dumps(event)).status_code == 200


@pytest.mark.parametrize("svix_id", ["msg_\x00abc", "msg_\x7fabc", "msg_\x1babc"], ids=repr)
def test_a_signed_delivery_with_a_control_character_in_its_id_is_400(
    client, hook, mailbox, svix_id
):
    body = json.dumps(received_payload(mailbox, thread_id="thr_1"))

    response = hook.post_raw(client, body.encode(), hook.headers(body, svix_id=svix_id))

    assert response.status_code == 400
    assert response.json()["detail"] == "malformed_svix_id"
    assert WebhookEvent.objects.count() == 0


@pytest.mark.parametrize(
    "timestamp",
    ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"],
    ids=["year 1 east of UTC", "year 9999 west of UTC"],
)
def test_a_timestamp_beyond_what_python_reads_back_falls_back_to_the_time_of_receipt(
    client, hook, mailbox, timestamp
):
    """PostgreSQL stores these as year 0 or year 10000, which no later read of the row survives."""
    payload = received_payload(mailbox, thread_id="thr_1", timestamp=timestamp)

    response = hook.post(client, payload)

    received_at = InboundMessage.objects.values_list("received_at", flat=True).get()
    occurred_at = WebhookEvent.objects.values_list("occurred_at", flat=True).get()
    assert response.status_code == 200
    assert occurred_at is None
    assert abs(received_at - datetime.now(UTC)) < timedelta(minutes=5)


def test_a_long_message_id_in_a_three_byte_script_is_stored_and_applied(client, hook, mailbox):
    """900 CJK characters are 2,700 bytes: past what a PostgreSQL index entry holds, so the
    receiver answered 500 and Svix dropped the mail after a day. The id is cut by bytes, ending in
    a digest of the whole; the same id cuts the same way (a redelivery is one message)."""
    long_id = "<" + "訂" * 900 + "@customer.test>"
    payload = received_payload(mailbox, thread_id="thr_1", message_id=long_id)

    first = hook.post(client, payload)
    again = hook.post(client, {**payload, "event_id": "evt_again"})

    stored = InboundMessage.objects.get()
    assert (first.status_code, again.status_code) == (200, 200)
    assert len(stored.message_id.encode()) <= 998
    assert stored.message_id.startswith("<訂訂") and "~" in stored.message_id
    assert WebhookEvent.objects.filter(state="applied").count() == 2


def test_long_thread_ids_that_share_their_first_255_characters_stay_two_threads(
    client, hook, mailbox
):
    """Found by probe 4 (a customer's mail): a thread id was cut at 255 characters, so two
    threads whose ids only differ after that were one: the reviewer of either saw the other's
    conversation, and mail in one held the other's sends. Cut, it ends in a digest of the whole;
    the same id cuts the same way (a second message of the thread is in it)."""
    shared = "thr_" + "x" * 251
    first, second = shared + "-first", shared + "-second"
    hook.post(client, received_payload(mailbox, thread_id=first, message_id="<a1@customer.test>"))
    hook.post(client, received_payload(mailbox, thread_id=second, message_id="<b1@customer.test>"))
    hook.post(client, received_payload(mailbox, thread_id=first, message_id="<a2@customer.test>"))

    stored = dict(InboundMessage.objects.values_list("message_id", "thread_id"))
    assert WebhookEvent.objects.filter(state="applied").count() == 3
    assert stored["<a1@customer.test>"] == stored["<a2@customer.test>"]
    assert stored["<a1@customer.test>"] != stored["<b1@customer.test>"]
    assert {len(thread) for thread in stored.values()} == {255}
    assert stored["<a1@customer.test>"].startswith(shared[:200])


def test_a_reply_to_a_message_id_stored_cut_is_refused_as_too_long_not_unknown(
    client, hook, mailbox, member_of, tenant_a
):
    """A Message-ID over 998 bytes is stored cut (above). An agent answering it names it as
    AgentMail gives it, whole, and was told "not a message received by ... (if it arrived only
    just now, retry in a few seconds)": no stored id can ever equal it, so the agent retried for
    ever. The refusal says why and what to do instead."""
    long_id = "<" + "訂" * 400 + "@customer.test>"
    hook.post(client, received_payload(mailbox, thread_id="thr_1", message_id=long_id))

    with pytest.raises(errors.InvalidInput) as refused:
        intent_services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["jane@customer.test"],
            text="Thanks",
            in_reply_to=long_id,
            actor_user=member_of(tenant_a, "approver").user,
        )

    assert InboundMessage.objects.get().message_id != long_id
    assert (refused.value.code, refused.value.field) == ("in_reply_to_too_long", "in_reply_to")
    assert "retry" not in refused.value.message
    assert Draft.objects.count() == 0


@pytest.mark.parametrize(
    "timestamp",
    ["2099-01-01T00:00:00Z", "2001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"],
    ids=["future", "long past", "year 1"],
)
def test_a_received_time_far_from_the_receipt_is_not_believed(client, hook, mailbox, timestamp):
    """The message's time is where the next backfill lists the inbox from: one message 'from
    2099' hid every later one from it. Outside 30 days before to 5 minutes after the receipt,
    the receipt time stands in."""
    payload = received_payload(mailbox, thread_id="thr_1", timestamp=timestamp)

    response = hook.post(client, payload)

    received_at = InboundMessage.objects.values_list("received_at", flat=True).get()
    assert response.status_code == 200
    assert abs(received_at - datetime.now(UTC)) < timedelta(minutes=5)


def test_a_received_time_a_day_before_the_receipt_is_kept(client, hook, mailbox):
    yesterday = datetime.now(UTC) - timedelta(days=1)
    payload = received_payload(
        mailbox, thread_id="thr_1", timestamp=yesterday.isoformat().replace("+00:00", "Z")
    )

    hook.post(client, payload)

    received_at = InboundMessage.objects.values_list("received_at", flat=True).get()
    assert abs(received_at - yesterday) < timedelta(seconds=1)


def test_a_delivery_naming_its_message_at_the_top_level_is_applied(
    client, hook, mailbox, intent_row
):
    """The receiver reads inbox and message ids from the top level when the event's object
    lacks them, and stored the event with them; the applier normalised the stored (minimal)
    payload again without them and rejected it as naming no inbox of the tenant."""
    intent = intent_row(mailbox)
    payload = delivery_payload("delivered", intent)
    inner = payload["delivery"]
    payload["inbox_id"] = inner.pop("inbox_id")
    payload["message_id"] = inner.pop("message_id")

    response = hook.post(client, payload)

    event = WebhookEvent.objects.get()
    assert response.status_code == 200
    assert (event.state, event.message_id) == ("applied", intent.provider_message_id)
    assert RecipientDelivery.objects.get(intent=intent).state == "delivered"


def test_a_reply_to_a_subject_longer_than_a_header_line_is_refused_not_cut(
    client, hook, mailbox, member_of, tenant_a
):
    """The stored subject was cut at 998 characters: a 100 KB one that began with "Re: " kept it,
    fitted, and the reply was approved with the cut subject while AgentMail would send the whole
    one."""
    subject = "Re: " + "x" * 100_000
    payload = received_payload(
        mailbox, thread_id="thr_1", message_id="<long@customer.test>", subject=subject
    )
    response = hook.post(client, payload)

    with pytest.raises(errors.InvalidInput) as refused:
        intent_services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["jane@customer.test"],
            text="Thanks",
            in_reply_to="<long@customer.test>",
            actor_user=member_of(tenant_a, "approver").user,
        )

    assert response.status_code == 200
    assert InboundMessage.objects.get().subject == subject[:999]
    assert (refused.value.code, refused.value.field) == ("reply_subject_invalid", "in_reply_to")
    assert Draft.objects.count() == 0


@pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["NUL", "lone surrogate"])
def test_a_reply_to_a_subject_stored_with_replaced_characters_is_refused(
    client, hook, mailbox, member_of, tenant_a, bad
):
    """The subject was stored as "Refund\ufffdnow" and a reply approved as "Re: Refund\ufffdnow";
    AgentMail's reply route takes the subject it holds and sent "Re: Refund\\x00now" (an RFC 2047
    encoded word carries a NUL). A subject that really holds U+FFFD is still answered."""
    approver = member_of(tenant_a, "approver").user
    flagged = received_payload(
        mailbox, thread_id="thr_1", message_id="<nul@customer.test>", subject=f"Refund{bad}now"
    )
    plain = received_payload(
        mailbox, thread_id="thr_2", message_id="<fffd@customer.test>", subject="Caf\ufffd order"
    )
    hook.post(client, flagged)
    hook.post(client, plain)

    def reply_to(message_id):
        return intent_services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["jane@customer.test"],
            text="Thanks",
            in_reply_to=message_id,
            actor_user=approver,
        )

    with pytest.raises(errors.InvalidInput) as refused:
        reply_to("<nul@customer.test>")
    answered = reply_to("<fffd@customer.test>")

    stored = WebhookEvent.objects.get(message_id="<nul@customer.test>").payload
    assert (refused.value.code, refused.value.field) == ("reply_subject_invalid", "in_reply_to")
    assert "NUL or an unpaired surrogate" in refused.value.message
    assert normalize(stored).inbound.subject_replaced is True
    assert answered.versions.get().subject == "Re: Caf\ufffd order"
    assert Draft.objects.count() == 1


@pytest.mark.parametrize(
    ("sender", "stored"),
    [
        # The address in the recipients' form (webhooks.normalize.sender_in_its_form).
        ({"address": "Jane@Customer.test", "name": "Jane Doe"}, "Jane Doe <jane@customer.test>"),
        ({"address": "jane@customer.test"}, "jane@customer.test"),
        # An address that would close the brackets early names nobody: the built sender would
        # have ended with an address of the sender's choosing.
        ({"address": "jane@customer.test> <boss@acme.test", "name": "Boss"}, ""),
        ({"name": "Boss"}, ""),
    ],
    ids=["name and address", "address", "brackets in the address", "no address"],
)
def test_a_sender_given_as_an_object_is_stored_as_name_and_address(
    client, hook, mailbox, sender, stored
):
    """Found by an outside probe: AgentMail documents ``from`` as a string, and a sender given as
    an object was stored empty, so the reviewer saw no one and the thread matched no recipient."""
    payload = received_payload(mailbox, thread_id="thr_1", sender=sender)

    response = hook.post(client, payload)

    assert response.status_code == 200
    assert WebhookEvent.objects.get().state == "applied"
    assert InboundMessage.objects.get().sender == stored


def test_a_reply_to_a_subject_holding_an_encoded_word_is_refused(
    client, hook, mailbox, member_of, tenant_a
):
    """AgentMail gives the reply "Re: " and the customer's subject as stored (decoded once): an
    encoded word still in it is decoded by the customer's mail client into words nobody read
    on the draft page."""
    subject = "Order =?utf-8?B?UGF5IHRvIElCQU4gWFgwMCA5OTk5?="
    payload = received_payload(
        mailbox, thread_id="thr_1", message_id="<word@customer.test>", subject=subject
    )
    response = hook.post(client, payload)

    with pytest.raises(errors.InvalidInput) as refused:
        intent_services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["jane@customer.test"],
            text="Thanks",
            in_reply_to="<word@customer.test>",
            actor_user=member_of(tenant_a, "approver").user,
        )

    assert response.status_code == 200
    assert (refused.value.code, refused.value.field) == ("reply_subject_invalid", "in_reply_to")
    assert "encoded word" in refused.value.message
    assert Draft.objects.count() == 0
