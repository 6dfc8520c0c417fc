"""Applying delivery events: forward-only per-recipient state, suppressions, attribution, the
ledger, and what can never happen (a send intent created, re-queued or re-armed)."""

from __future__ import annotations

import pytest

from intents.models import IntentEvent, SendIntent, Suppression
from tests.webhooks.conftest import delivery_payload, new_svix_id
from webhooks.models import RecipientDelivery, WebhookEvent


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def mailbox(tenant_a, mailbox_row):
    return mailbox_row(tenant_a)


@pytest.fixture
def intent(mailbox, intent_row):
    return intent_row(mailbox, to=["jane@customer.test"], cc=["ops@customer.test"])


def states(intent):
    return dict(RecipientDelivery.objects.filter(intent=intent).values_list("address", "state"))


def test_sent_then_delivered_moves_every_recipient_forward(client, hook, intent):
    hook.post(client, delivery_payload("sent", intent))
    hook.post(client, delivery_payload("delivered", intent))

    assert states(intent) == {"jane@customer.test": "delivered", "ops@customer.test": "delivered"}


def test_late_sent_after_delivered_does_not_move_back(client, hook, intent):
    hook.post(client, delivery_payload("delivered", intent))
    response = hook.post(client, delivery_payload("sent", intent))

    assert response.status_code == 200
    assert states(intent) == {"jane@customer.test": "delivered", "ops@customer.test": "delivered"}
    assert list(WebhookEvent.objects.values_list("state", flat=True)) == ["applied", "applied"]


def test_bounce_of_one_recipient_moves_and_suppresses_only_that_recipient(client, hook, intent):
    hook.post(client, delivery_payload("delivered", intent))
    bounce = delivery_payload("bounced", intent, recipients=["ops@customer.test"])

    hook.post(client, bounce)

    assert states(intent) == {"jane@customer.test": "delivered", "ops@customer.test": "bounced"}
    suppression = Suppression.objects.get(tenant=intent.tenant)
    assert (suppression.address, suppression.reason, suppression.source) == (
        "ops@customer.test",
        "bounced",
        bounce["event_id"],
    )


def test_transient_bounce_moves_state_but_does_not_suppress(client, hook, intent):
    hook.post(
        client,
        delivery_payload("bounced", intent, recipients=["jane@customer.test"], type="Transient"),
    )

    assert states(intent) == {"jane@customer.test": "bounced"}
    assert Suppression.objects.count() == 0


def test_complaint_suppresses_with_reason_complained(client, hook, intent):
    hook.post(client, delivery_payload("complained", intent, recipients=["jane@customer.test"]))

    assert list(Suppression.objects.values_list("address", "reason")) == [
        ("jane@customer.test", "complained")
    ]


def test_rejection_without_recipients_concerns_every_recipient(client, hook, intent):
    hook.post(client, delivery_payload("rejected", intent))

    assert states(intent) == {"jane@customer.test": "rejected", "ops@customer.test": "rejected"}
    assert set(Suppression.objects.values_list("address", "reason")) == {
        ("jane@customer.test", "rejected"),
        ("ops@customer.test", "rejected"),
    }


def test_second_bounce_under_another_svix_id_keeps_one_suppression_with_its_first_source(
    client, hook, intent
):
    first = delivery_payload("bounced", intent, recipients=["jane@customer.test"])
    second = delivery_payload("bounced", intent, recipients=["jane@customer.test"])

    hook.post(client, first)
    hook.post(client, second)

    assert list(Suppression.objects.values_list("source", flat=True)) == [first["event_id"]]
    assert WebhookEvent.objects.filter(state="applied").count() == 2


