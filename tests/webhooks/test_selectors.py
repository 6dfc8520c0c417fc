"""Reads: tenant-scoped (another tenant's inbound mail never shows), and the delivery summary of
an intent."""

from __future__ import annotations

import pytest

from tests.webhooks.conftest import delivery_payload, received_payload
from webhooks import selectors


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def intent(tenant_a, mailbox_row, intent_row):
    return intent_row(mailbox_row(tenant_a), to=["jane@customer.test"], cc=["ops@customer.test"])


def test_inbound_for_thread_shows_only_this_mailboxs_messages(
    client, tenant_a, tenant_b, hook_for, mailbox_row
):
    """Another tenant's thread and another mailbox's of the same tenant stay out: a draft that
    answers no message carries the agent's thread id, which could name any thread."""
    hook_a, hook_b = hook_for(tenant_a), hook_for(tenant_b)
    support, sales = mailbox_row(tenant_a), mailbox_row(tenant_a, "sales")
    hook_a.post(client, received_payload(support, thread_id="thr_same"))
    hook_a.post(client, received_payload(sales, thread_id="thr_same"))
    hook_b.post(client, received_payload(mailbox_row(tenant_b), thread_id="thr_same"))

    shown = selectors.inbound_for_thread(tenant=tenant_a, mailbox=support, thread_id="thr_same")

    assert [(m.tenant_id, m.mailbox_id) for m in shown] == [(tenant_a.pk, support.pk)]


def test_delivery_summary_lists_every_approved_recipient_in_order(client, hook, intent):
    hook.post(client, delivery_payload("delivered", intent, recipients=["ops@customer.test"]))

    summary = selectors.delivery_summary(intent=intent)

    assert [(row.address, row.state) for row in summary] == [
        ("jane@customer.test", ""),
        ("ops@customer.test", "delivered"),
    ]
