"""A reviewer's typed text is never lost to a race: a save refused because the draft was decided
(or the right to decide was taken away) since the edit page was opened answers with the page, the
text, subject and recipients as typed, and what happened, never a redirect that drops them."""

import threading

import pytest
from django.db import connections, transaction
from django.test import Client
from django.urls import reverse

from intents import services
from intents.models import DraftVersion
from tenants.models import Membership
from tests.intents.helpers import blocked_on_a_lock

pytestmark = pytest.mark.django_db

TYPED = {
    "to": "maria@customer.test, billing@customer.test",
    "cc": "",
    "bcc": "",
    "subject": "Your refund, as promised",
    "text": "Dear Maria, my carefully worded apology.",
    "html": "",
}


def _approve(tenant, draft, member):
    version = draft.versions.get(number=draft.current_version)
    return services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=member.user,
    )


def _assert_kept(body: str) -> None:
    assert "Dear Maria, my carefully worded apology.</textarea>" in body
    assert 'value="Your refund, as promised"' in body
    assert 'value="maria@customer.test, billing@customer.test"' in body
    assert "Your text was not saved; it is kept below: copy it if you need it." in body
    assert "data-edit-closed" in body
    assert "Save version" not in body


def test_a_save_after_a_colleague_approved_keeps_the_text_and_names_the_approval(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    draft = make_draft(mailbox_a)
    ana = member_of(tenant_a, "approver", user__full_name="Ana Lima")
    client = signed_in(admin_a.user)
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])
    opened = client.get(url)

    _approve(tenant_a, draft, ana)
    saved = client.post(url, {**TYPED, "base_version": 1})

    body = saved.content.decode()
    assert opened.status_code == 200
    assert saved.status_code == 409
    assert "Ana Lima approved version 1 at " in body
    _assert_kept(body)
    assert DraftVersion.objects.filter(draft=draft).count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_approval_committing_while_the_save_waits_for_the_lock_is_named_and_keeps_the_text(
    tenant_a, mailbox_a, make_draft, admin_a, member_of
):
    draft = make_draft(mailbox_a)
    ana = member_of(tenant_a, "approver", user__full_name="Ana Lima")
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])
    responses: list = []

    def person_saves() -> None:
        try:
            client = Client()
            client.force_login(admin_a.user, backend="django.contrib.auth.backends.ModelBackend")
            responses.append(client.post(url, {**TYPED, "base_version": 1}))
        finally:
            connections.close_all()

    with transaction.atomic():
        # Ana's approval holds the draft's lock when the save arrives: the page's own read
        # still saw the draft pending, so the service's refusal under the lock is what answers.
        _approve(tenant_a, draft, ana)
        person = threading.Thread(target=person_saves)
        person.start()
        assert blocked_on_a_lock(), "the save never waited for the draft's lock"
    person.join(30)

    body = responses[0].content.decode()
    assert responses[0].status_code == 409
    assert "Ana Lima approved version 1 at " in body
    _assert_kept(body)
    assert DraftVersion.objects.filter(draft=draft).count() == 1


def test_a_save_after_the_right_to_decide_was_taken_away_keeps_the_text(
    tenant_a, mailbox_a, make_draft, member_of, signed_in
):
    draft = make_draft(mailbox_a)
    ben = member_of(tenant_a, "approver")
    client = signed_in(ben.user)
    url = reverse("draft_edit", args=[tenant_a.slug, draft.pk])
    opened = client.get(url)

    Membership.objects.filter(pk=ben.pk).update(approve_all_mailboxes=False)
    saved = client.post(url, {**TYPED, "base_version": 1})

    body = saved.content.decode()
    assert opened.status_code == 200
    assert saved.status_code == 403
    assert "You do not have the right to decide on drafts from" in body
    _assert_kept(body)
    assert DraftVersion.objects.filter(draft=draft).count() == 1


def test_a_rejection_after_a_colleague_approved_names_the_approval_and_keeps_the_reason(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    draft = make_draft(mailbox_a)
    ana = member_of(tenant_a, "approver", user__full_name="Ana Lima")
    client = signed_in(admin_a.user)
    client.get(reverse("draft", args=[tenant_a.slug, draft.pk]))

    _approve(tenant_a, draft, ana)
    refused = client.post(
        reverse("draft_reject", args=[tenant_a.slug, draft.pk]),
        {"reason": "The tone is too curt for a refund.", "version": 1},
    )

    body = refused.content.decode()
    assert refused.status_code == 409
    assert "Ana Lima approved version 1 at " in body
    assert "The tone is too curt for a refund.</textarea>" in body
