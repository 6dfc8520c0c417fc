"""Fixtures for the intents tests: a local mailbox row (no provider), approvers, drafts.

Acceptance tests that talk to the sandbox use the lead's `sandbox` and `mailbox_factory`
fixtures from tests/conftest.py instead of `local_mailbox`.
"""

from __future__ import annotations

import pytest

from intents import services
from mailboxes.models import Mailbox
from tests.factories import UserFactory


def make_local_mailbox(tenant, username="support", **kwargs) -> Mailbox:
    mailbox = Mailbox.objects.create(
        tenant=tenant,
        username=username,
        address=f"{username}.{tenant.slug}@agentmail.test",
        inbox_id=f"{username}.{tenant.slug}@agentmail.test",
        status=Mailbox.Status.PROVISIONING,
        **kwargs,
    )
    mailbox.api_key_sealed = mailbox.seal_api_key("am_local_only_not_a_real_key")
    mailbox.status = Mailbox.Status.ACTIVE
    mailbox.save(update_fields=["api_key_sealed", "status"])
    return mailbox


@pytest.fixture
def local_mailbox(tenant_a):
    return make_local_mailbox(tenant_a)


@pytest.fixture
def approver(tenant_a, member_of):
    return member_of(tenant_a, "approver").user


@pytest.fixture
def new_draft(tenant_a, local_mailbox, approver):
    """new_draft(**overrides) -> a pending draft written by a person."""

    def make(**overrides):
        fields = {
            "tenant": tenant_a,
            "mailbox": local_mailbox,
            "to": ["Customer@Example.com"],
            "subject": "Your refund",
            "text": "We refunded your order.",
            "actor_user": approver,
        }
        fields.update(overrides)
        return services.draft_create(**fields)

    return make


@pytest.fixture
def second_user():
    return UserFactory()
