"""Ownership and deadlines on the review pages: take, hand, release through HTTP, the queue's
views and badges, the live holder badges, and the queue's query count with rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from intents import services
from intents.models import Draft, IntentEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def approver_a(tenant_a, member_of):
    return member_of(tenant_a, "approver", user__full_name="Ana Approver")


def test_take_from_the_draft_page_shows_who_holds_it(
    tenant_a, mailbox_a, make_draft, approver_a, admin_a, client
):
    draft = make_draft(mailbox_a)
    client.force_login(approver_a.user)
    response = client.post(reverse("draft_take", args=[tenant_a.slug, draft.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("draft", args=[tenant_a.slug, draft.pk])
    assert Draft.objects.get(pk=draft.pk).assignee == approver_a.user
    client.force_login(admin_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    assert "Ana Approver holds this draft." in page
    assert "You may still decide it" in page


def test_taking_a_draft_someone_holds_says_who(
    tenant_a, mailbox_a, make_draft, approver_a, member_of, client
):
    draft = make_draft(mailbox_a)
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver_a.user)
    other = member_of(tenant_a, "approver").user
    client.force_login(other)
    response = client.post(reverse("draft_take", args=[tenant_a.slug, draft.pk]), follow=True)
    assert "Ana Approver holds this draft" in response.content.decode()
    assert Draft.objects.get(pk=draft.pk).assignee == approver_a.user


def test_take_from_a_queue_row_comes_back_to_the_queue(
    tenant_a, mailbox_a, make_draft, approver_a, client
):
    draft = make_draft(mailbox_a)
    client.force_login(approver_a.user)
    response = client.post(reverse("draft_take", args=[tenant_a.slug, draft.pk]), {"back": "queue"})
    assert response["Location"] == reverse("tenant_home", args=[tenant_a.slug])


def test_hand_and_release_through_the_page(
    tenant_a, mailbox_a, make_draft, approver_a, member_of, client
):
    colleague = member_of(tenant_a, "approver", user__full_name="Carl Colleague").user
    draft = make_draft(mailbox_a)
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver_a.user)
    client.force_login(approver_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    assert "Carl Colleague" in page
    response = client.post(
        reverse("draft_hand", args=[tenant_a.slug, draft.pk]), {"to": colleague.pk}, follow=True
    )
    assert "Handed to Carl Colleague." in response.content.decode()
    assert Draft.objects.get(pk=draft.pk).assignee == colleague
    client.force_login(colleague)
    client.post(reverse("draft_release", args=[tenant_a.slug, draft.pk]))
    assert Draft.objects.get(pk=draft.pk).assignee is None


def test_the_hand_over_list_says_who_is_away(
    tenant_a, mailbox_a, make_draft, approver_a, member_of, client
):
    """A colleague marked away was listed like any other: the person handing the draft on could
    not tell they were giving it to someone who would not see it for days."""
    import re

    member_of(tenant_a, "approver", user__full_name="Carl Colleague", is_away=True)
    member_of(tenant_a, "approver", user__full_name="Dora Desk")
    draft = make_draft(mailbox_a)
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver_a.user)
    client.force_login(approver_a.user)

    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()

    shown = re.findall(r'<option value="\d+">([^<]*)</option>', page.split('id="hand-to"')[1])
    assert "Carl Colleague (away)" in shown
    assert "Dora Desk" in shown


def test_hand_to_another_tenants_member_or_garbage_is_refused(
    tenant_a, tenant_b, mailbox_a, make_draft, approver_a, member_of, client
):
    outsider = member_of(tenant_b, "approver").user
    draft = make_draft(mailbox_a)
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver_a.user)
    client.force_login(approver_a.user)
    # U+00B2 and U+0661 are digits to str.isdigit: int() refused the first with a 500.
    for value in (outsider.pk, "abc", "", "9" * 30, "\u00b2", "\u0661"):
        response = client.post(
            reverse("draft_hand", args=[tenant_a.slug, draft.pk]), {"to": value}, follow=True
        )
        assert "Choose a member of this tenant" in response.content.decode()
    assert Draft.objects.get(pk=draft.pk).assignee == approver_a.user


def test_viewers_cannot_take(tenant_a, mailbox_a, make_draft, member_of, client):
    draft = make_draft(mailbox_a)
    client.force_login(member_of(tenant_a, "viewer").user)
    response = client.post(reverse("draft_take", args=[tenant_a.slug, draft.pk]))
    assert response.status_code == 403
    assert Draft.objects.get(pk=draft.pk).assignee is None


def test_queue_views_list_mine_unassigned_and_escalated_with_counts(
    tenant_a, mailbox_a, make_draft, approver_a, client
):
    mine, free, escalated = (make_draft(mailbox_a) for _ in range(3))
    services.draft_take(tenant=tenant_a, draft_id=mine.pk, actor=approver_a.user)
    Draft.objects.filter(pk=escalated.pk).update(escalated_at=timezone.now())
    client.force_login(approver_a.user)
    url = reverse("tenant_home", args=[tenant_a.slug])

    def listed(view):
        page = client.get(url, {"view": view} if view else {})
        return {d.pk for d in page.context["page"].rows}, page

    assert listed("mine")[0] == {mine.pk}
    assert listed("unassigned")[0] == {free.pk, escalated.pk}
    assert listed("escalated")[0] == {escalated.pk}
    rows, page = listed("")
    assert rows == {mine.pk, free.pk, escalated.pk}
    counts = {t["name"]: t["count"] for t in page.context["view_tabs"]}
    assert counts == {"": 3, "mine": 1, "unassigned": 2, "escalated": 1}
    html = page.content.decode()
    assert "yours" in html and "unassigned" in html and "escalated" in html


def test_an_unknown_view_says_so_and_shows_the_whole_queue(
    tenant_a, mailbox_a, make_draft, approver_a, client
):
    make_draft(mailbox_a)
    client.force_login(approver_a.user)
    page = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"view": "theirs"})
    assert page.status_code == 200
    assert "theirs is not one of the available choices" in page.content.decode()
    assert len(page.context["page"].rows) == 1


def test_sort_by_time_left_puts_the_nearest_deadline_first(
    tenant_a, mailbox_a, make_draft, approver_a, client
):
    later, none, sooner = (make_draft(mailbox_a) for _ in range(3))
    now = timezone.now()
    Draft.objects.filter(pk=later.pk).update(sla_due_at=now + timedelta(hours=3))
    Draft.objects.filter(pk=sooner.pk).update(
        sla_due_at=now + timedelta(minutes=5), sla_warn_at=now - timedelta(minutes=1)
    )
    client.force_login(approver_a.user)
    page = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"sort": "due"})
    assert [d.pk for d in page.context["page"].rows] == [sooner.pk, later.pk, none.pk]
    assert 'data-sla="warning"' in page.content.decode()


def test_a_breached_draft_says_so_in_words(tenant_a, mailbox_a, make_draft, approver_a, client):
    draft = make_draft(mailbox_a)
    Draft.objects.filter(pk=draft.pk).update(sla_due_at=timezone.now() - timedelta(minutes=3))
    client.force_login(approver_a.user)
    html = client.get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    assert "overdue by 3 min" in html


def test_the_live_part_swaps_each_shown_rows_holder(
    tenant_a, mailbox_a, make_draft, approver_a, member_of, client
):
    draft = make_draft(mailbox_a)
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver_a.user)
    client.force_login(member_of(tenant_a, "approver").user)
    response = client.get(
        reverse("queue_changes", args=[tenant_a.slug]), {"since": draft.pk, "shown": draft.pk}
    )
    html = response.content.decode()
    assert f'id="holder-{draft.pk}"' in html
    assert 'hx-swap-oob="true"' in html
    assert "held by Ana Approver" in html


def test_the_away_flag_is_set_by_the_member_and_audited(tenant_a, approver_a, client):
    from tenants.models import AuditEvent

    client.force_login(approver_a.user)
    client.post(reverse("my_away", args=[tenant_a.slug]), {"away": "1"})
    approver_a.refresh_from_db()
    assert approver_a.is_away
    client.post(reverse("my_away", args=[tenant_a.slug]), {"away": "0"})
    approver_a.refresh_from_db()
    assert not approver_a.is_away
    actions = list(
        AuditEvent.objects.filter(tenant=tenant_a, object_id=str(approver_a.pk))
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["member.away", "member.back"]


@pytest.mark.parametrize("value", ["", "yes", "\x00", "true", "0 ", None], ids=repr)
def test_an_own_away_value_other_than_1_or_0_is_refused_and_changes_nothing(
    tenant_a, approver_a, client, value
):
    """Found by an outside probe: any non-empty value, ``yes`` or ``\\x00`` as much as ``1``,
    marked the reviewer away, and the queue's own "I am back" button sent an empty one."""
    from tenants.models import AuditEvent

    client.force_login(approver_a.user)

    answer = client.post(
        reverse("my_away", args=[tenant_a.slug]), {} if value is None else {"away": value}
    )

    approver_a.refresh_from_db()
    assert not approver_a.is_away
    assert not AuditEvent.objects.filter(action__in=["member.away", "member.back"]).exists()
    assert answer.status_code == 400
    assert "Choose away or present." in answer.content.decode()


