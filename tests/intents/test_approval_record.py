"""What the journal keeps of an approval, for whoever must reconstruct a send months later: the
version, hash and recipients approved, and who approved under which right, as they were then.
Neither a later change of the person's account or membership nor the retention purge of the
body may change that record (the journal is append-only; the rows it points to are not)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from intents import services
from intents.models import Draft, IntentEvent, SendIntent
from intents.retention import draft_bodies_purge
from intents.services.broadcasts import broadcast_approve, broadcast_create
from tenants.models import User
from tenants.services import member_set_role

pytestmark = pytest.mark.django_db


@pytest.fixture
def approver(tenant_a, member_of, mailbox_a):
    """An approver whose right covers this one mailbox only."""
    membership = member_of(tenant_a, "approver", approve_all_mailboxes=False)
    membership.approve_mailboxes.add(mailbox_a)
    return membership


def test_the_approval_row_keeps_who_under_which_right_what_and_to_whom(
    tenant_a, admin_a, approver, mailbox_a, make_draft
):
    draft = make_draft(mailbox_a, to=["ana@example.com"], cc=["boss@example.com"])
    version = draft.versions.get()
    approved_as = approver.user.email
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=approver.user,
    )
    # Months later: the person was renamed and demoted, and the body went with retention.
    User.objects.filter(pk=approver.user_id).update(email="someone.else@example.test")
    member_set_role(tenant=tenant_a, membership_id=approver.pk, role="viewer", actor=admin_a.user)
    long_ago = timezone.now() - timedelta(days=400)
    SendIntent.objects.filter(pk=intent.pk).update(
        state="accepted", provider_message_id="<m@x>", updated_at=long_ago
    )
    Draft.objects.filter(pk=draft.pk).update(updated_at=long_ago)
    assert draft_bodies_purge() == 1

    row = IntentEvent.objects.get(draft=draft, action="draft.approved")
    assert (row.intent_id, row.actor_user_id) == (intent.pk, approver.user_id)
    assert row.data == {
        "version": 1,
        "content_hash": intent.content_hash,
        "recipients": {"to": ["ana@example.com"], "cc": ["boss@example.com"], "bcc": []},
        "email": approved_as,
        "role": "approver",
        "all_mailboxes": False,
        "from_list": False,
    }


def test_a_broadcast_approval_keeps_the_right_it_was_approved_under(tenant_a, approver, mailbox_a):
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=mailbox_a,
        subject="Order {{ order }} is delayed",
        text="Hello {{ name }}",
        html="",
        recipients=[{"address": "c1@example.com", "variables": {"name": "A", "order": 1}}],
        actor_user=None,
    )

    broadcast_approve(
        tenant=tenant_a,
        broadcast_id=broadcast.pk,
        content_hash=broadcast.content_hash,
        actor=approver.user,
    )

    row = IntentEvent.objects.get(broadcast=broadcast, action="broadcast.approved")
    assert row.data == {
        "content_hash": broadcast.content_hash,
        "recipients": 1,
        "email": approver.user.email,
        "role": "approver",
        "all_mailboxes": False,
    }


def test_an_approval_from_the_queues_list_says_so(tenant_a, approver, mailbox_a, make_draft):
    """The bulk approval's rows show less than the draft's page: whoever weighs the approval
    later must know which of the two the person approved from."""
    draft = make_draft(mailbox_a)
    version = draft.versions.get()

    services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=approver.user,
        unseen=True,
    )

    row = IntentEvent.objects.get(draft=draft, action="draft.approved")
    assert row.data["from_list"] is True
