"""Found by a probe: the retention clock of a broadcast whose send ended long after its fan-out.
The purge measured the tenant's retention from the broadcast's last change (its completion, with
a send still needing attention) and only skipped it while a send was open, so a send a person
decided on today (after a holiday, with a retention of a week) lost the text it was sent from at
the next daily run: its send page could no longer show what went out. A reply's draft keeps its
body for the retention after its last send ended (``_send_open_or_recent``); a broadcast now
does too."""

from datetime import timedelta

import pytest
from django.utils import timezone

from intents import services, tasks
from intents.models import Broadcast, BroadcastRecipient, IntentEvent, SendIntent
from intents.sending.fanout import broadcast_run
from intents.services.broadcasts import broadcast_approve, broadcast_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def waited(tenant_a, local_mailbox, approver):
    """A broadcast to two customers completed 10 days ago, in a tenant that keeps bodies for
    7 days: one send accepted then, the other has needed attention since."""
    tenant_a.retention_days = 7
    tenant_a.save(update_fields=["retention_days"])
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=local_mailbox,
        subject="Order {{ order }} is late",
        text="Dear {{ name }}",
        recipients=[
            {"address": "ana@example.com", "variables": {"name": "Ana", "order": 7}},
            {"address": "bo@example.com", "variables": {"name": "Bo", "order": 8}},
        ],
        actor_user=None,
    )
    broadcast_approve(
        tenant=tenant_a,
        broadcast_id=broadcast.pk,
        content_hash=broadcast.content_hash,
        actor=approver,
    )
    broadcast_run(broadcast.pk)
    sent, waiting = SendIntent.objects.filter(broadcast=broadcast).order_by("pk")
    SendIntent.objects.filter(pk=sent.pk).update(state="accepted", provider_message_id="<a@x>")
    SendIntent.objects.filter(pk=waiting.pk).update(state="needs_attention")
    broadcast_run(broadcast.pk)
    long_ago = timezone.now() - timedelta(days=10)
    SendIntent.objects.filter(broadcast=broadcast).update(updated_at=long_ago)
    Broadcast.objects.filter(pk=broadcast.pk, state="completed").update(updated_at=long_ago)
    return waiting


def test_a_send_decided_today_keeps_its_broadcasts_text(tenant_a, approver, waited):
    services.intent_cancel(tenant=tenant_a, intent_id=waited.pk, actor=approver, reason="no")

    tasks.retention_purge()

    broadcast = Broadcast.objects.get(pk=waited.broadcast_id)
    assert broadcast.text == "Dear {{ name }}" and broadcast.body_purged_at is None
    assert BroadcastRecipient.objects.get(pk=waited.broadcast_recipient_id).variables
    assert not IntentEvent.objects.filter(action="broadcast.bodies_purged").exists()


def test_the_text_goes_once_the_retention_passed_since_the_last_send_ended(
    tenant_a, approver, waited
):
    services.intent_cancel(tenant=tenant_a, intent_id=waited.pk, actor=approver, reason="no")
    SendIntent.objects.filter(pk=waited.pk).update(updated_at=timezone.now() - timedelta(days=8))

    tasks.retention_purge()

    broadcast = Broadcast.objects.get(pk=waited.broadcast_id)
    assert (broadcast.text, broadcast.body_purged_at is not None) == ("", True)
    assert IntentEvent.objects.filter(action="broadcast.bodies_purged").count() == 1
