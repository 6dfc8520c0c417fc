"""One form of an address (common.addresses.normalize_address, re-exported by intents.policy)
for every entry that stores one and every check that compares one: what it refuses, what it
makes of another spelling of the same address, and the rows written before it took this form."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from intents.models import Suppression
from intents.policy import normalize_address, recipient_problems
from intents.services.suppressions import suppressions_record
from mailboxes.models import Mailbox
from tests.factories import make_local_mailbox

# Each of these is refused whole: a second address, a header or a routing hint hidden in one
# string never reaches the provider, which reads "Name <addr>" as addr.
REFUSED = [
    '"ok@corp.example" <evil@x.example>',
    "ok@corp.example <evil@x.example>",
    "a(comment)@corp.example",
    "a@corp.example(comment)",
    '"evil@x.example"@corp.example',
    "@corp.example:evil@x.example",
    "a@corp.example,b@x.example",
    "a@corp.example;b@x.example",
    "a@corp.example\r\nBcc: e@x.example",
    "a\x00@corp.example",
    "a@corp.example.",
    "@corp.example",
    "a@[127.0.0.1]",
    "a@127.0.0.1",
    "a@localhost",
    "a\u202e@corp.example",  # RIGHT-TO-LEFT OVERRIDE
    "a\u200b@corp.example",  # ZERO WIDTH SPACE
    "a" * 250 + "@corp.example",
]

# Spellings of one address give one form: lower case, the domain as its A-label.
SAME = [
    ("User@Corp.EXAMPLE", "user@corp.example"),
    (" a@corp.example\n", "a@corp.example"),  # whitespace around it is not part of it
    ("a@\uff43orp.example", "a@corp.example"),  # a fullwidth c, mapped by IDNA
    ("a@corp\u3002example", "a@corp.example"),  # an ideographic full stop
    ("Ana@B\u00dcCHER.de", "ana@xn--bcher-kva.de"),
    ("ana@XN--BCHER-KVA.de", "ana@xn--bcher-kva.de"),
    ("billing@ex\u0430mple.com", "billing@xn--exmple-4nf.com"),  # a Cyrillic small a
    ("Zo\u00eb@example.com", "zo\u00eb@example.com"),  # the local part stays Unicode (NFC)
    ("Zoe\u0308@example.com", "zo\u00eb@example.com"),  # ... also when written decomposed
    # A capital with no precomposed form (J + caron; Greek capital iota + diaeresis + acute)
    # lower-cases to a letter that has one: the form is composed after lower-casing too, or a
    # second pass (every check of a stored address) gave another string than the first.
    ("J\u030cx@example.com", "\u01f0x@example.com"),
    ("\u0399\u0308\u0301x@example.com", "\u0390x@example.com"),
]


@pytest.mark.parametrize("written", REFUSED, ids=range(len(REFUSED)))
def test_an_address_with_something_else_in_it_is_refused(written):
    with pytest.raises(ValueError):
        normalize_address(written)


@pytest.mark.parametrize(("written", "normal"), SAME, ids=[n for _, n in SAME])
def test_every_spelling_of_an_address_has_one_form_that_is_its_own(written, normal):
    assert normalize_address(written) == normal
    assert normalize_address(normal) == normal


@pytest.mark.django_db
def test_a_suppression_recorded_in_any_spelling_stops_a_draft_in_another(tenant_a):
    """The only writer stores what sends are checked against, whatever its caller holds: a
    send approved before the domain's form changed bounces under the old spelling."""
    changed = suppressions_record(
        tenant_id=tenant_a.pk,
        addresses=["Ana@B\u00fccher.de", "ana@xn--bcher-kva.de"],
        reason=Suppression.Reason.BOUNCED,
        source="evt_1",
    )
    mailbox = make_local_mailbox(tenant_a)

    assert changed == ["ana@xn--bcher-kva.de"]
    assert list(Suppression.objects.values_list("address", flat=True)) == ["ana@xn--bcher-kva.de"]
    problems = recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=["ANA@BÜCHER.DE"])
    assert [p.code for p in problems] == ["suppressed"]


@pytest.mark.django_db
def test_the_migration_writes_suppressions_with_ascii_domains_keeping_the_stronger_twin(
    tenant_a, tenant_b
):
    make = Suppression.objects.create
    make(tenant=tenant_a, address="ana@b\u00fccher.de", reason="manual", source="p")
    make(tenant=tenant_a, address="ana@xn--bcher-kva.de", reason="bounced", source="s")
    make(tenant=tenant_a, address="bo@b\u00fccher.de", reason="rejected", source="s")
    make(tenant=tenant_b, address="bo@b\u00fccher.de", reason="rejected", source="s")
    make(tenant=tenant_b, address="bo@xn--bcher-kva.de", reason="complained", source="s")
    make(tenant=tenant_b, address="zo\u00eb@example.com", reason="manual", source="p")

    migration = importlib.import_module("intents.migrations.0026_suppressions_ascii_domains")
    migration.normalise(apps, None)

    rows = set(Suppression.objects.values_list("tenant__slug", "address", "reason"))
    assert rows == {
        ("tenant-a", "ana@xn--bcher-kva.de", "manual"),
        ("tenant-a", "bo@xn--bcher-kva.de", "rejected"),
        ("tenant-b", "bo@xn--bcher-kva.de", "complained"),
        ("tenant-b", "zo\u00eb@example.com", "manual"),
    }


@pytest.mark.django_db
def test_the_migration_writes_allowed_addresses_in_the_form_recipients_are_compared_in(tenant_a):
    mailbox = make_local_mailbox(
        tenant_a,
        policy_mode=Mailbox.PolicyMode.RESTRICTED,
        allowed_addresses=["ana@b\u00fccher.de", "ana@xn--bcher-kva.de", "x@example.com"],
    )

    migration = importlib.import_module("mailboxes.migrations.0009_allow_lists_normalised")
    migration.normalise(apps, None)

    mailbox.refresh_from_db()
    assert mailbox.allowed_addresses == ["ana@xn--bcher-kva.de", "x@example.com"]
    assert mailbox.allows_recipient(normalize_address("Ana@Bücher.de"))


@pytest.mark.django_db
def test_the_migrations_compose_stored_suppressions_and_allowed_addresses(tenant_a, tenant_b):
    """Stored before addresses were composed again after lower-casing (intents 0028, mailboxes
    0010): the decomposed spelling becomes the one normalisation now gives."""
    decomposed, composed = "j\u030cx@example.com", "\u01f0x@example.com"
    assert normalize_address(decomposed) == composed
    make = Suppression.objects.create
    make(tenant=tenant_a, address=decomposed, reason="manual", source="p")
    make(tenant=tenant_b, address=decomposed, reason="rejected", source="s")
    make(tenant=tenant_b, address=composed, reason="bounced", source="s")
    mailbox = make_local_mailbox(
        tenant_a,
        policy_mode=Mailbox.PolicyMode.RESTRICTED,
        allowed_addresses=[decomposed, composed, "x@example.com"],
    )

    importlib.import_module("intents.migrations.0028_suppressions_composed").compose(apps, None)
    importlib.import_module("mailboxes.migrations.0010_allow_lists_composed").compose(apps, None)

    rows = set(Suppression.objects.values_list("tenant__slug", "address", "reason"))
    assert rows == {("tenant-a", composed, "manual"), ("tenant-b", composed, "bounced")}
    mailbox.refresh_from_db()
    assert mailbox.allowed_addresses == [composed, "x@example.com"]
    assert mailbox.allows_recipient(normalize_address("J\u030cx@example.com"))
