"""The journal's writer (intents.journal): a person's row keeps the address they acted under, so
a later change of it does not rename who did what; a process's row keeps its own label."""

from __future__ import annotations

import pytest

from intents import sending, services
from intents.models import IntentEvent
from tenants.models import User

pytestmark = pytest.mark.django_db

# Longer than the 100 characters the label had: an address may have up to 254.
LONG_ADDRESS = f"{'a' * 64}@{'b' * 60}.example.test"


def test_a_persons_rows_keep_the_address_they_wrote_edited_and_approved_under(
    tenant_a, member_of, live
):
    person = member_of(tenant_a, "approver", user__email=LONG_ADDRESS).user
    draft = services.draft_create(
        tenant=tenant_a,
        mailbox=live.mailbox,
        to=["customer@example.com"],
        subject="Your refund",
        text="We refunded your order.",
        actor_user=person,
    )
    version = services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="We refunded your whole order.",
        html="",
        actor_user=person,
        base_version=1,
    )
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=person,
    )
    sending.run_once(worker="host-7:4242:MainThread", limit=5)
    User.objects.filter(pk=person.pk).update(email="ana.new@example.test")

    rows = IntentEvent.objects.filter(draft=draft).values_list("action", "actor_label")
    worker_rows = IntentEvent.objects.filter(intent=intent, actor_kind="worker")

    assert sorted(rows.filter(actor_user=person)) == [
        ("draft.approved", LONG_ADDRESS),
        ("draft.created", LONG_ADDRESS),
        ("draft.version_added", LONG_ADDRESS),
        ("intent.created", LONG_ADDRESS),
    ]
    assert worker_rows.exists()
    assert set(worker_rows.values_list("actor_user", "actor_label")) == {
        (None, "host-7:4242:MainThread")
    }
