"""Reads are tenant-scoped: another tenant's inbound mail never shows."""

from __future__ import annotations

from tests.webhooks.conftest import received_payload
from webhooks import selectors


def test_inbound_for_thread_shows_only_this_tenants_messages(
    client, tenant_a, tenant_b, hook_for, mailbox_row
):
    hook_a, hook_b = hook_for(tenant_a), hook_for(tenant_b)
    hook_a.post(client, received_payload(mailbox_row(tenant_a), thread_id="thr_same"))
    hook_b.post(client, received_payload(mailbox_row(tenant_b), thread_id="thr_same"))

    shown = selectors.inbound_for_thread(tenant=tenant_a, thread_id="thr_same")

    assert [m.tenant_id for m in shown] == [tenant_a.pk]
