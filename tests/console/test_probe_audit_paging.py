"""The audit log's pages are cut by time. A batch of journal rows written in one statement (the
webhook applier's deliveries, a worker's claims, a broadcast's fan-out) shares one created_at to
the microsecond: "Older entries" must not skip the rest of a batch that straddles a page."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from console.views import AUDIT_PAGE
from intents.journal import Entry, journal_many
from intents.models import IntentEvent
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db

NEXT = re.compile(r'class="pager"><a class="button" href="\?([^"]*)"')


def _pages(client, tenant, first: str = "") -> list[int]:
    """How many rows each page shows, following "Older entries" to the end (ten pages at most:
    a cursor ignored would lead back to the first page for ever)."""
    url = reverse("admin_audit", args=[tenant.slug])
    counts, query = [], first
    for _ in range(10):
        response = client.get(f"{url}?{query}" if query else url)
        assert response.status_code == 200
        html = response.content.decode()
        counts.append(html.count("<tr data-action="))
        found = NEXT.search(html)
        if found is None:
            return counts
        query = unescape(found.group(1))
    raise AssertionError(f"more than ten pages: {counts}")


def _only_rows_at_one_instant(tenant, *, journal: int, admin: int) -> None:
    """The tenant's log made of ``journal`` journal rows and ``admin`` admin rows, all written
    at one instant (to the microsecond)."""
    IntentEvent.objects.filter(tenant=tenant).delete()
    AuditEvent.objects.filter(tenant=tenant).delete()
    instant = timezone.now() - timedelta(minutes=5)
    IntentEvent.objects.bulk_create(
        IntentEvent(
            tenant=tenant,
            actor_kind=IntentEvent.Actor.WEBHOOK,
            action="delivery.delivered",
            created_at=instant,
        )
        for _ in range(journal)
    )
    AuditEvent.objects.bulk_create(
        AuditEvent(
            tenant=tenant,
            action="member.invited",
            object_type="invitation",
            object_id="1",
            data={},
            created_at=instant,
        )
        for _ in range(admin)
    )


@pytest.mark.parametrize("source", ["", "journal"])
def test_older_entries_do_not_skip_rows_written_in_one_statement(
    tenant_a, member_of, signed_in, source
):
    admin = member_of(tenant_a, "admin")
    AuditEvent.objects.filter(tenant=tenant_a).delete()
    journal_many(
        [
            Entry(
                tenant_id=tenant_a.pk,
                actor_kind=IntentEvent.Actor.WEBHOOK,
                actor_label=f"msg_{n}",
                action="delivery.delivered",
            )
            for n in range(AUDIT_PAGE + 30)
        ]
    )
    batch = IntentEvent.objects.filter(tenant=tenant_a, action="delivery.delivered")
    assert batch.values("created_at").distinct().count() == 1

    rows = IntentEvent.objects.filter(tenant=tenant_a).count()

    pages = _pages(signed_in(admin.user), tenant_a, f"source={source}" if source else "")

    assert sum(pages) == rows
    assert pages[0] == AUDIT_PAGE


def test_a_page_ending_among_both_journals_at_one_instant_loses_neither(
    tenant_a, member_of, signed_in
):
    admin = member_of(tenant_a, "admin")
    _only_rows_at_one_instant(tenant_a, journal=AUDIT_PAGE - 10, admin=AUDIT_PAGE - 10)
    client = signed_in(admin.user)
    shown_now = IntentEvent.objects.filter(tenant=tenant_a).count()
    shown_now += AuditEvent.objects.filter(tenant=tenant_a).count()

    pages = _pages(client, tenant_a)

    assert sum(pages) == shown_now


def test_a_page_ending_on_a_journal_row_keeps_the_admin_rows_of_that_instant(
    tenant_a, member_of, signed_in
):
    """Within one instant journal rows come first: a page that ends among them must still show
    the admin rows of that instant on the next page (the cursor's other branch)."""
    admin = member_of(tenant_a, "admin")
    _only_rows_at_one_instant(tenant_a, journal=AUDIT_PAGE + 10, admin=20)

    pages = _pages(signed_in(admin.user), tenant_a)

    assert pages == [AUDIT_PAGE, 30]
