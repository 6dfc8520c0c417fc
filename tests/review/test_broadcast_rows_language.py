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


# Each reason as email-validator words it, and the row that gets it.
REFUSED_ADDRESSES = {
    "not-an-address": "An email address must have an @-sign.",
    "@example.com": "There must be something before the @-sign.",
    "kim@": "There must be something after the @-sign.",
    "ki,m@example.com": "The email address contains invalid characters before the @-sign",
    "kim@exa_mple.com": "The part after the @-sign contains invalid characters",
    "kim@example..com": "An email address cannot have two periods in a row.",
}
REASONS = {
    "de": {
        "%(address)s is not a valid email address: %(reason)s": (
            "%(address)s ist keine gültige E-Mail-Adresse: %(reason)s"
        ),
        "it has no @ sign": "es fehlt das @",
        "nothing is written before the @ sign": "vor dem @ steht nichts",
        "nothing is written after the @ sign": "nach dem @ steht nichts",
        "the part before the @ sign is not valid": "der Teil vor dem @ ist ungültig",
        "the part after the @ sign is not a valid domain name": (
            "der Teil nach dem @ ist kein gültiger Domainname"
        ),
        "it is not written the way an email address is": "so schreibt sich keine E-Mail-Adresse",
    },
    "es": {
        "%(address)s is not a valid email address: %(reason)s": (
            "%(address)s no es una dirección de correo válida: %(reason)s"
        ),
        "it has no @ sign": "le falta la @",
        "nothing is written before the @ sign": "no hay nada antes de la @",
        "nothing is written after the @ sign": "no hay nada después de la @",
        "the part before the @ sign is not valid": "la parte antes de la @ no es válida",
        "the part after the @ sign is not a valid domain name": (
            "la parte después de la @ no es un nombre de dominio válido"
        ),
        "it is not written the way an email address is": "no está escrita como una dirección",
    },
}


@pytest.mark.parametrize("lang", ["de", "es"])
def test_a_refused_address_gets_its_reason_in_the_readers_language(
    signed_in, member_of, tenant_a, tmp_path, settings, lang
):
    """email-validator's reason was put after the translated sentence as it came, in English:
    'not-an-address ist keine gültige E-Mail-Adresse: An email address must have an @-sign.'"""
    words = REASONS[lang]
    serve_catalogue(settings, tmp_path, lang, words)
    mailbox = make_local_mailbox(tenant_a)
    user = member_of(tenant_a, "approver").user
    user.language = lang
    user.save(update_fields=["language"])
    upload = "address,name\n" + "".join(f'"{a}",Kim\n' for a in REFUSED_ADDRESSES)

    text = page(signed_in(user), tenant_a, mailbox, upload, "rows.csv")

    shown = [english for english in REFUSED_ADDRESSES.values() if english in text]
    assert shown == []
    assert "@-sign" not in text
    for reason in list(words.values())[1:]:
        assert reason in text


def test_an_english_reader_keeps_email_validators_own_reason(signed_in, member_of, tenant_a):
    mailbox = make_local_mailbox(tenant_a)
    upload = "address,name\n" + "".join(f'"{a}",Kim\n' for a in REFUSED_ADDRESSES)

    text = page(signed_in(member_of(tenant_a, "approver").user), tenant_a, mailbox, upload, "r.csv")

    assert [english for english in REFUSED_ADDRESSES.values() if english not in text] == []
