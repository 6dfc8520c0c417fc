"""The send's journal in words: a reply sent through the sandbox, then AgentMail's signed "sent"
and "delivered" webhooks; the send page and the draft page say what happened, and keep the
codes (the action, the worker's and the webhook's labels) out of the text, in attributes only."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from intents import sending
from intents.models import IntentEvent
from tenants.models import User
from tests.factories import approve_new_draft
from tests.webhooks.conftest import delivery_payload, hook_for  # noqa: F401

pytestmark = pytest.mark.django_db


def visible(html: str) -> str:
    """The page's text as read: no tags, so no attribute values (title, data-action)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture
def delivered(tenant_a, member_of, mailbox_factory, sandbox, client, hook_for):  # noqa: F811
    mailbox = mailbox_factory(tenant_a)
    approver = member_of(tenant_a, "approver").user
    intent = approve_new_draft(
        tenant_a,
        mailbox,
        approver,
        to=["maria@example.com"],
        subject="Where is my order?",
        text="It ships today.",
    )
    sending.run_once(worker="host-7:4242:MainThread", limit=5)
    intent.refresh_from_db()
    hook = hook_for(tenant_a)
    for kind in ("sent", "delivered"):
        hook.post(client, delivery_payload(kind, intent))
    client.force_login(approver, backend="django.contrib.auth.backends.ModelBackend")
    return intent, sandbox.ledger(inbox_id=mailbox.inbox_id)


def test_the_send_page_tells_the_journal_in_words_and_keeps_the_codes_in_attributes(
    delivered, tenant_a, client
):
    intent, ledger = delivered
    svix_ids = list(
        IntentEvent.objects.filter(intent=intent, action__startswith="delivery.").values_list(
            "actor_label", flat=True
        )
    )
    html = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode()
    journal = html.split('<ol class="journal">', 1)[1].split("</ol>", 1)[0]
    text = visible(journal)

    assert len(ledger) == 1 and intent.state == "accepted" and len(svix_ids) == 2
    assert (
        'data-action="delivery.sent"' in journal and 'data-action="delivery.delivered"' in journal
    )
    assert "delivery." not in text and "host-7" not in text
    assert not any(svix_id in text for svix_id in svix_ids)
    assert all(f'title="{svix_id}"' in journal for svix_id in svix_ids)
    assert 'title="host-7:4242:MainThread">Worker<' in journal
    assert "Sent · " not in text and " Sent " in text and " Delivered " in text
    assert text.count("maria@example.com") == 2
    assert "AgentMail accepted it on the first request." in text
    assert not re.search(r"(^|\W)sent(\W|$)", text)


def test_the_draft_page_journal_uses_the_same_words(delivered, tenant_a, client):
    intent, _ledger = delivered
    html = client.get(reverse("draft", args=[tenant_a.slug, intent.draft_id])).content.decode()
    journal = visible(html.split('id="journal-title"', 1)[1].split("</ol>", 1)[0])

    assert "delivery." not in journal and "host-7" not in journal
    assert " Delivered " in journal and "AgentMail accepted it on the first request." in journal


def test_the_journal_names_the_approver_by_the_address_they_approved_under(
    delivered, tenant_a, client
):
    """The address changed after the approval: the send's journal says the one they approved
    under and the one now, not that the new address approved; the worker's row is as it was."""
    intent, _ledger = delivered
    old_email = intent.approver.email
    User.objects.filter(pk=intent.approver_id).update(email="ana.new@example.test")

    html = client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode()
    journal = html.split('<ol class="journal">', 1)[1].split("</ol>", 1)[0]

    assert f"{old_email} (now ana.new@example.test)" in visible(journal)
    assert 'title="host-7:4242:MainThread">Worker<' in journal


def test_every_action_a_draft_or_send_journals_has_words_on_its_pages():
    """The retention purge's ``draft.attachment_bytes_purged`` had none: the draft page's journal
    showed the code itself, untranslated, where every other row says what happened."""
    from review.journal_words import ACTIONS
    from tests.console.test_audit_sentences import _written_actions

    written, _ = _written_actions()
    shown_on_pages = {a for a in written if a.split(".")[0] in ("draft", "intent")}

    assert sorted(shown_on_pages - set(ACTIONS)) == []


NO_RIGHT = "The approver no longer has the right to send from this mailbox."
GERMAN_NO_RIGHT = "Wer freigegeben hat, darf aus diesem Postfach nicht mehr senden."


def test_a_send_the_worker_blocked_says_why_in_the_readers_language(
    tenant_a, mailbox_a, member_of, admin_a, signed_in, tmp_path, settings
):
    """The worker's pre-call check writes its reason in English (no reader's language applies
    there); the send's page (its last error and journal) and the attention list showed it so on
    German and Spanish pages."""
    from tenants.models import Membership
    from tests.catalogues import serve_catalogue

    serve_catalogue(settings, tmp_path, "de", {NO_RIGHT: GERMAN_NO_RIGHT})
    approver = member_of(tenant_a, "approver")
    intent = approve_new_draft(tenant_a, mailbox_a, approver.user)
    # The right revoked after the approval, before the worker's call (data setup).
    Membership.objects.filter(pk=approver.pk).update(role="viewer")
    sending.run_once(worker="w", limit=5)
    intent.refresh_from_db()
    admin_a.user.language = "de"
    admin_a.user.save(update_fields=["language"])
    client = signed_in(admin_a.user)

    pages = [
        client.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk])).content.decode(),
        client.get(reverse("attention", args=[tenant_a.slug])).content.decode(),
    ]

    assert (intent.state, intent.last_error_detail) == ("blocked", NO_RIGHT)
    assert [NO_RIGHT in visible(page) for page in pages] == [False, False]
    assert [GERMAN_NO_RIGHT in page for page in pages] == [True, True]
