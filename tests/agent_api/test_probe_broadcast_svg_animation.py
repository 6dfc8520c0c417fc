"""Probe: a placeholder in an SVG animation's values picks a link's address.

``<animate attributeName="href" values="{{ link }}">`` (or ``<set ... to="{{ link }}">``) sets
the href of the enclosing ``<a>`` to the value, so a row's ``javascript:`` value became a script
link in the one message the reviewer was not shown. The value sat in a quoted attribute that is
not a URL attribute, so neither the template check nor the rows' URL check refused it."""

from __future__ import annotations

import pytest

from intents.models import Broadcast
from tests.agent_api.test_broadcasts import body

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "html",
    [
        '<svg><a><animate attributeName="href" values="{{ link }}"/><text>Track</text></a></svg>',
        '<svg><a><set attributeName="href" to="{{ link }}"/><text>Track</text></a></svg>',
        '<svg><a><animate attributeName="{{ link }}" to="x"/><text>Track</text></a></svg>',
        '<svg><a><ANIMATE attributeName="xlink:href" from="{{ link }}"/><text>T</text></a></svg>',
    ],
    ids=["animate-values", "set-to", "animate-attribute-name", "animate-from"],
)
def test_a_placeholder_in_an_svg_animation_is_refused(api, token_a, mailbox_a, html):
    recipients = [
        {
            "address": "c1@example.com",
            "variables": {"name": "N", "order": 1, "link": "https://a.test/"},
        },
        {
            "address": "c2@example.com",
            "variables": {"name": "N", "order": 2, "link": "javascript:alert(1)"},
        },
    ]

    response = api.post(
        "/broadcasts", body(mailbox_a, html=html, recipients=recipients), token=token_a, key="svg"
    )

    assert response.status_code == 422, response.content
    problem = response.json()
    assert problem["code"] == "template_invalid"
    assert problem["errors"][0]["field"] == "html"
    assert "{{ link }}" in problem["detail"]
    assert not Broadcast.objects.exists()