def _held_drafts(tenant, mailbox, make_draft, holder, n):
    now = timezone.now()
    for i in range(n):
        draft = make_draft(mailbox)
        Draft.objects.filter(pk=draft.pk).update(
            assignee=holder if i % 2 else None,
            assigned_how="handed" if i % 2 else "",
            sla_due_at=now + timedelta(minutes=i),
            sla_warn_at=now,
            escalated_at=now if i % 3 == 0 else None,
        )


VIEWS = [{"view": "mine"}, {"view": "unassigned"}, {"view": "escalated"}, {"sort": "due"}, {}]


@pytest.mark.parametrize("params", VIEWS, ids=str)
def test_queue_views_query_count_does_not_grow_with_rows(
    tenant_a, mailbox_a, make_draft, approver_a, client, params
):
    client.force_login(approver_a.user)
    url = reverse("tenant_home", args=[tenant_a.slug])
    _held_drafts(tenant_a, mailbox_a, make_draft, approver_a.user, 5)
    client.get(url, params)
    # Both with no content marks kept (intents.content_marks): a page's drafts all seen before
    # read no body, one query fewer.
    cache.clear()
    with CaptureQueriesContext(connection) as small:
        assert client.get(url, params).status_code == 200
    _held_drafts(tenant_a, mailbox_a, make_draft, approver_a.user, 45)
    cache.clear()
    with CaptureQueriesContext(connection) as large:
        response = client.get(url, params)
    assert len(response.context["page"].rows) > 5
    assert len(small) == len(large)


