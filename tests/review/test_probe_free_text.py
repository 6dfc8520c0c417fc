"""Found by an outside probe: the reasons and notes people type on the review pages took any
character PostgreSQL stores. A right-to-left override (U+202E) or an isolate (U+2066-U+2069)
made the rest of a line read backwards wherever it is shown (the journal, the queue, the audit
log, the agent that reads a reject reason over the API); an escape or other control character
went to every reader as typed. They are refused now as a tenant's name and a suspension's reason
are (``common.text.unsafe_in_text``: those of ``unsafe_in_name`` but a tab and a line break),
with the same words; the characters people write text with stay allowed."""

from __future__ import annotations

import pytest
from django.urls import reverse

from intents import errors, services
from intents.models import Draft, DraftNote, SendIntent

pytestmark = pytest.mark.django_db

HOSTILE = [
    ("Unpaid \u202e711-4202 eciovni", "U+202E"),
    ("Wrong \u2066customer\u2069", "U+2066"),
    ("Wrong\x1b[31m tone", "U+001B"),
    ("Wrong\x07 tone", "U+0007"),
    ("Wrong\x85tone", "U+0085"),
]

# What people write reasons with: lines and tabs, a non-breaking space, a soft hyphen, the
# joiners of emoji and Persian words, the marks of right-to-left text.
ORDINARY = "Ton\u00a0trop sec,\u00adpas\nLigne\tdeux: \u0645\u06cc\u200c\u0634\u0648\u062f \u200f 👩\u200d💻 \u200e"


def _pending_draft(make_draft, mailbox):
    draft = make_draft(mailbox)
    return draft, lambda: Draft.objects.get(pk=draft.pk).status == "pending"


def _post(kind, tenant, mailbox, make_draft, make_intent, text):
    """Post ``text`` where a person types it on the review pages; (url, data, nothing changed)."""
    if kind == "reject":
        draft, unchanged = _pending_draft(make_draft, mailbox)
        url = reverse("draft_reject", args=[tenant.slug, draft.pk])
        return url, {"reason": text, "version": 1}, unchanged
    if kind == "note":
        draft = make_draft(mailbox)
        url = reverse("draft_note_add", args=[tenant.slug, draft.pk])
        return url, {"text": text}, lambda: not DraftNote.objects.exists()
    if kind == "cancel":
        intent = make_intent(mailbox, state="queued")
        url = reverse("intent_cancel", args=[tenant.slug, intent.pk])
        return url, {"reason": text}, lambda: _state(intent) == "queued"
    if kind == "resolve":
        intent = make_intent(mailbox, state="needs_attention", attempts=1)
        url = reverse("intent_resolve", args=[tenant.slug, intent.pk])
        data = {"provider_message_id": "<m-1@agentmail.test>", "evidence": text}
        return url, data, lambda: _state(intent) == "needs_attention"
    intent = make_intent(mailbox, state="failed", last_error_code="unprocessable")
    url = reverse("intent_reopen", args=[tenant.slug, intent.pk])
    return url, {"reason": text}, lambda: Draft.objects.get(pk=intent.draft_id).current_version == 1


def _state(intent) -> str:
    return SendIntent.objects.get(pk=intent.pk).state


KINDS = ["reject", "note", "cancel", "resolve", "reopen"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("text", "named"), HOSTILE, ids=[n for _t, n in HOSTILE])
def test_a_reason_or_note_with_a_control_or_bidi_character_is_refused_by_its_page(
    tenant_a, mailbox_a, make_draft, make_intent, admin_a, signed_in, kind, text, named
):
    url, data, unchanged = _post(kind, tenant_a, mailbox_a, make_draft, make_intent, text)

    response = signed_in(admin_a.user).post(url, data, follow=True)

    assert f"cannot hold the control character {named}." in response.content.decode()
    assert unchanged()


@pytest.mark.parametrize("kind", KINDS)
def test_a_reason_or_note_in_ordinary_text_of_any_script_is_kept_as_typed(
    tenant_a, mailbox_a, make_draft, make_intent, admin_a, signed_in, kind
):
    url, data, unchanged = _post(kind, tenant_a, mailbox_a, make_draft, make_intent, ORDINARY)

    signed_in(admin_a.user).post(url, data, follow=True)

    assert not unchanged()


@pytest.mark.parametrize(("text", "named"), HOSTILE, ids=[n for _t, n in HOSTILE])
def test_the_agent_api_and_services_refuse_the_same_reasons(
    tenant_a, mailbox_a, make_intent, admin_a, text, named
):
    """The services refuse them, so every entry point (the API, MCP, commands) does too."""
    intent = make_intent(mailbox_a, state="queued")

    with pytest.raises(errors.InvalidInput) as refused:
        services.intent_hold(tenant=tenant_a, intent_id=intent.pk, reason=text)

    assert (refused.value.code, refused.value.field) == ("reason_invalid", "reason")
    assert named in refused.value.message
    assert _state(intent) == "queued"
