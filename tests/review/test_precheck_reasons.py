"""The worker's pre-call check refuses a send with a sentence that names a recipient, a mailbox or
an attachment (an address put on the suppression list or outside the mailbox's policy after the
approval, an attachment whose stored bytes changed). Made through the worker and read by a German
reader on the send's page, the attention page and the audit page: each is given in the words of
the table of the system's reasons (``intents.reason_words.SYSTEM_REASONS``) with its values, never
as the stored English sentence. What is stored does not change."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import translation

from intents import sending
from intents.attachments import Upload
from intents.models import AttachmentBlob, DraftAttachment, IntentEvent, SendIntent
from intents.policy import own_mailbox_refusal
from intents.reason_words import SYSTEM_REASONS, system_words
from intents.services.suppressions import suppressions_record
from mailboxes.models import Mailbox
from tests.catalogues import GERMAN, serve_catalogue, visible
from tests.review.test_system_reasons_walk import _approve

pytestmark = pytest.mark.django_db

PDF = b"%PDF-1.4\n% an invoice\n" + bytes(range(256))


def test_the_pre_call_checks_refusals_with_values_read_in_the_readers_language(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, settings, tmp_path
):
    admin = admin_a.user
    suppressed = _approve(tenant_a, make_draft(mailbox_a, to=["gone@example.com"]), admin)
    outside = _approve(tenant_a, make_draft(mailbox_a, to=["someone@elsewhere.org"]), admin)
    routed = _approve(tenant_a, make_draft(mailbox_a, to=["a%b.test@partner.org"]), admin)
    changed = _approve(
        tenant_a,
        make_draft(mailbox_a, attachments=[Upload("invoice 7.pdf", "application/pdf", PDF)]),
        admin,
    )
    suppressions_record(
        tenant_id=tenant_a.pk, addresses=["gone@example.com"], reason="bounced", source="test"
    )
    Mailbox.objects.filter(pk=mailbox_a.pk).update(
        policy_mode=Mailbox.PolicyMode.RESTRICTED,
        allowed_domains=["example.com", "partner.org"],
    )
    blob = DraftAttachment.objects.get(version_id=changed.draft_version_id).blob
    AttachmentBlob.objects.filter(pk=blob.pk).update(data=PDF.replace(b"invoice", b"INVOICE"))
    sending.run_once(worker="w", limit=10)

    ended = SendIntent.objects.filter(pk__in=[suppressed.pk, outside.pk, routed.pk, changed.pk])
    assert {i.pk: i.state for i in ended} == {
        suppressed.pk: "blocked",
        outside.pk: "blocked",
        routed.pk: "blocked",
        changed.pk: "failed",
    }
    stored = {i.pk: i.last_error_detail for i in ended}
    assert "%" in stored[routed.pk].replace("a%b.test", "")  # "(with % or !)"
    for pk, sentence in stored.items():
        assert IntentEvent.objects.filter(intent_id=pk, reason=sentence).exists()
    with translation.override("en"):
        msgids = [str(words) for words in SYSTEM_REASONS.values()]
        words = {s: system_words(s) for s in stored.values()}
        unread = sorted(s for s, w in words.items() if w is None)
        english = {s: str(w) for s, w in words.items() if w is not None}
    serve_catalogue(settings, tmp_path, "de", {m: GERMAN + m for m in msgids})
    admin.language = "de"
    admin.save(update_fields=["language"])
    client = signed_in(admin)

    def page(name: str, *args) -> str:
        return visible(client.get(reverse(name, args=[tenant_a.slug, *args])).content.decode())

    audit = page("admin_audit")
    untranslated = []
    for pk, sentence in stored.items():
        send = page("outbox_intent", pk)
        german = GERMAN + english.get(sentence, sentence)
        if german not in send or sentence in send.replace(german, ""):
            untranslated.append(("outbox_intent", sentence))
        if german not in audit or sentence in audit.replace(german, ""):
            untranslated.append(("admin_audit", sentence))
    assert unread == [], "\n".join(unread)
    assert untranslated == [], "\n".join(map(repr, untranslated))


def test_a_refusal_of_the_mailboxs_own_address_is_read_with_the_address():
    # The approval refuses it, so the worker meets it only for a send approved before the rule.
    stored = own_mailbox_refusal("support+x@acme.test")
    with translation.override("en"):
        words = system_words(stored)
    assert words is not None
    assert "support+x@acme.test" in str(words)


def test_a_worker_in_another_language_stores_its_refusals_in_english(
    tenant_a, mailbox_a, make_draft, admin_a
):
    """The table of the system's reasons reads the English sentence the worker stores. A worker
    whose active language was another (a deployment's LANGUAGE_CODE = "de", a task run inside a
    German request's thread) stored the recipient refusals in it, which no reader's page could
    then give in their own words."""
    suppressed = _approve(tenant_a, make_draft(mailbox_a, to=["gone@example.com"]), admin_a.user)
    suppressions_record(
        tenant_id=tenant_a.pk, addresses=["gone@example.com"], reason="bounced", source="test"
    )
    with translation.override("de"):
        sending.run_once(worker="w", limit=10)

    suppressed.refresh_from_db()
    assert suppressed.state == "blocked"
    assert suppressed.last_error_detail.startswith("gone@example.com is on this tenant's")
    with translation.override("en"):
        assert system_words(suppressed.last_error_detail) is not None
