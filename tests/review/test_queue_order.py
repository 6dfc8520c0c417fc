"""The queue's orders (oldest, newest, priority) and its previous page: keyset cursors both ways,
each cursor bound to its order; bulk approve returns to the same place; the navigation counts."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from intents.models import Draft
from intents.selectors.queue import QUEUE_SORTS, QueueFilter
from review import queries

pytestmark = pytest.mark.django_db


@pytest.fixture
def five(mailbox_a, make_draft):
    """Five drafts, d0 oldest; priorities 0, 5, 0, 5, 1."""
    now = timezone.now()
    drafts = []
    for n, priority in enumerate([0, 5, 0, 5, 1]):
        d = make_draft(mailbox_a, subject=f"d{n}")
        Draft.objects.filter(pk=d.pk).update(
            created_at=now - timedelta(minutes=50 - n), priority=priority
        )
        drafts.append(d.pk)
    return drafts


def _walk(tenant, sort):
    """Every page forwards, then every page back from the last: the ids in the order seen."""
    pages, after = [], ""
    while True:
        page = queries.queue_page(tenant=tenant, f=QueueFilter(), sort=sort, after=after, limit=2)
        pages.append(page)
        if not page.next_cursor:
            break
        after = page.next_cursor
    forwards = [d.pk for p in pages for d in p.rows]
    backwards, page = [], pages[-1]
    while page.prev_cursor:
        page = queries.queue_page(
            tenant=tenant, f=QueueFilter(), sort=sort, before=page.prev_cursor, limit=2
        )
        backwards = [d.pk for d in page.rows] + backwards
    return forwards, backwards + [d.pk for d in pages[-1].rows]


@pytest.mark.parametrize(
    ("sort", "order"),
    [("oldest", [0, 1, 2, 3, 4]), ("newest", [4, 3, 2, 1, 0]), ("priority", [1, 3, 4, 0, 2])],
)
def test_each_order_pages_forwards_and_back(tenant_a, five, sort, order):
    forwards, backwards = _walk(tenant_a, sort)
    assert forwards == [five[i] for i in order]
    assert backwards == forwards


def test_the_first_page_has_no_previous_and_a_cursor_of_another_order_shows_the_first(
    tenant_a, five
):
    first = queries.queue_page(tenant=tenant_a, f=QueueFilter(), sort="newest", limit=2)
    assert first.prev_cursor is None
    oldest_second = queries.queue_page(tenant=tenant_a, f=QueueFilter(), sort="oldest", limit=2)
    mixed = queries.queue_page(
        tenant=tenant_a, f=QueueFilter(), sort="newest", after=oldest_second.next_cursor, limit=2
    )
    assert [d.pk for d in mixed.rows] == [d.pk for d in first.rows]


def test_the_sorts_are_a_dict_another_branch_can_extend():
    assert list(QUEUE_SORTS) == ["oldest", "newest", "priority", "due"]


def test_the_queue_page_sorts_by_the_query_and_offers_the_orders(
    tenant_a, five, admin_a, signed_in
):
    client = signed_in(admin_a.user)
    html = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"sort": "newest"}).content
    text = html.decode()
    assert text.index(">d4<") < text.index(">d0<")
    assert '<option value="priority">' in text
    bad = client.get(reverse("tenant_home", args=[tenant_a.slug]), {"sort": "nope"})
    assert bad.status_code == 200
    assert "data-filter-errors" in bad.content.decode()
    assert "Sort (Select a valid choice." in bad.content.decode()


def _item(draft):
    version = draft.versions.get()
    return f"{draft.pk}:{version.number}:{version.content_hash}"


def test_bulk_approve_returns_to_the_same_filters_order_and_page(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = make_draft(mailbox_a)
    client = signed_in(admin_a.user)
    response = client.post(
        reverse("bulk_approve", args=[tenant_a.slug]),
        {"item": _item(draft), "place": "q=refund&sort=newest&after=abc&warnings=on&evil=1"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/t/tenant-a/?q=refund&warnings=on&sort=newest&after=abc"


@pytest.mark.parametrize("place", ["//evil.test/", "https://evil.test/t/tenant-b/", "next=//x"])
def test_bulk_approve_never_returns_anywhere_but_this_tenants_queue(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, place
):
    draft = make_draft(mailbox_a)
    response = signed_in(admin_a.user).post(
        reverse("bulk_approve", args=[tenant_a.slug]), {"item": _item(draft), "place": place}
    )
    assert response["Location"] == "/t/tenant-a/"


def test_progressive_bulk_approve_answers_each_draft_and_refuses_a_changed_one(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    from intents import services

    fresh, changed = make_draft(mailbox_a), make_draft(mailbox_a)
    seen = _item(changed)
    services.draft_add_version(
        tenant=tenant_a,
        draft_id=changed.pk,
        base_version=1,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Changed",
        text="Changed.",
        html="",
        actor_user=admin_a.user,
    )
    client = signed_in(admin_a.user)
    url = reverse("bulk_approve", args=[tenant_a.slug])
    headers = {"X-Bulk-Progress": "1"}
    ok = client.post(url, {"item": _item(fresh)}, headers=headers).json()
    refused = client.post(url, {"item": seen}, headers=headers).json()
    assert ok == {"approved": 1, "refused": []}
    assert refused["approved"] == 0
    assert refused["refused"][0]["draft"] == changed.pk
    assert "changed since you opened it" in refused["refused"][0]["message"]
    changed.refresh_from_db()
    assert changed.status == "pending"


def test_nav_counts_count_this_tenants_pending_drafts_and_attention(
    tenant_a, tenant_b, mailbox_a, mailbox_b, make_draft, make_intent, admin_a, signed_in
):
    make_draft(mailbox_a)
    make_draft(mailbox_a)
    make_draft(mailbox_b)
    make_intent(mailbox_a, state="needs_attention")
    html = signed_in(admin_a.user).get(reverse("nav_counts", args=[tenant_a.slug])).content.decode()
    assert 'id="nav-count-queue" class="count" hx-swap-oob="true" data-n="2">2<' in html
    assert 'id="nav-count-attention" class="count" hx-swap-oob="true" data-n="1">1<' in html
    # Nothing held nor escalated yet: Mine and Escalated are there, at zero (hidden).
    assert 'id="nav-count-mine" class="count zero" hx-swap-oob="true" data-n="0">' in html
    assert 'id="nav-count-escalated" class="count zero" hx-swap-oob="true" data-n="0">' in html


def test_nav_counts_count_mine_and_escalated(
    tenant_a, mailbox_a, make_draft, admin_a, member_of, signed_in
):
    from intents.models import Draft

    other = member_of(tenant_a, "approver")
    mine, theirs, escalated = make_draft(mailbox_a), make_draft(mailbox_a), make_draft(mailbox_a)
    Draft.objects.filter(pk=mine.pk).update(assignee=admin_a.user, assigned_how="handed")
    Draft.objects.filter(pk=theirs.pk).update(assignee=other.user, assigned_how="handed")
    Draft.objects.filter(pk=escalated.pk).update(escalated_at=timezone.now())
    html = signed_in(admin_a.user).get(reverse("nav_counts", args=[tenant_a.slug])).content.decode()
    assert 'id="nav-count-mine" class="count" hx-swap-oob="true" data-n="1">1<' in html
    assert 'id="nav-count-escalated" class="count" hx-swap-oob="true" data-n="1">1<' in html


def test_nav_counts_stop_at_the_cap(tenant_a, mailbox_a, make_draft, admin_a, signed_in, settings):
    from intents.selectors import drafts

    for _ in range(3):
        make_draft(mailbox_a)
    counts = queries.nav_counts(tenant=tenant_a, user=admin_a.user)
    assert counts.queue == 3
    assert drafts.pending_count(tenant=tenant_a, cap=1) == 2
