"""The reasons the system writes as fixed English text (the journal's reasons, a send's
resolution, an agent event delivery's error), made through the services and read by a German
reader on every page that shows them: none reads as the stored English sentence; each is given in
the words of the one table of the system's reasons (``intents.reason_words.SYSTEM_REASONS``),
through the catalogue, with the stored sentence kept for a tooltip at most. A reason that is not
in that table was shown as stored, set apart as if a person or the provider had written it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone, translation

from config.clock import db_now
from intents import sending, services
from intents.events.delivery import LEASE_EXPIRED, deliver_due, delivery_claim
from intents.models import AgentEventDelivery, Draft, DraftVersion, IntentEvent, SendIntent
from intents.reason_words import SYSTEM_REASONS
from intents.services import deadlines
from tenants.models import Membership, Tenant
from tests.catalogues import GERMAN, serve_catalogue, visible
from tests.review.wrote_again import customer_wrote, draft_answering
from webhooks.services.apply import HOLD_REASON

pytestmark = pytest.mark.django_db

DEADLINE = "review deadline passed"
NOBODY = "nobody the escalation rule names may review this mailbox and is not away"
PASSED_OVER = "the member the escalation rule names can no longer decide it: to an admin"
NO_RIGHT = "The approver no longer has the right to send from this mailbox."
UNDONE = "Undone inside the undo window."


def _set(tenant, **fields) -> None:
    Tenant.objects.filter(pk=tenant.pk).update(**fields)
    tenant.refresh_from_db()


def _approve(tenant, draft, actor):
    version = DraftVersion.objects.get(draft=draft)
    return services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=actor,
    )


def _escalated(tenant, mailbox, make_draft) -> Draft:
    """A draft past its deadline, escalated by the sweep under the tenant's rule now."""
    draft = make_draft(mailbox)
    assert draft.sla_due_at is not None
    deadlines.drafts_escalate_due(now=db_now() + timedelta(minutes=6))
    return draft


def test_every_fixed_reason_the_system_writes_reads_in_the_readers_language(
    tenant_a,
    mailbox_a,
    make_draft,
    admin_a,
    member_of,
    signed_in,
    receiver,
    subscribe,
    settings,
    tmp_path,
):
    admin = admin_a.user
    # A send the worker's pre-call check blocked: its approver lost the right before the call.
    approver = member_of(tenant_a, "approver")
    blocked = _approve(tenant_a, make_draft(mailbox_a), approver.user)
    Membership.objects.filter(pk=approver.pk).update(role="viewer")
    sending.run_once(worker="w", limit=5)
    # A reply held by the webhook applier's reason (the customer wrote again), then released.
    answering = draft_answering(tenant_a, mailbox_a, make_draft, "thr-walk")
    released = _approve(tenant_a, answering, admin)
    message = customer_wrote(tenant_a, mailbox_a, "thr-walk", 2, timezone.now())
    services.intents_hold_stale(
        mailbox=mailbox_a,
        thread_id="thr-walk",
        message_id=message.message_id,
        written_at=message.received_at,
        reason=HOLD_REASON,
    )
    services.intent_release(
        tenant=tenant_a, intent_id=released.pk, actor=admin, messages_seen=[message.pk]
    )
    # A draft the sweep expired at its review deadline.
    expired = make_draft(mailbox_a)
    Draft.objects.filter(pk=expired.pk).update(review_deadline=timezone.now() - timedelta(1))
    assert services.draft_expire_due() == 1
    # Escalations: to a role nobody holds, then to a named member who may no longer decide.
    _set(tenant_a, sla_minutes=5, escalate_to_role="approver")
    nobody = _escalated(tenant_a, mailbox_a, make_draft)
    named = member_of(tenant_a, "approver")
    named.is_active = False
    named.save(update_fields=["is_active"])
    _set(tenant_a, escalate_to=named.user, escalate_to_role="")
    passed_over = _escalated(tenant_a, mailbox_a, make_draft)
    # A send undone inside its window.
    _set(tenant_a, send_hold_seconds=30, sla_minutes=None, escalate_to=None)
    undone = _approve(tenant_a, make_draft(mailbox_a), admin)
    services.intent_undo(tenant=tenant_a, intent_id=undone.pk, actor=admin)
    # An agent event delivery whose attempt recorded no answer within its lease.
    settings.AGENT_EVENTS_RETRY_DELAYS = [3600.0]
    endpoint = subscribe(tenant_a, receiver, types=["draft.rejected"])
    services.draft_reject(
        tenant=tenant_a, draft_id=make_draft(mailbox_a).pk, reason="Too curt", actor=admin
    )
    stalled = AgentEventDelivery.objects.filter(
        pk=delivery_claim(endpoint_id=endpoint.pk).delivery_id
    )
    stalled.update(lease_expires_at="2000-01-01T00:00:00Z")
    deliver_due()

    assert SendIntent.objects.get(pk=blocked.pk).last_error_detail == NO_RIGHT
    assert stalled.get().last_error == LEASE_EXPIRED
    assert {e.reason for e in IntentEvent.objects.filter(action="draft.escalated")} == {
        NOBODY,
        PASSED_OVER,
    }
    assert SendIntent.objects.get(pk=undone.pk).resolution_note == UNDONE

    def page(name: str, *args) -> str:
        return client.get(reverse(name, args=[tenant_a.slug, *args])).content.decode()

    # What each page shows, as the system stored it.
    shown = {
        ("outbox_intent", blocked.pk): [NO_RIGHT],
        ("attention",): [NO_RIGHT],
        ("outbox_intent", released.pk): [HOLD_REASON],
        ("outbox_intent", undone.pk): [UNDONE],
        ("draft", expired.pk): [DEADLINE],
        ("draft", nobody.pk): [NOBODY],
        ("draft", passed_over.pk): [PASSED_OVER],
        ("admin_audit",): [NO_RIGHT, HOLD_REASON, DEADLINE, NOBODY, PASSED_OVER],
        ("agent_events",): [LEASE_EXPIRED],
    }
    stored = {s for sentences in shown.values() for s in sentences}
    with translation.override("en"):
        words = {s: str(SYSTEM_REASONS[s]) for s in stored if s in SYSTEM_REASONS}
    serve_catalogue(settings, tmp_path, "de", {w: GERMAN + w for w in words.values()})
    admin.language = "de"
    admin.save(update_fields=["language"])
    client = signed_in(admin)

    untranslated = []
    for (name, *args), sentences in shown.items():
        text = visible(page(name, *args))
        for sentence in sentences:
            german = GERMAN + words.get(sentence, sentence)
            # The table's words may hold the stored ones ("The review deadline passed.").
            if german not in text or sentence in text.replace(german, ""):
                untranslated.append((name, sentence))
    assert untranslated == [], "\n".join(map(repr, untranslated))
