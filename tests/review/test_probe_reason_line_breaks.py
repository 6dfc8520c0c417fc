"""A reason typed in one of the review pages' boxes (reject, re-approve, the evidence of a send
marked sent) as a browser posts it: the box's maxlength (2000) counts a line break as one
character, the post carries it as CRLF. clean_reason counts LF (8934949); the page's form
counted the CRLF before the service was asked, so a reason of many lines that the box let in was
refused "at most 2000 characters (it has 2039)" and nothing was done."""

import pytest
from django.urls import reverse

from intents.models import Draft, SendIntent

pytestmark = pytest.mark.django_db

LINES = ["y" * 49] * 40
TYPED = "\n".join(LINES)  # what the box holds: 1,999 characters
POSTED = "\r\n".join(LINES)  # what the browser posts


def test_the_boxes_limit_is_what_a_post_of_crlf_exceeds():
    assert len(TYPED) <= 2000 < len(POSTED)


def test_a_rejection_reason_that_fits_its_box_rejects_the_draft(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    response = signed_in(admin_a.user).post(
        reverse("draft_reject", args=[tenant_a.slug, draft.pk]),
        {"reason": POSTED, "version": draft.current_version},
    )
    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft.status == Draft.Status.REJECTED
    assert draft.reject_reason == TYPED


def test_a_reopen_reason_that_fits_its_box_puts_the_draft_back(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    intent = make_intent(mailbox_a, state="failed")
    response = signed_in(admin_a.user).post(
        reverse("intent_reopen", args=[tenant_a.slug, intent.pk]), {"reason": POSTED}
    )
    assert response.status_code == 302
    assert Draft.objects.get(pk=intent.draft_id).status == Draft.Status.PENDING


def test_evidence_that_fits_its_box_marks_the_send_accepted(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    intent = make_intent(mailbox_a, state="needs_attention", attempts=1)
    response = signed_in(admin_a.user).post(
        reverse("intent_resolve", args=[tenant_a.slug, intent.pk]),
        {"provider_message_id": "<proof-1@agentmail.test>", "evidence": POSTED},
    )
    assert response.status_code == 302
    intent.refresh_from_db()
    assert intent.state == SendIntent.State.ACCEPTED
    assert intent.resolution_note == TYPED


def test_a_reason_refused_for_a_lost_right_is_kept_whole(
    tenant_a, mailbox_a, make_draft, member_of, signed_in
):
    """The page keeps the reason to be copied when the right was taken away since it was
    loaded; it was cut at 2000 characters of the CRLF text, losing its last lines."""
    ana = member_of(tenant_a, "approver")
    draft = make_draft(mailbox_a)
    client = signed_in(ana.user)
    type(ana).objects.filter(pk=ana.pk).update(approve_all_mailboxes=False)
    last = "Last line, kept."
    response = client.post(
        reverse("draft_reject", args=[tenant_a.slug, draft.pk]),
        {"reason": "\r\n".join([*LINES[:-1], last]), "version": draft.current_version},
    )
    assert response.status_code == 403
    assert f"{last}</textarea>" in response.content.decode()
    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.PENDING
