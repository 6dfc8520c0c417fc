"""A token's mailbox restriction, checked by the broadcast services themselves, in the writing
transaction: the API checked it before calling them, and a restriction committed between that
check and the write let the token replace the recipients of a broadcast it may no longer reach
(or post one to a mailbox it lost). Real concurrent transactions, each thread on its own
connection."""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from django.test import Client

from intents import errors
from intents.models import Broadcast, BroadcastRecipient, IntentEvent
from intents.services.broadcasts import broadcast_create, broadcast_replace_recipients
from tenants.models import AgentToken
from tenants.tokens import token_authenticate
from tests.agent_api.test_probe_replay_scope import narrow
from tests.intents.helpers import blocked_on_a_lock, in_thread

pytestmark = pytest.mark.django_db(transaction=True)

ONE = [{"address": "c0@example.com", "variables": {"name": "N0"}}]
TWO = [{"address": f"c{i}@example.com", "variables": {"name": f"N{i}"}} for i in range(2)]


def _broadcast(tenant, mailbox, token) -> Broadcast:
    return broadcast_create(
        tenant=tenant,
        mailbox=mailbox,
        subject="Delayed",
        text="Hello {{ name }}",
        recipients=ONE,
        agent_token=token,
    )


def _token(raw: str) -> AgentToken:
    return AgentToken.objects.get(pk=token_authenticate(raw).pk)


@pytest.mark.parametrize("narrowed", ["other_mailbox", "all_to_other"])
def test_the_service_refuses_a_broadcast_outside_the_tokens_scope(
    make_token, tenant_a, mailbox_a, mailbox_a2, narrowed
):
    """The token read when the request began (all mailboxes, or mailbox_a) is the one the
    service is given; the restriction committed since is the one it must apply."""
    every = narrowed == "all_to_other"
    raw = make_token(tenant_a, mailboxes=() if every else (mailbox_a, mailbox_a2))
    token = _token(raw)
    broadcast = _broadcast(tenant_a, mailbox_a, token)
    narrow(raw, mailboxes=[mailbox_a2])

    with pytest.raises(errors.NotFound) as replaced:
        broadcast_replace_recipients(
            tenant=tenant_a, broadcast_id=broadcast.pk, recipients=TWO, agent_token=token
        )
    with pytest.raises(errors.NotFound) as created:
        _broadcast(tenant_a, mailbox_a, token)

    assert (replaced.value.status, created.value.status) == (404, 404)
    assert created.value.code == "mailbox_not_found"
    assert list(Broadcast.objects.values_list("pk", "recipient_count")) == [(broadcast.pk, 1)]
    assert BroadcastRecipient.objects.filter(broadcast=broadcast).count() == 1
    assert not IntentEvent.objects.filter(action="broadcast.recipients_replaced").exists()


def test_a_restriction_committed_while_a_replacement_waits_for_the_broadcast_refuses_it(
    make_token, tenant_a, mailbox_a, mailbox_a2
):
    """The PUT passed the API's scope check, then waited for the broadcast's row (a reviewer
    held it); the admin's restriction to another mailbox committed during the wait."""
    raw = make_token(tenant_a, mailboxes=(mailbox_a, mailbox_a2))
    broadcast = _broadcast(tenant_a, mailbox_a, _token(raw))
    outcome: list = []

    def put():
        return Client().generic(
            "PUT",
            f"/api/v1/broadcasts/{broadcast.pk}/recipients",
            data=json.dumps({"recipients": TWO}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {raw}"},
        )

    with transaction.atomic():
        Broadcast.objects.select_for_update().filter(pk=broadcast.pk).values_list("pk").first()
        writer = in_thread(put, outcome)
        assert blocked_on_a_lock(), "the replacement never reached the broadcast's row"
        restricted: list = []
        in_thread(lambda: narrow(raw, mailboxes=[mailbox_a2]), restricted).join(30)
        assert restricted == [None], restricted
    writer.join(30)

    assert outcome[0].status_code == 404, outcome[0].content
    assert outcome[0].json()["code"] == "not_found"
    assert BroadcastRecipient.objects.filter(broadcast=broadcast).count() == 1
    assert not IntentEvent.objects.filter(action="broadcast.recipients_replaced").exists()
