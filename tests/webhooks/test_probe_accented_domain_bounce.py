"""A delivery event's recipients are read in the one form approved recipients are stored in
(``common.addresses.normalize_address``: the domain as an A-label). They were only lower-cased,
so a bounce naming juergen@bücher.test (the Unicode spelling of the approved
juergen@xn--bcher-kva.test) matched nobody: the recipient's state never moved and the address
was never suppressed (found by probe 7, webhooks and delivery events)."""

from __future__ import annotations

import pytest

from common.addresses import normalize_address
from intents.models import Suppression
from tests.webhooks.conftest import delivery_payload
from webhooks.models import RecipientDelivery, WebhookEvent
from webhooks.normalize import normalize

APPROVED = normalize_address("juergen@bücher.test")


@pytest.mark.parametrize(
    "written", ["juergen@bücher.test", "Jürgen <Juergen@BÜCHER.test>", "juergen@bu\u0308cher.test"]
)
def test_a_bounce_naming_the_unicode_domain_bounces_and_suppresses_the_approved_recipient(
    client, tenant_a, hook_for, mailbox_row, intent_row, written
):
    hook = hook_for(tenant_a)
    intent = intent_row(mailbox_row(tenant_a), to=[APPROVED, "ana@customer.test"])

    hook.post(client, delivery_payload("bounced", intent, recipients=[written]))

    assert APPROVED == "juergen@xn--bcher-kva.test"
    assert WebhookEvent.objects.get().outcome == "1 of 1 recipients moved to bounced; 1 suppressed"
    assert list(RecipientDelivery.objects.values_list("address", "state")) == [
        (APPROVED, "bounced")
    ]
    assert list(Suppression.objects.values_list("address", flat=True)) == [APPROVED]


def test_a_recipient_that_is_no_valid_address_is_still_read_lower_cased():
    event = normalize(
        delivery_payload("delivered", ("in@x.test", "<m@x.test>", "t", ["Ünknown@Localhost"]))
    )

    assert event.recipients == ("ünknown@localhost",)
