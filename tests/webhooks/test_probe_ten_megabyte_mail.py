"""A customer's 10 MB mail, as the sandbox delivers it (its payload capped at 1 MB as AgentMail's,
tests/sandbox/test_large_inbound.py), is recorded by our receiver from its preview: sent whole, it
was a 413 on every retry."""

from __future__ import annotations

import pytest

from tests.webhooks.conftest import hook_for  # noqa: F401
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db

TEN_MB = "A long complaint. " * 600_000


def test_our_receiver_records_the_ten_megabyte_mail_from_its_preview(
    sandbox,
    client,
    tenant_a,
    hook_for,  # noqa: F811
    mailbox_factory,
):
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    sent = sandbox.inbound(mailbox.inbox_id, from_="jane@example.com", subject="All", text=TEN_MB)
    [event] = [e for e in sandbox.events() if e["event_id"] == sent["event_id"]]

    response = hook.post(client, event["payload"])

    assert response.status_code == 200
    assert InboundMessage.objects.get().preview == " ".join(TEN_MB.split())[:200].rstrip()
