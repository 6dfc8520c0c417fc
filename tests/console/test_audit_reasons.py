"""The audit page's reasons: the ones the system wrote as fixed text (in English, the codes'
language) in the reader's words, as the send's and the draft's pages give them; a person's or an
agent's reason as written, set apart as outside text; the CSV export keeps the stored reason, as
evidence."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse
from django.utils import timezone, translation

from intents import services
from intents.models import DraftVersion, IntentEvent
from intents.reason_words import SYSTEM_REASONS
from tests.review.wrote_again import customer_wrote, draft_answering
from webhooks.services.apply import HOLD_REASON

pytestmark = pytest.mark.django_db

DEADLINE = "review deadline passed"


def visible(html: str) -> str:
    """The page's text as read: no tags, so no attribute values (the code in a title)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def audit_page(client, tenant) -> str:
    return client.get(reverse("admin_audit", args=[tenant.slug])).content.decode()


@pytest.fixture
def released(tenant_a, mailbox_a, make_draft, admin_a):
    """A reply held by the webhook applier's reason (the customer wrote again) and released by
    the admin, whose release row carries that reason; and a draft the sweep expired."""
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-audit")
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=DraftVersion.objects.get(draft=draft).content_hash,
        actor=admin_a.user,
    )
    message = customer_wrote(tenant_a, mailbox_a, "thr-audit", 2, timezone.now())
    services.intents_hold_stale(
        mailbox=mailbox_a,
        thread_id="thr-audit",
        message_id=message.message_id,
        written_at=message.received_at,
        reason=HOLD_REASON,
    )
    services.intent_release(
        tenant=tenant_a, intent_id=intent.pk, actor=admin_a.user, messages_seen=[message.pk]
    )
    expiring = make_draft(mailbox_a)
    IntentEvent.objects.create(
        tenant=tenant_a,
        draft=expiring,
        actor_kind=IntentEvent.Actor.SWEEP,
        action="draft.expired",
        from_state="pending",
        to_state="expired",
        reason=DEADLINE,
    )
    return intent


@pytest.mark.parametrize("lang", ["de", "es"])
def test_the_audit_page_gives_the_systems_reasons_in_the_readers_language(
    released, tenant_a, admin_a, signed_in, lang
):
    """The hold's reason (on the webhook applier's row and on the person's release that carries
    it) and the sweep's 'review deadline passed' read in English on a German or Spanish audit
    page, while the send's page gave them in the reader's words."""
    admin_a.user.language = lang
    admin_a.user.save(update_fields=["language"])

    page = audit_page(signed_in(admin_a.user), tenant_a)

    with translation.override(lang):
        held, deadline = str(SYSTEM_REASONS[HOLD_REASON]), str(SYSTEM_REASONS[DEADLINE])
    assert held != HOLD_REASON and deadline != DEADLINE.capitalize() + "."
    assert IntentEvent.objects.filter(reason=HOLD_REASON).count() == 2
    assert visible(page).count(HOLD_REASON) == 0 and DEADLINE not in visible(page)
    assert page.count(held) == 2 and page.count(deadline) == 1
    assert page.count(f'title="{HOLD_REASON}"') == 2


def test_a_system_reason_is_the_pages_own_words_not_outside_text(
    released, tenant_a, admin_a, signed_in
):
    page = audit_page(signed_in(admin_a.user), tenant_a)

    with translation.override("en"):
        deadline = str(SYSTEM_REASONS[DEADLINE])
    assert f'<div title="{DEADLINE}">{deadline}</div>' in page


def test_a_persons_reason_is_set_apart_as_outside_text(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A reject reason with a right-to-left override, or one unbroken 2,000-character word, sat
    in the Details cell like the page's own words: the override turned the rest of the cell
    around and the word widened the table past the screen. Every other page sets a person's
    reason apart (data-customer-content: isolated direction, wrapped), and a provider's answer
    that a worker's row carries too. (A reason with the override is refused since; one stored
    before stays in the journal, written here as that row.)"""
    override = "refund \u202eapproved by legal"
    long_word = "x" * 2000
    services.draft_reject(
        tenant=tenant_a, draft_id=make_draft(mailbox_a).pk, reason=long_word, actor=admin_a.user
    )
    IntentEvent.objects.create(
        tenant=tenant_a,
        draft=make_draft(mailbox_a),
        actor_kind=IntentEvent.Actor.PERSON,
        actor_user=admin_a.user,
        action="draft.rejected",
        from_state="pending",
        to_state="rejected",
        reason=override,
    )

    answer = "AgentMail: 422 \u202eno such recipient"
    IntentEvent.objects.create(
        tenant=tenant_a,
        draft=make_draft(mailbox_a),
        actor_kind=IntentEvent.Actor.WORKER,
        action="intent.failed",
        from_state="sending",
        to_state="failed",
        reason=answer,
    )

    page = audit_page(signed_in(admin_a.user), tenant_a)

    assert f"<div data-customer-content>{override}</div>" in page
    assert f"<div data-customer-content>{long_word}</div>" in page
    assert f"<div data-customer-content>{answer}</div>" in page


def test_a_reason_like_the_systems_from_a_person_stays_theirs(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A reviewer who rejects with the sweep's words wrote them: shown as written, apart."""
    draft = make_draft(mailbox_a)
    services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason=DEADLINE, actor=admin_a.user)
    admin_a.user.language = "de"
    admin_a.user.save(update_fields=["language"])

    page = audit_page(signed_in(admin_a.user), tenant_a)

    with translation.override("de"):
        deadline = str(SYSTEM_REASONS[DEADLINE])
    assert f"<div data-customer-content>{DEADLINE}</div>" in page and deadline not in page


def test_the_export_keeps_the_stored_reason(released, tenant_a, admin_a, signed_in):
    """The CSV is evidence, read beside the journal's codes: a German-speaking admin's export
    holds the reason as written, not the page's words for it."""
    admin_a.user.language = "de"
    admin_a.user.save(update_fields=["language"])
    client = signed_in(admin_a.user)

    response = client.get(reverse("admin_audit_csv", args=[tenant_a.slug]))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))

    reasons = [row[6] for row in rows[1:] if row[6]]
    assert sorted(reasons) == sorted([HOLD_REASON, HOLD_REASON, DEADLINE])
