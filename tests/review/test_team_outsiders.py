"""Team review tried as outsiders: a person in two tenants, and another tenant's admin. Each
attempt answers like a missing object (or refuses) and changes nothing."""

import pytest
from django.urls import reverse

from intents import services
from intents.models import Draft, DraftNote, DraftPresence, IntentEvent, SendIntent
from tenants.models import Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def both(tenant_a, tenant_b, member_of):
    """An approver of tenant A who is also an approver of tenant B."""
    in_a = member_of(tenant_a, "approver")
    Membership.objects.create(user=in_a.user, tenant=tenant_b, role="approver")
    return in_a.user


def test_a_draft_held_in_one_tenant_is_nobodys_in_the_other(
    tenant_a, tenant_b, mailbox_a, mailbox_b, make_draft, both, signed_in
):
    draft = make_draft(mailbox_a)
    make_draft(mailbox_b)
    client = signed_in(both)
    assert client.post(reverse("draft_take", args=[tenant_a.slug, draft.pk])).status_code == 302
    assert Draft.objects.get(pk=draft.pk).assignee == both
    counts_a = client.get(reverse("nav_counts", args=[tenant_a.slug])).content.decode()
    counts_b = client.get(reverse("nav_counts", args=[tenant_b.slug])).content.decode()
    assert 'id="nav-count-mine" class="count" hx-swap-oob="true" data-n="1"' in counts_a
    assert 'id="nav-count-mine" class="count zero" hx-swap-oob="true" data-n="0"' in counts_b
    mine_b = client.get(reverse("tenant_home", args=[tenant_b.slug]), {"view": "mine"})
    assert f"/drafts/{draft.pk}/" not in mine_b.content.decode()


def test_another_tenants_draft_and_send_through_my_tenant_answer_404_and_change_nothing(
    tenant_a, tenant_b, mailbox_b, make_draft, member_of, signed_in
):
    outsider = member_of(tenant_a, "admin").user
    theirs = make_draft(mailbox_b)
    version = theirs.versions.get(number=theirs.current_version)
    admin_b = member_of(tenant_b, "admin").user
    tenant_b.send_hold_seconds = 60
    tenant_b.save(update_fields=["send_hold_seconds"])
    other = make_draft(mailbox_b)
    other_version = other.versions.get(number=other.current_version)
    intent = services.draft_approve(
        tenant=tenant_b,
        draft_id=other.pk,
        version=other_version.number,
        content_hash=other_version.content_hash,
        actor=admin_b,
    )
    events = IntentEvent.objects.count()
    client = signed_in(outsider)
    slug = tenant_a.slug
    posts = [
        (reverse("draft_take", args=[slug, theirs.pk]), {}),
        (reverse("draft_release", args=[slug, theirs.pk]), {}),
        (reverse("draft_hand", args=[slug, theirs.pk]), {"to": str(outsider.pk)}),
        (reverse("draft_note_add", args=[slug, theirs.pk]), {"text": "hello"}),
        (reverse("draft_presence", args=[slug, theirs.pk]) + "?mode=editing", {}),
        (
            reverse("draft_approve", args=[slug, theirs.pk]),
            {"version": version.number, "content_hash": version.content_hash},
        ),
        (reverse("intent_undo", args=[slug, intent.pk]), {}),
    ]
    for url, data in posts:
        assert client.post(url, data).status_code == 404, url
    assert Draft.objects.get(pk=theirs.pk).assignee is None
    assert not DraftNote.objects.exists() and not DraftPresence.objects.exists()
    assert SendIntent.objects.get(pk=intent.pk).state == "queued"
    assert IntentEvent.objects.count() == events


def test_handing_to_a_member_of_another_tenant_is_refused_and_changes_nothing(
    tenant_a, tenant_b, mailbox_a, make_draft, member_of, signed_in
):
    holder = member_of(tenant_a, "approver").user
    stranger = member_of(tenant_b, "approver").user
    draft = make_draft(mailbox_a)
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=holder)
    events = IntentEvent.objects.filter(draft=draft).count()
    response = signed_in(holder).post(
        reverse("draft_hand", args=[tenant_a.slug, draft.pk]), {"to": str(stranger.pk)}, follow=True
    )
    assert "Choose a member of this tenant" in response.content.decode()
    assert Draft.objects.get(pk=draft.pk).assignee == holder
    assert IntentEvent.objects.filter(draft=draft).count() == events
