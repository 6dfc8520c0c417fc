"""An outside probe of a broadcast's rejection as the agent that posted it reads it."""

from __future__ import annotations

import pytest

from intents.models import Broadcast
from intents.services.broadcasts import broadcast_reject
from tests.agent_api.test_broadcasts import body

pytestmark = pytest.mark.django_db


def test_the_agent_reads_why_its_broadcast_was_rejected(api, token_a, mailbox_a, member_of):
    """Found by an outside probe: the reason a person must give to reject a broadcast was stored
    and shown nowhere the agent reads (the broadcast read and list gave only "rejected"), where a
    rejected draft's reject_reason is in its read: the agent could not tell what to change."""
    posted = api.post("/broadcasts", body(mailbox_a), token=token_a, key="b-r").json()
    assert posted["reject_reason"] == ""
    approver = member_of(mailbox_a.tenant, "approver").user
    broadcast_reject(
        tenant=mailbox_a.tenant,
        broadcast_id=posted["id"],
        actor=approver,
        reason="Order numbers are wrong for rows 2 and 3",
        content_hash=posted["content_hash"],
    )

    read = api.get(f"/broadcasts/{posted['id']}", token=token_a).json()

    assert read["state"] == "rejected"
    assert read["reject_reason"] == "Order numbers are wrong for rows 2 and 3"
    assert Broadcast.objects.get(pk=posted["id"]).reject_reason == read["reject_reason"]
