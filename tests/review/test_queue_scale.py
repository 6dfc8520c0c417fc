"""The queue page issues the same number of queries for 10 and for 10,000 pending drafts (2,000 in
`make test`, for the suite's time budget; 10,000 under `make test-full`)."""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from intents.models import Draft, DraftVersion
from tests.sizes import size

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def add_pending(tenant, mailbox, n):
    deadline = timezone.now() + timedelta(hours=24)
    drafts = Draft.objects.bulk_create(
        Draft(tenant=tenant, mailbox=mailbox, review_deadline=deadline, current_version=1)
        for _ in range(n)
    )
    DraftVersion.objects.bulk_create(
        DraftVersion(
            draft=d,
            tenant=tenant,
            number=1,
            to=[f"c{d.pk}@example.com"],
            subject=f"Order {d.pk}",
            text="Thanks for writing.",
            author_kind="agent",
            content_hash=f"{d.pk:064x}",
        )
        for d in drafts
    )


def measure(client, url, params):
    # The same request first: what the page keeps in the session (the last filter used) is then
    # the same before each measured request, whatever was asked before it.
    client.get(url, params)
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = client.get(url, params)
        elapsed = time.perf_counter() - started
    assert response.status_code == 200
    return len(queries), elapsed


# "order" is in every draft's subject: a term that matched some ids and not others would make the
# page skip a query when nothing matched, at whichever size the ids happen to miss it.
FILTERS = [{}, {"warnings": "on"}, {"q": "order"}, {"age": "1h"}]


def test_queue_queries_do_not_grow_with_the_queue(tenant_a, mailbox_a, admin_a, signed_in):
    """Every filter, measured at 10 and at 10,000 pending drafts: one filling of the queue for
    all four (filling it took most of the test's time)."""
    large_queue = size(2_000, 10_000)
    client = signed_in(admin_a.user)
    url = reverse("tenant_home", args=[tenant_a.slug])
    add_pending(tenant_a, mailbox_a, 10)
    client.get(url)  # warm the session and caches
    small = [measure(client, url, params)[0] for params in FILTERS]
    add_pending(tenant_a, mailbox_a, large_queue - 10)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE intents_draft, intents_draftversion")
    for params, count_at_10 in zip(FILTERS, small, strict=True):
        large, elapsed = measure(client, url, params)
        print(
            f"queue {params or 'unfiltered'}: {large} queries, "
            f"{elapsed * 1000:.0f} ms at {large_queue:,} drafts"
        )
        assert (params, count_at_10) == (params, large)
        # 14: two of them are the marks of what readers see otherwise (intents.content_marks):
        # the current versions' hashes, and the bodies of those whose marks the cache lacks.
        assert large <= 14, params
