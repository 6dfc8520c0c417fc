"""The reviewer's edit form and the agent API refuse one recipient named twice alike (the draft
service's rule, ``duplicate_recipient``): the page shows the refusal under the list the repeat is
in, naming both spellings, keeps what the person typed, and saves nothing."""

import pytest
from django.urls import reverse
from django.utils import translation

from intents.models import DraftVersion, IntentEvent

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _english_afterwards():
    """A request leaves its language active on the thread (Django's LocaleMiddleware does not
    reset it): tests of other modules that run next on this thread expect English."""
    yield
    translation.deactivate()


def test_a_recipient_typed_twice_in_two_spellings_is_refused_and_nothing_is_saved(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, to=["maria@customer.test"])
    events = IntentEvent.objects.count()
    client = signed_in(admin_a.user)
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])

    refused = client.post(
        url,
        {
            "base_version": 1,
            "to": "maria@customer.test",
            "cc": "billing@customer.test, Maria@Customer.TEST",
            "bcc": "",
            "subject": "Your refund, as promised",
            "text": "Dear Maria, my carefully worded apology.",
            "html": "",
        },
    )

    body = refused.content.decode()
    assert refused.status_code == 400
    assert refused.context["form"].errors["cc"] == [
        "Maria@Customer.TEST in cc is the same address as maria@customer.test in to. "
        "Name each recipient once across to, cc and bcc."
    ]
    assert "Dear Maria, my carefully worded apology.</textarea>" in body
    assert DraftVersion.objects.filter(draft=draft).count() == 1
    assert IntentEvent.objects.count() == events


def test_the_refusal_is_in_the_readers_language(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, to=["maria@customer.test"])
    admin_a.user.language = "de"
    admin_a.user.save(update_fields=["language"])
    client = signed_in(admin_a.user)
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])

    refused = client.post(
        url,
        {
            "base_version": 1,
            "to": "maria@customer.test maria@customer.test",
            "subject": "Your refund",
            "text": "Hello",
        },
    )

    assert refused.status_code == 400
    assert refused.context["form"].errors["to"] == [
        "maria@customer.test steht zweimal in to. "
        "Nennen Sie jeden Empfänger nur einmal, über to, cc und bcc hinweg."
    ]
    assert DraftVersion.objects.filter(draft=draft).count() == 1


@pytest.mark.parametrize(
    ("cc", "named"),
    [
        ("billing@customer.test\r\n", "U+000D"),
        ("billing@customer.test\x1f", "U+001F"),
        ("billing@customer.test\u2028", "U+2028 LINE SEPARATOR"),
    ],
)
def test_a_control_character_or_line_break_in_a_recipient_field_is_refused(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, cc, named
):
    """A person types spaces between addresses, not line breaks or control characters (a text
    field cannot even hold a line break): those were taken as separators, or stripped, without
    a word, like an agent's "ana@example.com\\r\\n"."""
    draft = make_draft(mailbox_a, to=["maria@customer.test"])
    events = IntentEvent.objects.count()
    client = signed_in(admin_a.user)
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])

    refused = client.post(
        url,
        {"base_version": 1, "to": "maria@customer.test", "cc": cc, "subject": "Hi", "text": "Hi"},
    )

    assert refused.status_code == 400
    [said] = refused.context["form"].errors["cc"]
    assert said.startswith(f"This field holds {named}")
    assert DraftVersion.objects.filter(draft=draft).count() == 1
    assert IntentEvent.objects.count() == events


def test_spaces_typed_around_and_between_addresses_still_pass(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A no-break space or an ideographic space (U+3000, as a Japanese keyboard types one)
    separates addresses like a space."""
    draft = make_draft(mailbox_a, to=["maria@customer.test"])
    client = signed_in(admin_a.user)
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])

    saved = client.post(
        url,
        {
            "base_version": 1,
            "to": " maria@customer.test\u00a0",
            "cc": "a@customer.test,\u3000b@customer.test\t",
            "subject": "Hi",
            "text": "Hi",
        },
    )

    assert saved.status_code == 302, saved.content
    version = DraftVersion.objects.filter(draft=draft).latest("number")
    assert (version.to, version.cc) == (
        ["maria@customer.test"],
        ["a@customer.test", "b@customer.test"],
    )