def test_suppression_reason_takes_the_strongest_whatever_the_order(client, hook, intent):
    hook.post(client, delivery_payload("complained", intent, recipients=["jane@customer.test"]))
    hook.post(client, delivery_payload("bounced", intent, recipients=["jane@customer.test"]))
    hook.post(client, delivery_payload("bounced", intent, recipients=["ops@customer.test"]))
    hook.post(client, delivery_payload("complained", intent, recipients=["ops@customer.test"]))

    assert set(Suppression.objects.values_list("address", "reason")) == {
        ("jane@customer.test", "complained"),
        ("ops@customer.test", "complained"),
    }


def test_manual_suppression_keeps_its_reason(client, hook, intent):
    Suppression.objects.create(tenant=intent.tenant, address="jane@customer.test", reason="manual")

    hook.post(client, delivery_payload("bounced", intent, recipients=["jane@customer.test"]))

    assert list(Suppression.objects.values_list("reason", flat=True)) == ["manual"]


def test_display_names_and_case_in_recipients_are_normalised(client, hook, intent):
    payload = delivery_payload("delivered", intent, recipients=["Jane Doe <JANE@Customer.TEST>"])

    hook.post(client, payload)

    assert states(intent) == {"jane@customer.test": "delivered"}


def test_recipient_the_intent_never_had_gets_no_row_and_no_suppression(client, hook, intent):
    hook.post(client, delivery_payload("bounced", intent, recipients=["stranger@elsewhere.test"]))

    assert states(intent) == {}
    assert Suppression.objects.count() == 0
    assert WebhookEvent.objects.get().state == "applied"


@pytest.mark.parametrize("event_type", ["message.opened", "domain.verified", "brand.new.type"])
def test_unknown_or_untracked_types_are_kept_and_ignored(client, hook, intent, event_type):
    payload = delivery_payload("delivered", intent)
    payload["event_type"] = event_type

    response = hook.post(client, payload)

    event = WebhookEvent.objects.get()
    assert response.status_code == 200
    assert (event.event_type, event.state) == (event_type, "ignored")
    assert states(intent) == {}


def test_ledger_row_records_what_recovery_and_audit_need(client, hook, intent):
    payload = delivery_payload("delivered", intent)
    svix_id = new_svix_id()

    hook.post(client, payload, svix_id=svix_id)

    event = WebhookEvent.objects.get()
    assert (
        event.endpoint_id,
        event.tenant_id,
        event.svix_id,
        event.event_type,
        event.event_id,
        event.inbox_id,
        event.message_id,
        event.state,
    ) == (
        hook.endpoint.pk,
        intent.tenant_id,
        svix_id,
        "message.delivered",
        payload["event_id"],
        intent.mailbox.inbox_id,
        intent.provider_message_id,
        "applied",
    )
    assert event.occurred_at is not None
    assert event.applied_at is not None


def test_each_applied_event_writes_one_webhook_journal_row(client, hook, intent):
    payload = delivery_payload("delivered", intent)

    hook.post(client, payload)

    row = IntentEvent.objects.get(intent=intent)
    assert (row.actor_kind, row.action, row.data["moved"]) == (
        "webhook",
        "delivery.delivered",
        ["jane@customer.test", "ops@customer.test"],
    )


def test_no_event_creates_requeues_or_rearms_a_send_intent(client, hook, intent):
    before = SendIntent.objects.values().get(pk=intent.pk)

    for kind in ["sent", "delivered", "bounced", "complained", "rejected", "sent"]:
        hook.post(client, delivery_payload(kind, intent))

    assert SendIntent.objects.count() == 1
    assert SendIntent.objects.values().get(pk=intent.pk) == before


def test_event_for_a_message_of_another_mailbox_of_the_tenant_waits(
    client, hook, intent, mailbox_row
):
    other_mailbox = mailbox_row(intent.tenant, "sales")
    payload = delivery_payload(
        "delivered",
        (other_mailbox.inbox_id, intent.provider_message_id, "thr", ["jane@customer.test"]),
    )

    hook.post(client, payload)

    assert WebhookEvent.objects.get().state == "deferred"
    assert states(intent) == {}
