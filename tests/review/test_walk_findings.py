"""What a newcomer's walk through the pages found (screenshots at 1280 and 390 px, English and
German): an empty queue view that said "nothing to review" while the queue held drafts, a reply's
subject field that took typing no save could keep, and a held send's reason in English on a German
page."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from intents.models import SendIntent
from webhooks.models import InboundMessage
from webhooks.services.apply import HOLD_REASON

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("view", "says"),
    [("mine", "You hold no pending draft."), ("escalated", "No pending draft is escalated.")],
)
def test_an_empty_queue_view_says_what_it_lacks_not_that_nothing_waits(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, view, says
):
    make_draft(mailbox_a)

    page = signed_in(admin_a.user).get(reverse("tenant_home", args=[tenant_a.slug]), {"view": view})

    body = page.content.decode()
    assert f'data-empty-view="{view}">{says}' in body
    assert "Nothing to review." not in body


def test_the_unassigned_view_with_every_draft_held_says_so(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    client = signed_in(admin_a.user)
    client.post(reverse("draft_take", args=[tenant_a.slug, draft.pk]))

    body = client.get(
        reverse("tenant_home", args=[tenant_a.slug]), {"view": "unassigned"}
    ).content.decode()

    assert 'data-empty-view="unassigned">No pending draft is unassigned.' in body


def test_a_replys_subject_is_read_only_in_the_editor_and_a_new_messages_subject_is_not(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=mailbox_a,
        thread_id="thr-kenji",
        message_id="<kenji@example.com>",
        sender="Kenji <kenji@example.com>",
        subject="Where is my order?",
        received_at=timezone.now() - timedelta(minutes=5),
    )
    reply = make_draft(
        mailbox_a, to=["kenji@example.com"], subject=None, in_reply_to="<kenji@example.com>"
    )
    fresh = make_draft(mailbox_a)
    client = signed_in(admin_a.user)

    reply_form = client.get(reverse("draft_edit", args=[tenant_a.slug, reply.pk])).context["form"]
    fresh_form = client.get(reverse("draft_edit", args=[tenant_a.slug, fresh.pk])).context["form"]

    assert reply_form.fields["subject"].widget.attrs.get("readonly") is True
    assert "readonly" not in fresh_form.fields["subject"].widget.attrs


def test_a_held_sends_reason_is_in_the_readers_language(
    tenant_a, mailbox_a, make_intent, admin_a, signed_in
):
    held = make_intent(mailbox_a, held_reason=HOLD_REASON)
    admin_a.user.language = "de"
    admin_a.user.save(update_fields=["language"])
    client = signed_in(admin_a.user)

    attention = client.get(reverse("attention", args=[tenant_a.slug])).content.decode()
    send = client.get(reverse("outbox_intent", args=[tenant_a.slug, held.pk])).content.decode()

    german = "Der Kunde hat in diesem Verlauf erneut geschrieben"
    assert german in attention and german in send
    assert HOLD_REASON not in attention and HOLD_REASON not in send
    assert SendIntent.objects.get(pk=held.pk).held_reason == HOLD_REASON