def test_a_journal_row_per_take_not_per_renewal(
    tenant_a, mailbox_a, make_draft, approver_a, client
):
    draft = make_draft(mailbox_a)
    client.force_login(approver_a.user)
    client.post(reverse("draft_take", args=[tenant_a.slug, draft.pk]))
    before = Draft.objects.get(pk=draft.pk).claim_expires_at
    client.get(reverse("draft", args=[tenant_a.slug, draft.pk]))
    assert Draft.objects.get(pk=draft.pk).claim_expires_at >= before
    assert IntentEvent.objects.filter(draft=draft, action="draft.taken").count() == 1


def test_the_holder_working_on_it_renews_the_claim_others_do_not(
    tenant_a, mailbox_a, make_draft, approver_a, member_of, client
):
    draft = make_draft(mailbox_a)
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver_a.user)
    soon = timezone.now() + timedelta(minutes=1)
    Draft.objects.filter(pk=draft.pk).update(claim_expires_at=soon)
    client.force_login(member_of(tenant_a, "approver").user)
    client.get(reverse("draft_edit", args=[tenant_a.slug, draft.pk]))
    assert Draft.objects.get(pk=draft.pk).claim_expires_at == soon
    client.force_login(approver_a.user)
    client.get(reverse("draft_edit", args=[tenant_a.slug, draft.pk]))
    assert Draft.objects.get(pk=draft.pk).claim_expires_at > soon + timedelta(minutes=20)
