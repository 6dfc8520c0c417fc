"""The bad rows of a broadcast's recipients, listed on review's form in the reader's language
(they were English on German and Spanish pages: the rows' messages were plain f-strings).

The German words are the test's own (tests/catalogues.py), so this holds whatever the shipped
catalogues say: each message goes through gettext, its values filled in after."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from intents.models import Broadcast
from tests.catalogues import serve_catalogue
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db

GERMAN = {
    "%(address)s is also on row %(row)s": "%(address)s steht schon in Zeile %(row)s",
    "%(address)s is the same address as %(first)s on row %(row)s": (
        "%(address)s ist dieselbe Adresse wie %(first)s in Zeile %(row)s"
    ),
    "the template uses {{ %(name)s }}, not given": (
        "die Vorlage verwendet {{ %(name)s }}, hier fehlt es"
    ),
    "has %(n)s fields, the header %(header)s (quote a value that holds a comma)": (
        "hat %(n)s Felder, die Kopfzeile %(header)s (Werte mit Komma in Anführungszeichen)"
    ),
    "%(address)s is not a valid email address: %(reason)s": (
        "%(address)s ist keine gültige E-Mail-Adresse: %(reason)s"
    ),
    "longer than %(n)s characters": "länger als %(n)s Zeichen",
}

ROWS = (
    "address,name\n"
    "kim@example.com,Kim\n"
    "kim@example.com,Kim again\n"
    "KIM@Example.com,Kim in capitals\n"
    "not-an-address,Bo\n"
    f"long@example.com,{'x' * 2001}\n"
)
COLUMNS = "address,name\nann@example.com,Ann,extra\n"
UNFILLED = '[{"address": "lee@example.com", "variables": {}}]'


def page(client, tenant, mailbox, upload: str, name: str) -> str:
    response = client.post(
        f"/t/{tenant.slug}/broadcasts/new/",
        {
            "mailbox": str(mailbox.pk),
            "subject": "Hello",
            "text": "Hello {{ name }}",
            "recipients": SimpleUploadedFile(name, upload.encode()),
        },
    )
    assert response.status_code == 422
    return response.content.decode()


def pages(client, tenant, mailbox) -> str:
    return "".join(
        page(client, tenant, mailbox, upload, name)
        for upload, name in ((ROWS, "rows.csv"), (COLUMNS, "columns.csv"), (UNFILLED, "x.json"))
    )


def test_a_german_reader_gets_every_bad_row_in_german(
    signed_in, member_of, tenant_a, tmp_path, settings
):
    serve_catalogue(settings, tmp_path, "de", GERMAN)
    mailbox = make_local_mailbox(tenant_a)
    user = member_of(tenant_a, "approver").user
    user.language = "de"
    user.save(update_fields=["language"])

    text = pages(signed_in(user), tenant_a, mailbox)

    assert "kim@example.com steht schon in Zeile 1" in text
    assert "KIM@Example.com ist dieselbe Adresse wie kim@example.com in Zeile 1" in text
    assert "not-an-address ist keine gültige E-Mail-Adresse: " in text
    assert "länger als 2000 Zeichen" in text
    assert "hat 3 Felder, die Kopfzeile 2 (Werte mit Komma in Anführungszeichen)" in text
    assert "die Vorlage verwendet {{ name }}, hier fehlt es" in text
    assert not Broadcast.objects.exists()


def test_an_english_reader_gets_the_same_words_as_before(
    signed_in, member_of, tenant_a, tmp_path, settings
):
    serve_catalogue(settings, tmp_path, "de", GERMAN)
    mailbox = make_local_mailbox(tenant_a)

    text = pages(signed_in(member_of(tenant_a, "approver").user), tenant_a, mailbox)

    assert "kim@example.com is also on row 1" in text
    assert "KIM@Example.com is the same address as kim@example.com on row 1" in text
    assert "not-an-address is not a valid email address: " in text
    assert "longer than 2000 characters" in text
    assert "has 3 fields, the header 2 (quote a value that holds a comma)" in text
    assert "the template uses {{ name }}, not given" in text
