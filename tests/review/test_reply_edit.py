"""Editing a reply in the browser: its subject is AgentMail's (issue 14 item 2), so the page says so
and a changed subject is refused on the field, saving nothing."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

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
