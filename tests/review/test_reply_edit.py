"""Editing a reply in the browser: its subject is AgentMail's (issue 14 item 2), so the page says so
and a changed subject is refused on the field, saving nothing."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from intents import errors, services
from intents.models import DraftVersion
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


@pytest.fixture
def reply(tenant_a, mailbox_a, make_draft):
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=mailbox_a,
        thread_id="thr-kenji",
        message_id="<kenji@example.com>",
        sender="Kenji <kenji@example.com>",
        subject="Where is my order?",
        received_at=timezone.now() - timedelta(minutes=5),
    )
    return make_draft(
        mailbox_a, to=["kenji@example.com"], subject=None, in_reply_to="<kenji@example.com>"
    )


def edit(client, tenant, draft, subject):
    return client.post(
        reverse("draft_edit", args=[tenant.slug, draft.pk]),
        {"base_version": 1, "to": "kenji@example.com", "subject": subject, "text": "Tomorrow."},
    )


def test_the_pages_say_where_a_replys_subject_comes_from(tenant_a, reply, admin_a, signed_in):
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, reply.pk])).content.decode()
    form = client.get(reverse("draft_edit", args=[tenant_a.slug, reply.pk])).content.decode()

    assert "data-customer-content>Re: Where is my order?</h1>" in page
    assert "set by AgentMail from the message it answers" in page
    assert "set by AgentMail from the message it answers" in form
    assert 'value="Re: Where is my order?"' in form


def test_a_changed_subject_of_a_reply_is_refused_on_the_field(tenant_a, reply, admin_a, signed_in):
    response = edit(signed_in(admin_a.user), tenant_a, reply, "Your parcel")

    assert response.status_code == 400
    assert "Leave the subject out, or send exactly that." in response.content.decode()
    assert DraftVersion.objects.filter(draft=reply).count() == 1


def test_an_edited_reply_keeps_its_subject(tenant_a, reply, admin_a, signed_in):
    response = edit(signed_in(admin_a.user), tenant_a, reply, "Re: Where is my order?")

    assert response.status_code == 302
    version = DraftVersion.objects.get(draft=reply, number=2)
    assert (version.subject, version.text) == ("Re: Where is my order?", "Tomorrow.")


def test_a_senders_name_is_bidi_isolated_and_a_time_at_the_calendars_end_renders(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """A right-to-left override in a sender's name reordered the words after it; a stored time
    next to year 1 made the page's conversion to the reader's zone overflow (a 500)."""
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=mailbox_a,
        thread_id="thr-odd",
        message_id="<odd@example.com>",
        sender="\u202eevil <odd@example.com>",
        subject="Where is my order?",
        received_at=datetime(1, 1, 1, 3, tzinfo=UTC),
    )
    draft = make_draft(
        mailbox_a, to=["odd@example.com"], subject=None, in_reply_to="<odd@example.com>"
    )
    admin_a.user.time_zone = "America/New_York"
    admin_a.user.save(update_fields=["time_zone"])
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk]))
    form = client.get(reverse("draft_edit", args=[tenant_a.slug, draft.pk]))

    assert (page.status_code, form.status_code) == (200, 200)
    assert "<strong><bdi>\u202eevil</bdi> &lt;" in page.content.decode()
    assert "<bdi>\u202eevil</bdi>" in form.content.decode()


def test_an_override_in_a_senders_name_cannot_reorder_the_address_shown_to_the_reviewer(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """Name and address were one isolate: the override in the name ran on over the address
    ("Jane >tset.remotsuc@enaj<"), and a zero-width space in the address did not show, so a
    reviewer could not read who wrote."""
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=mailbox_a,
        thread_id="thr-jane",
        message_id="<jane@example.com>",
        sender="Jane\u202e <jane@cus\u200btomer.test>",
        subject="Where is my order?",
        received_at=timezone.now() - timedelta(minutes=5),
    )
    draft = make_draft(
        mailbox_a, to=["jane@example.com"], subject=None, in_reply_to="<jane@example.com>"
    )
    client = signed_in(admin_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    form = client.get(reverse("draft_edit", args=[tenant_a.slug, draft.pk])).content.decode()

    shown = (
        '<strong><bdi>Jane\u202e</bdi> &lt;<bdi class="mono" data-sender-address>'
        "jane@cus[U+200B]tomer.test</bdi>&gt;</strong>"
    )
    assert shown in page
    assert shown in form


@pytest.mark.parametrize(
    ("subject", "why"),
    [("x" * 996, "longer than 998 characters"), ("Order\u2028two", "U+2028")],
    ids=["too long", "line separator"],
)
def test_a_customers_subject_agentmail_cannot_reply_with_is_refused_on_in_reply_to(
    tenant_a, mailbox_a, admin_a, subject, why
):
    """The refusal named `subject`, which the agent never sent and cannot change."""
    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=mailbox_a,
        thread_id="thr-long",
        message_id="<long@example.com>",
        sender="Kim <long@example.com>",
        subject=subject,
        received_at=timezone.now(),
    )

    with pytest.raises(errors.InvalidInput) as refused:
        services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox_a,
            to=["long@example.com"],
            text="Hello",
            in_reply_to="<long@example.com>",
            actor_user=admin_a.user,
        )

    assert (refused.value.code, refused.value.field) == ("reply_subject_invalid", "in_reply_to")
    assert why in refused.value.message
