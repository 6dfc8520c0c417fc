"""The words after "Check the key again" and "Make the inbox again" follow the mailbox as the
action left it, not as the page read it before the call to AgentMail: another admin who disabled
the mailbox while AgentMail was being asked got "its waiting sends go out now", and nothing went
out. The sandbox holds the call (a delay fault); the other admin disables the mailbox meanwhile."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction
from django.urls import reverse

from mailboxes import provisioning
from mailboxes.key_health import mailbox_key_refused
from mailboxes.models import Mailbox

pytestmark = pytest.mark.django_db(transaction=True)


def _while_agentmail_is_asked(sandbox, post, meanwhile) -> str:
    """The page ``post`` lands on, with ``meanwhile`` run once the sandbox holds the call."""
    answer: list = []

    def run():
        try:
            answer.append(post())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 10
    while not any(f["fired"] for f in sandbox.faults()) and time.monotonic() < deadline:
        time.sleep(0.02)
    meanwhile()
    thread.join(20)
    return answer[0].content.decode()


def _disable(tenant, mailbox, actor):
    def disable():
        with transaction.atomic():
            provisioning.mailbox_set_status(
                tenant=tenant, mailbox_id=mailbox.pk, status="disabled", actor=actor
            )

    return disable


@pytest.fixture
def refused_mailbox(tenant_a, mailbox_factory, sandbox):
    mailbox = mailbox_factory(tenant_a)
    mailbox_key_refused(
        mailbox_id=mailbox.pk, api_key_id=mailbox.provider_api_key_id, detail="401 unknown_api_key"
    )
    return Mailbox.objects.get(pk=mailbox.pk)


def test_a_key_accepted_again_while_another_admin_disabled_the_mailbox_says_it_stays_disabled(
    tenant_a, member_of, signed_in, sandbox, refused_mailbox
):
    alice, bob = member_of(tenant_a, "admin").user, member_of(tenant_a, "admin").user
    client = signed_in(alice)
    url = reverse("mailbox_key_check", args=[tenant_a.slug, refused_mailbox.pk])
    sandbox.fault("list_messages", "delay", delay=2, inbox_id=refused_mailbox.inbox_id)

    page = _while_agentmail_is_asked(
        sandbox,
        lambda: client.post(url, follow=True),
        _disable(tenant_a, refused_mailbox, bob),
    )

    refused_mailbox.refresh_from_db()
    assert (refused_mailbox.status, refused_mailbox.key_refused) == ("disabled", False)
    assert "go out now" not in page
    assert "stays disabled: nothing is sent from it until it is enabled" in page


def test_an_inbox_made_again_while_another_admin_disabled_the_mailbox_says_it_stays_disabled(
    tenant_a, member_of, signed_in, sandbox, refused_mailbox
):
    alice, bob = member_of(tenant_a, "admin").user, member_of(tenant_a, "admin").user
    sandbox.sdk().inboxes.delete(refused_mailbox.inbox_id)
    client = signed_in(alice)
    url = reverse("mailbox_inbox_recover", args=[tenant_a.slug, refused_mailbox.pk])
    sandbox.fault("get_inbox", "delay", delay=2, inbox_id=refused_mailbox.inbox_id)

    page = _while_agentmail_is_asked(
        sandbox,
        lambda: client.post(url, {"confirmed": "yes"}, follow=True),
        _disable(tenant_a, refused_mailbox, bob),
    )

    refused_mailbox.refresh_from_db()
    assert refused_mailbox.status == "disabled" and refused_mailbox.inbox_id
    assert "go out now" not in page
    assert "stays disabled: nothing is sent from it until it is enabled" in page
