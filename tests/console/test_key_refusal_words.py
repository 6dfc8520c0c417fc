"""A mailbox whose key AgentMail refused shows the refusal's detail on its page: AgentMail's
answer as written, or a sentence of the system's (a label lookup's refusal, an inbox being made
again), which a German reader reads in the words of the table of the system's reasons
(``intents.reason_words.SYSTEM_REASONS``), never as the stored English sentence."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse
from django.utils import translation

from intents.reason_words import SYSTEM_REASONS
from intents.sending.reconcile import LOOKUP_REFUSED
from mailboxes.models import Mailbox
from mailboxes.recovery import INBOX_LOST_DETAIL
from tests.catalogues import serve_catalogue

pytestmark = pytest.mark.django_db

GERMAN = "[de] "


def visible(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


@pytest.mark.parametrize(
    ("template", "values"),
    [(LOOKUP_REFUSED, {"status": 401, "code": "unknown_api_key"}), (INBOX_LOST_DETAIL, {})],
)
def test_a_key_refusal_the_system_wrote_reads_in_the_readers_language(
    tenant_a, mailbox_a, admin_a, signed_in, settings, tmp_path, template, values
):
    stored = template % values if values else template
    Mailbox.objects.filter(pk=mailbox_a.pk).update(
        key_refused_at="2026-01-01T00:00:00Z", key_refused_detail=stored
    )
    with translation.override("en"):
        words = str(SYSTEM_REASONS[template])
    serve_catalogue(settings, tmp_path, "de", {words: GERMAN + words})
    admin_a.user.language = "de"
    admin_a.user.save(update_fields=["language"])

    page = signed_in(admin_a.user).get(
        reverse("mailbox_detail", args=[tenant_a.slug, mailbox_a.pk])
    )

    text = visible(page.content.decode())
    german = GERMAN + (words % {k: str(v) for k, v in values.items()} if values else words)
    assert german in text
    assert stored not in text.replace(german, "")


def test_agentmails_own_answer_is_shown_as_written(tenant_a, mailbox_a, admin_a, signed_in):
    answer = "401 unknown_api_key: The API key is not valid"
    Mailbox.objects.filter(pk=mailbox_a.pk).update(
        key_refused_at="2026-01-01T00:00:00Z", key_refused_detail=answer
    )

    page = signed_in(admin_a.user).get(
        reverse("mailbox_detail", args=[tenant_a.slug, mailbox_a.pk])
    )

    assert answer in visible(page.content.decode())
