"""The agent API's row errors keep their words for an agent: the API answers in the language its
request asks for (``Accept-Language``, through LocaleMiddleware, as every other message of its
problem documents), so an agent that asks for none gets the English it got before the rows were
translated, and one that asks for German gets rows in the same language as the document's
detail. The German words are the test's own (tests/catalogues.py)."""

from __future__ import annotations

import pytest

from intents.models import Broadcast
from tests.catalogues import serve_catalogue

pytestmark = pytest.mark.django_db

GERMAN = {
    "%(address)s is also on row %(row)s": "%(address)s steht schon in Zeile %(row)s",
    "the template uses {{ %(name)s }}, not given": (
        "die Vorlage verwendet {{ %(name)s }}, hier fehlt es"
    ),
    "%(n)s recipient rows are invalid; nothing was saved.": (
        "%(n)s Empfängerzeilen sind ungültig; nichts wurde gespeichert."
    ),
}
ROWS = [
    {"address": "kim@example.com", "variables": {"name": "Kim"}},
    {"address": "kim@example.com", "variables": {"name": "Kim"}},
    {"address": "lee@example.com", "variables": {}},
]


def refused(api, token, mailbox, key, headers=None) -> dict:
    body = {
        "mailbox": mailbox.address,
        "subject": "Hi",
        "text": "Hi {{ name }}",
        "recipients": ROWS,
    }
    response = api.post("/broadcasts", body, token=token, key=key, headers=headers)
    assert response.status_code == 422
    return response.json()


def test_an_agent_that_asks_for_no_language_gets_the_english_of_before(
    api, token_a, mailbox_a, tmp_path, settings
):
    serve_catalogue(settings, tmp_path, "de", GERMAN)

    problem = refused(api, token_a, mailbox_a, "rows-en")

    assert problem["detail"] == "2 recipient rows are invalid; nothing was saved."
    assert problem["errors"] == [
        {
            "field": "recipients[1].address",
            "row": 2,
            "message": "kim@example.com is also on row 1",
        },
        {
            "field": "recipients[2].variables.name",
            "row": 3,
            "message": "the template uses {{ name }}, not given",
        },
    ]
    assert not Broadcast.objects.exists()


def test_an_agent_that_asks_for_german_gets_its_rows_in_german_as_the_detail(
    api, token_a, mailbox_a, tmp_path, settings
):
    serve_catalogue(settings, tmp_path, "de", GERMAN)

    problem = refused(api, token_a, mailbox_a, "rows-de", headers={"Accept-Language": "de"})

    assert problem["detail"] == "2 Empfängerzeilen sind ungültig; nichts wurde gespeichert."
    assert [e["message"] for e in problem["errors"]] == [
        "kim@example.com steht schon in Zeile 1",
        "die Vorlage verwendet {{ name }}, hier fehlt es",
    ]
