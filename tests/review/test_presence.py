"""Presence: heartbeats, expiry, the editor's warning and the queue's marker (one query)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from intents import errors
from intents.models import DraftPresence
from intents.selectors.presence import PRESENCE_SECONDS, present_on_drafts
from intents.services.presence import presence_beat

pytestmark = pytest.mark.django_db


def beat_url(tenant, draft, mode="viewing"):
    return reverse("draft_presence", args=[tenant.slug, draft.pk]) + f"?mode={mode}"


def test_a_heartbeat_shows_the_person_to_others_not_to_themselves(
    tenant_a, mailbox_a, make_draft, member_of
):
    draft = make_draft(mailbox_a)
    ana, ben = member_of(tenant_a, "approver").user, member_of(tenant_a, "viewer").user
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="editing")
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ben, mode="viewing")
    seen_by_ben = present_on_drafts(tenant=tenant_a, draft_ids=[draft.pk], exclude_user=ben)
    assert [(p.user, p.mode) for p in seen_by_ben[draft.pk]] == [(ana, "editing")]
    both = present_on_drafts(tenant=tenant_a, draft_ids=[draft.pk])[draft.pk]
    assert [p.mode for p in both] == ["editing", "viewing"]  # editors first


def test_presence_expires_without_a_heartbeat(tenant_a, mailbox_a, make_draft, member_of):
    draft = make_draft(mailbox_a)
    ana = member_of(tenant_a, "approver").user
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="viewing")
    DraftPresence.objects.update(seen_at=Now() - timedelta(seconds=PRESENCE_SECONDS + 1))
    assert present_on_drafts(tenant=tenant_a, draft_ids=[draft.pk]) == {}


def test_a_member_removed_with_the_draft_open_is_no_longer_shown(
    tenant_a, mailbox_a, make_draft, member_of
):
    """Their beats are refused from then on; the last one must not keep them 'editing' to the
    others for the rest of its 30 s."""
    draft = make_draft(mailbox_a)
    gone, stays = member_of(tenant_a, "approver"), member_of(tenant_a, "approver")
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=gone.user, mode="editing")
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=stays.user, mode="viewing")
    gone.is_active = False
    gone.save(update_fields=["is_active"])

    shown = present_on_drafts(tenant=tenant_a, draft_ids=[draft.pk])[draft.pk]

    assert [p.user for p in shown] == [stays.user]


def test_editing_since_keeps_its_start_and_restarts_on_a_mode_change_or_a_return(
    tenant_a, mailbox_a, make_draft, member_of
):
    draft = make_draft(mailbox_a)
    ana = member_of(tenant_a, "approver").user
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="editing")
    early = Now() - timedelta(minutes=5)
    DraftPresence.objects.update(started_at=early, seen_at=Now() - timedelta(seconds=5))
    started = DraftPresence.objects.get().started_at
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="editing")
    assert DraftPresence.objects.get().started_at == started  # still the same session
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="viewing")
    assert DraftPresence.objects.get().started_at > started
    DraftPresence.objects.update(started_at=early, seen_at=Now() - timedelta(minutes=2))
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="viewing")
    assert DraftPresence.objects.get().started_at > started  # back after being gone
    assert DraftPresence.objects.count() == 1


@pytest.mark.parametrize("mode", ["", "typing", "EDITING", "viewing "])
def test_a_bad_mode_is_refused_and_writes_nothing(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, mode
):
    draft = make_draft(mailbox_a)
    response = signed_in(admin_a.user).post(beat_url(tenant_a, draft, mode))
    assert response.status_code == 400
    assert "viewing or editing" in response.content.decode()
    assert not DraftPresence.objects.exists()


def test_another_tenants_draft_is_a_404_and_writes_nothing(
    tenant_a, tenant_b, mailbox_a, make_draft, member_of, signed_in
):
    draft = make_draft(mailbox_a)
    outsider = signed_in(member_of(tenant_b, "admin").user)
    assert outsider.post(beat_url(tenant_b, draft)).status_code == 404
    assert outsider.post(beat_url(tenant_a, draft)).status_code == 404
    with pytest.raises(errors.NotFound):
        presence_beat(tenant=tenant_b, draft_id="x", user=outsider, mode="viewing")
    assert not DraftPresence.objects.exists()


def test_a_viewer_may_be_present(tenant_a, mailbox_a, make_draft, member_of, signed_in):
    draft = make_draft(mailbox_a)
    ana = member_of(tenant_a, "approver").user
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="editing")
    viewer = member_of(tenant_a, "viewer")
    response = signed_in(viewer.user).post(beat_url(tenant_a, draft))
    assert response.status_code == 200
    assert f'data-present="{ana.email}"' in response.content.decode()
    assert "is editing since" in response.content.decode()
    assert DraftPresence.objects.filter(user=viewer.user, mode="viewing").exists()


def test_the_editor_warns_when_someone_else_is_editing(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    draft = make_draft(mailbox_a)
    ana = member_of(tenant_a, "approver").user
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="editing")
    page = signed_in(admin_a.user).get(reverse("draft_edit", args=[tenant_a.slug, draft.pk]))
    html = page.content.decode()
    assert "data-editing-warning" in html
    assert f"{ana.display_name} is editing this draft since" in html
    assert "your changes may conflict" in html


def test_no_warning_when_the_other_person_only_views_or_is_gone(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    draft = make_draft(mailbox_a)
    ana, ben = member_of(tenant_a, "approver").user, member_of(tenant_a, "approver").user
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="viewing")
    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ben, mode="editing")
    DraftPresence.objects.filter(user=ben).update(seen_at=Now() - timedelta(minutes=1))
    html = signed_in(admin_a.user).get(reverse("draft_edit", args=[tenant_a.slug, draft.pk]))
    assert "data-editing-warning" not in html.content.decode()


def test_the_queue_marks_rows_with_one_query_for_the_whole_page(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    drafts = [make_draft(mailbox_a) for _ in range(6)]
    client = signed_in(admin_a.user)
    url = reverse("tenant_home", args=[tenant_a.slug])
    client.get(url)
    with CaptureQueriesContext(connection) as quiet:
        client.get(url)
    people = [member_of(tenant_a, "approver").user for _ in range(3)]
    for draft, person in zip(drafts, people, strict=False):
        presence_beat(tenant=tenant_a, draft_id=draft.pk, user=person, mode="viewing")
    presence_beat(tenant=tenant_a, draft_id=drafts[0].pk, user=people[1], mode="editing")
    with CaptureQueriesContext(connection) as busy:
        html = client.get(url).content.decode()
    assert len(busy) == len(quiet)
    assert html.count("data-present-row") == 3
    assert f"viewing: {people[0].display_name}, {people[1].display_name} (editing)" in html or (
        f"viewing: {people[1].display_name} (editing), {people[0].display_name}" in html
    )
    presence_queries = [q for q in busy.captured_queries if "draftpresence" in q["sql"]]
    assert len(presence_queries) == 1


def test_the_daily_purge_forgets_stale_presence(tenant_a, mailbox_a, make_draft, member_of):
    from intents import tasks

    drafts = [make_draft(mailbox_a) for _ in range(2)]
    ana = member_of(tenant_a, "approver").user
    for draft in drafts:
        presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="viewing")
    DraftPresence.objects.filter(draft=drafts[0]).update(seen_at=Now() - timedelta(days=2))
    tasks.retention_purge()
    assert list(DraftPresence.objects.values_list("draft_id", flat=True)) == [drafts[1].pk]


def test_a_viewer_claiming_to_edit_counts_as_viewing(
    tenant_a, mailbox_a, make_draft, member_of, signed_in
):
    """Found by an outside probe: a viewer's heartbeat with mode=editing listed them as editing
    on colleagues' pages, warning them off a draft nobody was changing."""
    draft = make_draft(mailbox_a)
    viewer = member_of(tenant_a, "viewer").user

    response = signed_in(viewer).post(beat_url(tenant_a, draft, "editing"))

    assert response.status_code == 200
    assert DraftPresence.objects.get(draft=draft, user=viewer).mode == "viewing"


def test_nobody_shows_as_editing_a_draft_decided_meanwhile(
    tenant_a, mailbox_a, make_draft, member_of
):
    """An editor page left open after a colleague approved the draft kept beating "editing":
    the others read "Ana is editing" on a draft nobody can change any more."""
    from intents.models import Draft

    draft = make_draft(mailbox_a)
    ana = member_of(tenant_a, "approver").user
    Draft.objects.filter(pk=draft.pk).update(status=Draft.Status.APPROVED)

    presence_beat(tenant=tenant_a, draft_id=draft.pk, user=ana, mode="editing")

    assert list(DraftPresence.objects.values_list("user_id", "mode")) == [(ana.pk, "viewing")]
