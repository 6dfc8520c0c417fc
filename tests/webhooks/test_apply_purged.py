"""An event whose payload is gone before it could be applied (a release before this one could
purge the payload of an event still waiting) is closed by whichever applier takes it, with the
journal row retention writes for the events it closes (``webhook.event_closed_unapplied``)."""

from __future__ import annotations

import pytest
from django.db.models.functions import Now

from intents.models import IntentEvent, SendIntent
from tests.webhooks.conftest import apply_stored, delivery_payload
from webhooks.models import WebhookEvent
from webhooks.services import apply

CLOSED = "webhook.event_closed_unapplied"
MESSAGE_ID = "<purged-early@sandbox.test>"


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def mailbox(tenant_a, mailbox_row):
    return mailbox_row(tenant_a)


def closing_rows():
    return IntentEvent.objects.filter(action=CLOSED)


def by_the_batch_applier(event):
    apply_stored()


def by_event_apply(event):
    apply.event_apply(event_id=event.pk)


def by_the_sweep(event):
    apply.events_replay_pending()


@pytest.mark.parametrize("applier", [by_the_batch_applier, by_event_apply, by_the_sweep])
def test_a_pending_event_without_payload_is_closed_with_one_journal_row(
    client, hook, mailbox, intent_row, tenant_a, applier
):
    """Found by a probe: the applier closed it as ignored and journaled nothing."""
    sent = intent_row(mailbox, to=["jane@customer.test"])
    hook.post(client, delivery_payload("bounced", sent), apply=False)
    event = WebhookEvent.objects.get()
    WebhookEvent.objects.filter(pk=event.pk).update(payload=None)

    applier(event)
    applier(event)
    apply_stored()

    event.refresh_from_db()
    assert (event.state, event.applied_at is not None) == ("ignored", True)
    assert list(
        closing_rows().values_list(
            "tenant_id", "intent_id", "draft_id", "from_state", "to_state", "data"
        )
    ) == [
        (tenant_a.pk, sent.pk, sent.draft_id, "pending", "ignored", {"webhook_event_id": event.pk})
    ]


def test_a_deferred_event_without_payload_is_closed_with_one_journal_row(
    client, hook, mailbox, intent_row
):
    """The worker records the message id a deferred event waited for; its payload is gone."""
    sending = intent_row(mailbox, to=["jane@customer.test"], message_id=None, state="uncertain")
    hook.post(
        client,
        delivery_payload(
            "delivered", (mailbox.inbox_id, MESSAGE_ID, "thr_p", ["jane@customer.test"])
        ),
    )
    event = WebhookEvent.objects.get(state="deferred")
    WebhookEvent.objects.filter(pk=event.pk).update(payload=None)
    SendIntent.objects.filter(pk=sending.pk).update(
        state="accepted", provider_message_id=MESSAGE_ID, updated_at=Now()
    )

    apply.events_apply_deferred(tenant_id=mailbox.tenant_id, message_id=MESSAGE_ID)
    apply.events_apply_deferred(tenant_id=mailbox.tenant_id, message_id=MESSAGE_ID)
    apply.events_replay_pending()

    event.refresh_from_db()
    assert event.state == "ignored"
    assert list(closing_rows().values_list("intent_id", "from_state", "to_state")) == [
        (sending.pk, "deferred", "ignored")
    ]
