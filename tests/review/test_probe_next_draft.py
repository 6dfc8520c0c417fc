"""Approve & next and reject tried by a reviewer with the right on one mailbox only: the next
draft they are sent to is one they may decide, never a draft of a mailbox they may not (when the
queue wraps around to its start as when it does not), and the queue when none is left."""

import pytest
from django.urls import reverse

from intents.models import Draft, DraftVersion
from mailboxes.models import Mailbox
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def _shown(draft):
    draft = Draft.objects.get(pk=draft.pk)
    version = DraftVersion.objects.get(draft=draft, number=draft.current_version)
    return {"version": version.number, "content_hash": version.content_hash}


def test_the_next_draft_after_a_decision_is_one_the_reviewer_may_decide(
    tenant_a, mailbox_a, make_draft, member_of, signed_in
):
    other = make_local_mailbox(tenant_a, username="sales")
    limited = member_of(tenant_a, "approver", approve_all_mailboxes=False)
    limited.approve_mailboxes.set([mailbox_a])
    make_draft(other)
    mine_first = make_draft(mailbox_a)
    make_draft(other)
    mine_last = make_draft(mailbox_a)
    client = signed_in(limited.user)
    slug = tenant_a.slug

    approved = client.post(
        reverse("draft_approve", args=[slug, mine_last.pk]), {**_shown(mine_last), "next": "1"}
    )
    assert approved.status_code == 302
    assert Draft.objects.get(pk=mine_last.pk).status == Draft.Status.APPROVED
    # Nothing of theirs after it: the queue wraps to their earlier draft, not the sales one.
    assert approved["Location"] == reverse("draft", args=[slug, mine_first.pk])

    rejected = client.post(
        reverse("draft_reject", args=[slug, mine_first.pk]),
        {"reason": "Wrong tone", "version": _shown(mine_first)["version"]},
    )
    assert Draft.objects.get(pk=mine_first.pk).status == Draft.Status.REJECTED
    # Only drafts of a mailbox they may not decide are left: back to the queue.
    assert rejected["Location"] == reverse("tenant_home", args=[slug])


def test_approve_and_next_skips_drafts_this_reviewer_could_not_approve(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    """With four-eyes on edit, "Approve & next" landed on a draft of a disabled mailbox, or on
    one this reviewer wrote (its current version, or an earlier one since the last approval),
    each of which draft_approve then refused: the next is the first they may approve."""
    from intents import services

    tenant_a.second_approver_on_edit = True
    tenant_a.save(update_fields=["second_approver_on_edit"])
    reviewer = member_of(tenant_a, "approver").user
    disabled = make_local_mailbox(tenant_a, username="old")
    first = make_draft(mailbox_a)
    make_draft(disabled)
    make_draft(mailbox_a, actor_user=reviewer)
    earlier = make_draft(mailbox_a, actor_user=reviewer)
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=earlier.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="Hello,\n\nWe refunded your order today.\n\nRegards",
        html="",
        actor_user=admin_a.user,
    )
    approvable = make_draft(mailbox_a)
    Mailbox.objects.filter(pk=disabled.pk).update(status=Mailbox.Status.DISABLED)
    client = signed_in(reviewer)
    slug = tenant_a.slug

    approved = client.post(
        reverse("draft_approve", args=[slug, first.pk]), {**_shown(first), "next": "1"}
    )

    assert Draft.objects.get(pk=first.pk).status == Draft.Status.APPROVED
    assert approved["Location"] == reverse("draft", args=[slug, approvable.pk])
    last = client.post(
        reverse("draft_approve", args=[slug, approvable.pk]), {**_shown(approvable), "next": "1"}
    )
    # Around the queue: nothing left this reviewer may approve.
    assert last["Location"] == reverse("tenant_home", args=[slug])
