"""The reasons the worker writes while it settles a send whose outcome is unknown (a refused
replay, a label lookup that failed, found or found nothing, a lookup that AgentMail refused with
the mailbox's key), made through the worker against the sandbox AgentMail and read by a German
reader on the send's page, the attention page and the audit page: each is given in the words of
the table of the system's reasons (``intents.reason_words.SYSTEM_REASONS``) with the values it
was written with (a provider's answer as AgentMail wrote it), never as the stored English
sentence. What is stored does not change."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import translation

from intents import sending
from intents.models import IntentEvent, SendIntent
from intents.reason_words import SYSTEM_REASONS, system_words
from intents.sending.reconcile import ALSO_FOUND, FOUND_BY_LABEL, FOUND_BY_SCAN
from tests.catalogues import GERMAN, serve_catalogue, visible
from tests.review.test_system_reasons_walk import _approve

pytestmark = pytest.mark.django_db


def _run(intent, **fields) -> SendIntent:
    """One worker round for this send, due now (with ``fields`` set first)."""
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now(), **fields)
    sending.run_once(worker="w", limit=1)
    return SendIntent.objects.get(pk=intent.pk)


def _uncertain(tenant, mailbox, make_draft, admin, sandbox, mode: str) -> SendIntent:
    intent = _approve(tenant, make_draft(mailbox), admin)
    sandbox.fault("sends", mode)
    intent = _run(intent)
    assert intent.state == "uncertain"
    return intent


# The rows of settling it (a send's first uncertain row has the provider's answer as its reason).
SETTLING = [
    "intent.reconcile_pending",
    "intent.needs_attention",
    "intent.accepted",
    "intent.key_refused",
]


def _reasons(intent) -> list[str]:
    return list(
        IntentEvent.objects.filter(intent=intent, action__in=SETTLING)
        .exclude(reason="")
        .order_by("pk")
        .values_list("reason", flat=True)
    )


def test_the_reasons_of_settling_an_unknown_outcome_read_in_the_readers_language(
    tenant_a, mailbox_factory, sandbox, make_draft, admin_a, signed_in, settings, tmp_path
):
    settings.SEND_BACKOFF_BASE_SECONDS = 0.01
    settings.SEND_BACKOFF_CAP_SECONDS = 0.05
    admin = admin_a.user
    mailbox = mailbox_factory(tenant_a)
    most = django_settings.SEND_MAX_ATTEMPTS
    # A replay that AgentMail refused: the first call's fate stays unknown.
    refused = _uncertain(tenant_a, mailbox, make_draft, admin, sandbox, "drop_before")
    sandbox.fault("sends", "422_unprocessable")
    refused = _run(refused)
    assert refused.state == "needs_attention"
    # A label lookup that failed, then kept failing.
    failing = _uncertain(tenant_a, mailbox, make_draft, admin, sandbox, "drop_before")
    sandbox.fault("list_messages", "500_before", times=0)
    assert _run(failing, attempts=most).state == "uncertain"
    assert _run(failing, attempts=2 * most).state == "needs_attention"
    sandbox.clear_faults()
    # A lookup that found nothing, and one that found the message.
    missing = _uncertain(tenant_a, mailbox, make_draft, admin, sandbox, "drop_before")
    assert _run(missing, attempts=most).state == "needs_attention"
    found = _uncertain(tenant_a, mailbox, make_draft, admin, sandbox, "500_after")
    assert _run(found, attempts=most).state == "accepted"
    # A lookup AgentMail refused with the mailbox's key (the key is marked: last, as it stops
    # the mailbox's other sends).
    key = _uncertain(tenant_a, mailbox, make_draft, admin, sandbox, "drop_before")
    sandbox.fault("list_messages", "401_unknown_key")
    key = _run(key, attempts=most)
    assert key.state == "uncertain"
    assert IntentEvent.objects.filter(intent=key, action="intent.key_refused").exists()

    stored = {
        intent.pk: _reasons(intent)
        + ([intent.last_error_detail] if intent.last_error_detail else [])
        for intent in SendIntent.objects.filter(
            pk__in=[i.pk for i in (refused, failing, missing, found, key)]
        )
    }
    with translation.override("en"):
        msgids = [str(words) for words in SYSTEM_REASONS.values()]
        words = {s: system_words(s) for sentences in stored.values() for s in sentences}
        unread = sorted(s for s, w in words.items() if w is None)
        english = {s: str(w) for s, w in words.items() if w is not None}
    serve_catalogue(settings, tmp_path, "de", {m: GERMAN + m for m in msgids})
    admin.language = "de"
    admin.save(update_fields=["language"])
    client = signed_in(admin)

    def page(name: str, *args) -> str:
        return visible(client.get(reverse(name, args=[tenant_a.slug, *args])).content.decode())

    audit = page("admin_audit")
    attention = page("attention")
    untranslated = []
    for pk, sentences in stored.items():
        send = page("outbox_intent", pk)
        for sentence in sentences:
            german = GERMAN + english.get(sentence, sentence)
            if german not in send or sentence in send.replace(german, ""):
                untranslated.append(("outbox_intent", sentence))
            if sentence in audit.replace(german, ""):
                untranslated.append(("admin_audit", sentence))
            if sentence in attention.replace(german, ""):
                untranslated.append(("attention", sentence))
    assert unread == [], "\n".join(unread)
    assert untranslated == [], "\n".join(map(repr, untranslated))


@pytest.mark.parametrize("scan", [False, True])
@pytest.mark.parametrize("others", [0, 2])
def test_a_send_found_by_its_label_is_read_by_how_it_was_found(scan, others):
    how = (FOUND_BY_SCAN if scan else FOUND_BY_LABEL) + (ALSO_FOUND if others else "")
    stored = how % {"label": "cs-intent-7", "others": others}
    with translation.override("en"):
        words = str(system_words(stored))
        expected = str(SYSTEM_REASONS[how]) % {"label": "cs-intent-7", "others": str(others)}
    assert words == expected
