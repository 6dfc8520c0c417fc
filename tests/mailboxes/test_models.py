"""Mailbox.allows_recipient: the recipient policy for one address. Its lower-cased allow-lists
are built once per mailbox instance, not on every call, and again when a list is replaced, the
row saved or reloaded. (The SQL form of the rule is checked against it in
tests/intents/test_policy.py.)"""

from __future__ import annotations

import pytest

from mailboxes.models import Mailbox
from tests.factories import make_local_mailbox
from tests.intents.helpers import counted_lower


def test_the_allow_lists_are_lower_cased_once_however_many_recipients_are_checked():
    """Found by an outside probe: every call lower-cased the whole allow-list again, so checking
    10,000 recipients against 10,000 allowed addresses took 19 s."""
    addresses, lowered = counted_lower([f"P{i}@Example.com" for i in range(300)])
    domains, domains_lowered = counted_lower(["Partner.ORG"])
    mailbox = Mailbox(
        policy_mode=Mailbox.PolicyMode.RESTRICTED,
        allowed_addresses=addresses,
        allowed_domains=domains,
    )

    verdicts = [mailbox.allows_recipient(f"p{i}@example.com") for i in range(600)]

    assert verdicts == [True] * 300 + [False] * 300
    assert mailbox.allows_recipient("Anyone@partner.org")
    assert (len(lowered), len(domains_lowered)) == (300, 1)


def test_an_open_mailbox_allows_anyone():
    assert Mailbox(allowed_addresses=["only@example.com"]).allows_recipient("x@elsewhere.org")


def test_a_replaced_allow_list_applies_at_once():
    mailbox = Mailbox(policy_mode="restricted", allowed_addresses=["a@example.com"])
    assert mailbox.allows_recipient("a@example.com")
    mailbox.allowed_addresses = ["B@example.com"]
    assert not mailbox.allows_recipient("a@example.com")
    assert mailbox.allows_recipient("b@example.com")


@pytest.mark.django_db
def test_a_list_changed_in_place_applies_once_saved_and_another_change_once_reloaded(tenant_a):
    mailbox = make_local_mailbox(tenant_a, policy_mode="restricted", allowed_domains=["a.org"])
    assert not mailbox.allows_recipient("x@partner.org")

    mailbox.allowed_domains.append("Partner.org")
    mailbox.save(update_fields=["allowed_domains"])
    assert mailbox.allows_recipient("x@partner.org")

    Mailbox.objects.filter(pk=mailbox.pk).update(allowed_domains=["other.org"])
    mailbox.refresh_from_db()
    assert not mailbox.allows_recipient("x@partner.org")
    assert mailbox.allows_recipient("x@other.org")


@pytest.mark.django_db
def test_one_tenant_cannot_hold_one_inbox_twice_in_any_case(tenant_a, tenant_b):
    """Webhook events, backfills and reapplies find the mailbox of an event by its tenant and
    inbox id, case-insensitively, and take the first: two rows of one inbox would have split a
    thread's events between them. AgentMail's ids are unique, so the database says so too."""
    from django.db import IntegrityError, transaction

    first = make_local_mailbox(tenant_a, "support")
    make_local_mailbox(tenant_b, "support")  # another tenant's inbox of the same name: its own id
    with pytest.raises(IntegrityError), transaction.atomic():
        Mailbox.objects.create(
            tenant=tenant_a,
            username="support-again",
            address="support-again@agentmail.test",
            inbox_id=first.inbox_id.upper(),
        )
    # Mailboxes not provisioned yet (no inbox id) are many.
    Mailbox.objects.create(tenant=tenant_a, username="new1", address="new1@agentmail.test")
    Mailbox.objects.create(tenant=tenant_a, username="new2", address="new2@agentmail.test")
