"""Undo send in the staff pages: the countdown and the Undo button where the send is shown, the
undo route, and who may use it (the service and the worker are tested in tests/intents)."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from config.clock import db_now
from intents import services
from intents.models import Draft, IntentEvent, SendIntent
from intents.sending.precheck import HOLD_REASON
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def held(tenant_a):
    Tenant.objects.filter(pk=tenant_a.pk).update(send_hold_seconds=30)
    tenant_a.refresh_from_db()
    return tenant_a


def approve(client, tenant, draft, **extra):
    version = draft.versions.get()
    return client.post(
        reverse("draft_approve", args=[tenant.slug, draft.pk]),
        {"version": version.number, "content_hash": version.content_hash, **extra},
        follow=True,
    )


def undo_url(tenant, intent):
    return reverse("intent_undo", args=[tenant.slug, intent.pk])


def test_approve_shows_the_countdown_and_undo_puts_the_draft_back(
    held, mailbox_a, make_draft, admin_a, signed_in
):
    client = signed_in(admin_a.user)
    draft = make_draft(mailbox_a)
    page = approve(client, held, draft).content.decode()
    intent = SendIntent.objects.get(draft=draft)
    # The send page it lands on, and the flash above it, both offer the undo with a countdown.
    assert page.count(f'action="{undo_url(held, intent)}"') == 2
    seconds = [int(s) for s in re.findall(r'data-seconds-left="(\d+)"', page)]
    assert seconds and all(25 <= s <= 30 for s in seconds)
    response = client.post(undo_url(held, intent), follow=True)
    assert response.redirect_chain[-1][0] == reverse("draft", args=[held.slug, draft.pk])
    assert "Undone: nothing was sent." in response.content.decode()
    draft.refresh_from_db()
    assert (draft.status, draft.current_version) == ("pending", 2)
    assert SendIntent.objects.get(pk=intent.pk).state == "cancelled"


def test_approve_and_next_offers_undo_in_the_flash(held, mailbox_a, make_draft, admin_a, signed_in):
    client = signed_in(admin_a.user)
    first, second = make_draft(mailbox_a), make_draft(mailbox_a)
    page = approve(client, held, first, next="1").content.decode()
    intent = SendIntent.objects.get(draft=first)
    assert f'action="{undo_url(held, intent)}"' in page
    assert f"/drafts/{second.pk}/" in page


def test_draft_page_and_outbox_show_the_countdown_during_the_window(
    held, mailbox_a, make_intent, admin_a, signed_in
):
    intent = make_intent(mailbox_a)
    client = signed_in(admin_a.user)
    draft_page = client.get(reverse("draft", args=[held.slug, intent.draft_id])).content.decode()
    outbox = client.get(reverse("outbox", args=[held.slug])).content.decode()
    for page in (draft_page, outbox):
        assert f'action="{undo_url(held, intent)}"' in page
        assert "data-countdown" in page


def test_no_undo_offered_without_a_window(tenant_a, mailbox_a, make_intent, admin_a, signed_in):
    intent = make_intent(mailbox_a)
    client = signed_in(admin_a.user)
    for url in (
        reverse("draft", args=[tenant_a.slug, intent.draft_id]),
        reverse("outbox", args=[tenant_a.slug]),
        reverse("outbox_intent", args=[tenant_a.slug, intent.pk]),
    ):
        assert "data-undo" not in client.get(url).content.decode()


def test_a_viewer_sees_the_countdown_but_no_button_and_cannot_undo(
    held, mailbox_a, make_intent, member_of, signed_in
):
    intent = make_intent(mailbox_a)
    viewer = signed_in(member_of(held, "viewer").user)
    page = viewer.get(reverse("outbox_intent", args=[held.slug, intent.pk])).content.decode()
    assert "data-undo-box" in page and "data-undo-button" not in page
    assert viewer.post(undo_url(held, intent)).status_code == 403
    assert SendIntent.objects.get(pk=intent.pk).state == "queued"


def test_a_viewer_of_a_send_held_inside_its_window_is_told_it_is_held(
    held, mailbox_a, make_intent, member_of, signed_in
):
    """Found by a probe: "Sending in 30 seconds" of a send held because the customer wrote
    again, which is not sent until a person releases it (the approver's countdown:
    tests/review/test_browser_undo.py)."""
    intent = make_intent(mailbox_a)
    services.intent_hold(tenant=held, intent_id=intent.pk, reason=HOLD_REASON)
    viewer = signed_in(member_of(held, "viewer").user)

    pages = [
        viewer.get(reverse(name, args=[held.slug, pk])).content.decode()
        for name, pk in (("outbox_intent", intent.pk), ("draft", intent.draft_id))
    ]

    told = [
        re.search(
            r"Held: customer wrote again in this thread after the draft was written; re-confirm\. "
            r"It will not be sent until a person releases it\. An approver of this mailbox can "
            r"still undo the approval for (\d+) more seconds\.",
            page,
        )
        for page in pages
    ]
    assert all(t is not None and 25 <= int(t[1]) <= 30 for t in told)
    assert not any("Sending in" in page for page in pages)


def test_an_approver_without_the_mailbox_right_cannot_undo(
    held, mailbox_a, make_intent, member_of, signed_in
):
    intent = make_intent(mailbox_a)
    limited = signed_in(member_of(held, "approver", approve_all_mailboxes=False).user)
    outbox = limited.get(reverse("outbox", args=[held.slug])).content.decode()
    assert "data-undo-button" not in outbox
    assert limited.post(undo_url(held, intent)).status_code == 403
    assert SendIntent.objects.get(pk=intent.pk).state == "queued"


def test_another_tenants_send_is_a_404(
    held, tenant_b, mailbox_a, make_intent, member_of, signed_in
):
    intent = make_intent(mailbox_a)
    outsider = signed_in(member_of(tenant_b, "admin").user)
    assert outsider.post(undo_url(tenant_b, intent)).status_code == 404
    assert outsider.post(undo_url(held, intent)).status_code == 404
    assert SendIntent.objects.get(pk=intent.pk).state == "queued"


def test_undo_after_the_window_is_refused_with_a_message(
    held, mailbox_a, make_intent, admin_a, signed_in
):
    intent = make_intent(mailbox_a)
    # The window is over (the constraint wants next_attempt_at not before it).
    SendIntent.objects.filter(pk=intent.pk).update(
        hold_until=intent.approved_at, next_attempt_at=intent.approved_at
    )
    events = IntentEvent.objects.count()
    response = signed_in(admin_a.user).post(undo_url(held, intent), follow=True)
    assert "Too late to undo" in response.content.decode()
    assert response.redirect_chain[-1][0] == reverse("outbox_intent", args=[held.slug, intent.pk])
    assert IntentEvent.objects.count() == events
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"


def test_undo_is_post_only(held, mailbox_a, make_intent, admin_a, signed_in):
    intent = make_intent(mailbox_a)
    assert signed_in(admin_a.user).get(undo_url(held, intent)).status_code == 405


def test_bulk_approve_points_to_the_outbox_to_undo(held, mailbox_a, make_draft, admin_a, signed_in):
    drafts = [make_draft(mailbox_a) for _ in range(2)]
    items = [f"{d.pk}:1:{d.versions.get().content_hash}" for d in drafts]
    page = signed_in(admin_a.user).post(
        reverse("bulk_approve", args=[held.slug]), {"item": items}, follow=True
    )
    assert "can be undone from the outbox for 30 s" in page.content.decode()
    outbox = signed_in(admin_a.user).get(reverse("outbox", args=[held.slug])).content.decode()
    for intent in SendIntent.objects.filter(draft__in=drafts):
        assert f'action="{undo_url(held, intent)}"' in outbox
    services.intent_undo(
        tenant=held,
        intent_id=SendIntent.objects.filter(draft=drafts[0]).get().pk,
        actor=admin_a.user,
    )
    assert Draft.objects.get(pk=drafts[0].pk).status == "pending"


def test_undo_of_a_send_that_expired_in_its_window_says_nothing_was_sent(
    held, mailbox_a, make_intent, admin_a, signed_in
):
    """The sweep expired it (its not_after passed inside the undo window): the refusal does not
    say "too late, it is on its way"."""
    intent = make_intent(mailbox_a, state="expired", last_error_code="not_after_passed")
    events = IntentEvent.objects.count()
    response = signed_in(admin_a.user).post(undo_url(held, intent), follow=True)
    page = response.content.decode()
    assert f"Nothing to undo: send #{intent.pk} is expired and nothing was sent." in page
    assert "Too late to undo" not in page
    assert response.redirect_chain[-1][0] == reverse("outbox_intent", args=[held.slug, intent.pk])
    assert IntentEvent.objects.count() == events


def test_approving_with_an_undo_window_past_not_after_is_refused_on_the_page(
    held, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a, not_after=db_now() + timedelta(seconds=20))
    page = approve(signed_in(admin_a.user), held, draft).content.decode()
    assert "but the undo window of 30 seconds would hold it until after that" in page
    assert not SendIntent.objects.filter(draft=draft).exists()
    assert Draft.objects.get(pk=draft.pk).status == "pending"


def _approved_and_undone_by(tenant, draft, person):
    version = draft.versions.get()
    intent = services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=person,
    )
    services.intent_undo(tenant=tenant, intent_id=intent.pk, actor=person)
    return version


def test_approving_from_a_page_opened_before_a_colleagues_undo_says_they_undid_it(
    held, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    """The page said "Changed since you opened it. Version 2 is current: what changed is below"
    over "No difference in content": nothing named the colleague who stopped the send, and a
    second click sent what they had just taken back, unknowing."""
    ben = member_of(held, "approver", user__full_name="Ben Ortiz").user
    draft = make_draft(mailbox_a)
    seen = _approved_and_undone_by(held, draft, ben)
    client = signed_in(admin_a.user)

    refused = client.post(
        reverse("draft_approve", args=[held.slug, draft.pk]),
        {"version": seen.number, "content_hash": seen.content_hash},
    )

    body = refused.content.decode()
    assert refused.status_code == 409
    assert "Ben Ortiz undid the approval of version 1 at " in body
    assert "version 2 is the same text, back in review" in body
    assert "Changed since you opened it" not in body
    assert SendIntent.objects.filter(draft=draft).count() == 1


def test_a_bulk_approval_from_a_queue_loaded_before_a_colleagues_undo_says_they_undid_it(
    held, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    ben = member_of(held, "approver", user__full_name="Ben Ortiz").user
    draft = make_draft(mailbox_a)
    seen = _approved_and_undone_by(held, draft, ben)
    client = signed_in(admin_a.user)

    response = client.post(
        reverse("bulk_approve", args=[held.slug]),
        {"item": f"{draft.pk}:{seen.number}:{seen.content_hash}"},
        follow=True,
    )

    assert f"Draft {draft.pk} was not approved: Ben Ortiz undid the approval of version 1" in (
        response.content.decode()
    )
    assert SendIntent.objects.filter(draft=draft).count() == 1


def test_rejecting_from_a_page_opened_before_a_colleagues_undo_says_they_undid_it(
    held, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    """The rejection is still refused (it names version 1, and version 2 is current), but it
    answered only "The draft changed since you opened it", over a diff with no difference: not
    that Ben approved it and took the approval back, nor when."""
    ben = member_of(held, "approver", user__full_name="Ben Ortiz").user
    draft = make_draft(mailbox_a)
    seen = _approved_and_undone_by(held, draft, ben)
    client = signed_in(admin_a.user)

    refused = client.post(
        reverse("draft_reject", args=[held.slug, draft.pk]),
        {"version": seen.number, "reason": "Wrong tone"},
    )

    body = refused.content.decode()
    assert refused.status_code == 409
    assert "Ben Ortiz undid the approval of version 1 at " in body
    assert "version 2 is the same text, back in review. Ask them why before rejecting it." in body
    assert "Changed since you opened it" not in body
    assert Draft.objects.get(pk=draft.pk).status == "pending"


def test_rejecting_a_version_edited_after_a_colleagues_undo_says_the_draft_changed(
    held, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    ben = member_of(held, "approver", user__full_name="Ben Ortiz").user
    draft = make_draft(mailbox_a)
    seen = _approved_and_undone_by(held, draft, ben)
    services.draft_add_version(
        tenant=held,
        draft_id=draft.pk,
        to=list(seen.to),
        cc=[],
        bcc=[],
        subject=seen.subject,
        text="Hello again.",
        html="",
        actor_user=ben,
        base_version=2,
    )
    client = signed_in(admin_a.user)

    refused = client.post(
        reverse("draft_reject", args=[held.slug, draft.pk]),
        {"version": seen.number, "reason": "Wrong tone"},
    )

    body = refused.content.decode()
    assert refused.status_code == 409
    assert "Changed since you opened it" in body
    assert "undid the approval" not in body
    assert Draft.objects.get(pk=draft.pk).status == "pending"
