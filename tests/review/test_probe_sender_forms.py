"""Outsider probe: a customer whose address is written in Unicode (an internationalised domain,
SMTPUTF8) or in another case or composition than a draft's recipient, which is stored in its one
form (common.addresses.normalize_address: lower-cased, the domain as an A-label, NFC)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from intents import sending
from intents.models import Draft
from tests.intents.conftest import fast_send  # noqa: F401
from tests.review.threads import agent_drafts, agent_token, customer_writes
from tests.webhooks.conftest import hook_for  # noqa: F401
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


@pytest.mark.django_db(transaction=True)
def test_a_reply_to_a_customer_of_an_internationalised_domain_is_approved_from_the_list(
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    fast_send,  # noqa: F811
    client,
    hook_for,  # noqa: F811
):
    """Jürgen writes from bücher.de; the agent answers him at the address he wrote from, which
    the draft stores as juergen@xn--bcher-kva.de. The draft page said "Not a participant of
    this thread" beside him, the queue row "check recipients", and the list's approval left
    the reply out ("wrote none of the customer messages")."""
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    admin = member_of(tenant_a, "admin").user
    token = agent_token(tenant_a, admin)
    message = customer_writes(
        sandbox, hook, client, mailbox, "J\u00fcrgen <juergen@b\u00fccher.de>", "Lieferung"
    )
    draft = agent_drafts(
        client,
        token,
        "reply",
        {
            "mailbox": mailbox.address,
            "in_reply_to": message["message_id"],
            "to": ["juergen@b\u00fccher.de"],
            "text": "Ist unterwegs.",
        },
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    page = client.get(reverse("draft", args=[tenant_a.slug, draft["id"]])).content.decode()
    queue = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    items = re.findall(r'name="item" value="([^"]+)"', queue)

    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": items}, follow=True
    )
    sending.run_once(worker="t", limit=10)

    assert 'data-warning="not_on_thread"' not in page
    assert "data-check-recipients" not in queue
    assert "Approved 1 draft" in response.content.decode()
    assert Draft.objects.get(pk=draft["id"]).status == Draft.Status.APPROVED
    sent = sandbox.ledger(inbox_id=mailbox.inbox_id)
    assert [(s["to"], s["subject"]) for s in sent] == [
        (["juergen@xn--bcher-kva.de"], "Re: Lieferung")
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("sender", "to", "stored"),
    [
        (
            "J\u00fcrgen <juergen@b\u00fccher.de>",
            "juergen@b\u00fccher.de",
            "J\u00fcrgen <juergen@xn--bcher-kva.de>",
        ),
        ("jose\u0301@customer.test", "jos\u00e9@customer.test", "jos\u00e9@customer.test"),
        ("Ana < Ana@Customer.TEST >", "ana@customer.test", "Ana <ana@customer.test>"),
        # Not an address: kept as written.
        ("Ana <not an address>", "ana@customer.test", "Ana <not an address>"),
    ],
)
def test_the_draft_page_counts_the_customer_who_wrote_as_a_participant(
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    client,
    hook_for,  # noqa: F811
    sender,
    to,
    stored,
):
    """The sender's address is recorded in the recipients' form, so the customer who wrote is
    the recipient of a reply to them however either was spelled."""
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    admin = member_of(tenant_a, "admin").user
    message = customer_writes(sandbox, hook, client, mailbox, sender, "Hello")
    draft = agent_drafts(
        client,
        agent_token(tenant_a, admin),
        "reply",
        {
            "mailbox": mailbox.address,
            "in_reply_to": message["message_id"],
            "to": [to],
            "text": "Hi.",
        },
    )
    client.force_login(admin, backend="django.contrib.auth.backends.ModelBackend")
    page = client.get(reverse("draft", args=[tenant_a.slug, draft["id"]])).content.decode()

    assert InboundMessage.objects.get(message_id=message["message_id"]).sender == stored
    assert ('data-warning="not_on_thread"' in page) == (stored == sender)


def test_the_migration_writes_senders_recorded_before_in_the_recipients_form(tenant_a, mailbox_a):
    """Recorded before the sender's address was normalised on arrival: the same rewrite, once."""
    import importlib

    from django.apps import apps
    from django.utils import timezone

    from common.addresses import normalize_address

    written = {
        "m1": "Jürgen <juergen@bücher.de>",
        "m2": '"Ana" < Ana@Customer.TEST >',
        "m3": "BOB@EXAMPLE.COM",
        "m4": "Mailer Daemon <not an address>",
        "m5": "x" * 250 + " <" + "a" * 40 + "@" + "ü" * 20 + ".de>",
    }
    for message_id, sender in written.items():
        InboundMessage.objects.create(
            tenant=tenant_a,
            mailbox=mailbox_a,
            thread_id="t1",
            message_id=message_id,
            sender=sender,
            received_at=timezone.now(),
        )
    migration = importlib.import_module(
        "webhooks.migrations.0013_inbound_senders_in_recipients_form"
    )
    migration.rewrite(apps, None)

    stored = dict(InboundMessage.objects.values_list("message_id", "sender"))
    assert stored["m1"] == "Jürgen <juergen@xn--bcher-kva.de>"
    assert stored["m2"] == '"Ana" <ana@customer.test>'
    assert stored["m3"] == "bob@example.com"
    assert stored["m4"] == "Mailer Daemon <not an address>"
    # Longer than the column once its domain is an A-label: shortened in its name, as on arrival.
    assert len(stored["m5"]) == 320 and "\u2026" in stored["m5"]
    assert stored["m5"].endswith(f"<{normalize_address('a' * 40 + '@' + 'ü' * 20 + '.de')}>")
