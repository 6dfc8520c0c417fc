"""An outside probe of a broadcast's recipients: what the approver is told of a recipient that
will not be written to, before the approval."""

import pytest

from intents import errors
from intents.models import SendIntent
from intents.services.broadcasts import broadcast_create, broadcast_replace_recipients
from tenants.tokens import token_create
from tests.intents.test_broadcasts import create, people

pytestmark = pytest.mark.django_db(transaction=True)


def _own_row(live, spelling=None):
    return {"address": spelling or live.mailbox.address, "variables": {"name": "Me", "order": 9}}


def test_the_sending_mailbox_itself_is_refused_as_a_recipient_naming_its_row(live):
    """Found by an outside probe: a broadcast listing its own mailbox was posted, its page said
    'Nobody: every recipient may be written to', it was approved, and the send to that row
    ended blocked at the worker (recipient_own_mailbox): a draft to that address is refused
    when it is written, with the reason."""
    own = live.mailbox.address.upper()

    with pytest.raises(errors.BroadcastRowsInvalid) as refused:
        create(live, recipients=[*people(2), _own_row(live, own)])

    [row] = refused.value.rows
    assert (row.row, row.field) == (3, "address")
    assert "is the sending mailbox's own address" in row.message
    assert "reply" not in row.message  # a broadcast's message is no reply
    assert SendIntent.objects.count() == 0


def test_a_replacement_naming_the_sending_mailbox_is_refused_too(live):
    agent_token, _ = token_create(
        tenant=live.tenant, name="agent", scopes=["drafts:write"], actor=None
    )
    b = broadcast_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        subject="Order {{ order }}",
        text="Hello {{ name }}",
        recipients=people(2),
        agent_token=agent_token,
    )

    with pytest.raises(errors.BroadcastRowsInvalid) as refused:
        broadcast_replace_recipients(
            tenant=live.tenant,
            broadcast_id=b.pk,
            recipients=[_own_row(live), *people(1)],
            agent_token=agent_token,
        )

    [row] = refused.value.rows
    assert (row.row, row.field) == (1, "address")


def test_a_sub_address_of_the_sending_mailbox_is_refused_as_its_row(live):
    """support+x@ is the sending inbox with a tag (``intents.policy.is_own_address``): refused
    as the exact address is, not posted for an approver to pass."""
    local, _, domain = live.mailbox.address.partition("@")

    with pytest.raises(errors.BroadcastRowsInvalid) as refused:
        create(live, recipients=[*people(1), _own_row(live, f"{local.upper()}+news@{domain}")])

    [row] = refused.value.rows
    assert (row.row, row.field) == (2, "address")
    assert "is the sending mailbox's own address" in row.message
    assert SendIntent.objects.count() == 0
