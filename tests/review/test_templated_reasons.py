"""Reasons the system writes with a variable part (a worker's label, a count of attempts and the
provider's last answer), read by a German reader: the send's page and its journal, the console's
audit page give the table's words (``intents.reason_words.SYSTEM_REASONS``, whose entries may hold
named placeholders) with the stored values filled in, never the stored English sentence. What is
stored does not change."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import translation

from intents import sending
from intents.models import IntentEvent, SendIntent
from intents.reason_words import SYSTEM_REASONS, system_words
from intents.sending.precheck import MAILBOX_INACTIVE
from intents.sending.record import GAVE_UP
from intents.sending.sweep import LEASE_EXPIRED_DETAIL, LEASE_EXPIRED_REASON
from mailboxes.models import Mailbox
from tests.catalogues import serve_catalogue, visible
from tests.review.test_system_reasons_walk import _approve

pytestmark = pytest.mark.django_db

WORKER = "host-<b>7</b>:42:main"


def _german(settings, tmp_path, *templates: str) -> None:
    with translation.override("en"):
        msgids = [str(SYSTEM_REASONS[t]) for t in templates]
    serve_catalogue(settings, tmp_path, "de", {m: "[de] " + m for m in msgids})


def test_a_lease_that_expired_reads_in_the_readers_language_with_its_worker(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, settings, tmp_path
):
    admin = admin_a.user
    intent = _approve(tenant_a, make_draft(mailbox_a), admin)
    assert sending.intent_claim(worker=WORKER, intent_id=intent.pk)
    SendIntent.objects.filter(pk=intent.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    assert sending.intents_release_expired_leases() == 1
    stored_reason = f"lease of {WORKER} expired"
    stored_detail = f"The lease of {WORKER} expired."
    assert SendIntent.objects.get(pk=intent.pk).last_error_detail == stored_detail
    assert IntentEvent.objects.filter(intent=intent, reason=stored_reason).exists()
    _german(settings, tmp_path, LEASE_EXPIRED_REASON, LEASE_EXPIRED_DETAIL)
    admin.language = "de"
    admin.save(update_fields=["language"])
    client = signed_in(admin)

    send = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode()
    audit = client.get(reverse("admin_audit", args=[tenant_a.slug])).content.decode()

    with translation.override("en"):
        reason_words = str(SYSTEM_REASONS[LEASE_EXPIRED_REASON]) % {"worker": WORKER}
        detail_words = str(SYSTEM_REASONS[LEASE_EXPIRED_DETAIL]) % {"worker": WORKER}
    assert "[de] " + reason_words in visible(send)
    assert "[de] " + detail_words in visible(send)
    assert stored_reason not in visible(send).replace(reason_words, "")
    assert stored_detail not in visible(send).replace(detail_words, "")
    assert "[de] " + reason_words in visible(audit)
    assert "<b>7</b>" not in send + audit  # the worker's label is escaped as any text


def test_giving_up_after_attempts_reads_in_the_readers_language_with_the_last_answer(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, settings, tmp_path
):
    admin = admin_a.user
    settings.SEND_MAX_ATTEMPTS = 1
    intent = _approve(tenant_a, make_draft(mailbox_a), admin)
    settings.AGENTMAIL_BASE_URL = "http://127.0.0.1:9"
    sending.run_once(worker="w", limit=1)
    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == ("failed", "max_attempts")
    stored = intent.last_error_detail
    match = re.fullmatch(r"Gave up after 1 attempts; last: (.+)", stored, re.S)
    assert match is not None
    last = match.group(1)
    assert IntentEvent.objects.filter(intent=intent, reason=stored).exists()
    _german(settings, tmp_path, GAVE_UP)
    admin.language = "de"
    admin.save(update_fields=["language"])
    client = signed_in(admin)

    send = visible(
        client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode()
    )
    audit = visible(client.get(reverse("admin_audit", args=[tenant_a.slug])).content.decode())

    with translation.override("en"):
        words = str(SYSTEM_REASONS[GAVE_UP]) % {"attempts": 1, "last": last}
    assert "[de] " + words in send
    assert stored not in send.replace(words, "")
    assert "[de] " + words in audit


def test_a_send_blocked_as_its_mailbox_is_not_active_reads_in_the_readers_language(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, settings, tmp_path
):
    admin = admin_a.user
    intent = _approve(tenant_a, make_draft(mailbox_a), admin)
    Mailbox.objects.filter(pk=mailbox_a.pk).update(status=Mailbox.Status.DISABLED)
    sending.run_once(worker="w", limit=1)
    intent.refresh_from_db()
    stored = f"{mailbox_a.address} is not active."
    assert (intent.state, intent.last_error_detail) == ("blocked", stored)
    assert IntentEvent.objects.filter(intent=intent, reason=stored).exists()
    _german(settings, tmp_path, MAILBOX_INACTIVE)
    admin.language = "de"
    admin.save(update_fields=["language"])
    client = signed_in(admin)

    send = visible(
        client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode()
    )
    audit = visible(client.get(reverse("admin_audit", args=[tenant_a.slug])).content.decode())

    with translation.override("en"):
        words = str(SYSTEM_REASONS[MAILBOX_INACTIVE]) % {"address": mailbox_a.address}
    assert "[de] " + words in send
    assert stored not in send.replace(words, "")
    assert "[de] " + words in audit


def test_a_sentence_two_templates_read_is_read_by_the_one_with_more_of_its_words():
    stored = GAVE_UP % {"attempts": 3, "last": MAILBOX_INACTIVE % {"address": "a@x.test"}}
    with translation.override("en"):
        words = str(system_words(stored))
        expected = str(SYSTEM_REASONS[GAVE_UP]) % {
            "attempts": "3",
            "last": "a@x.test is not active.",
        }
    assert words == expected
