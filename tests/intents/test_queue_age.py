"""The queue's age filters ("waiting over 1 h", "due within 2 h") on a web host whose clock
disagrees with the database's, which set created_at and review_deadline: the filters compared
them with the web host's clock, so a skew moved drafts in or out of the filter by its size."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import time_machine

from config.clock import db_now
from intents.models import Draft
from intents.selectors.queue import QueueFilter, draft_queue

SKEW = timedelta(minutes=70)


def _ids(tenant, age: str) -> list[int]:
    return [d.pk for d in draft_queue(tenant=tenant, f=QueueFilter(age=age)).items]


def test_a_fresh_draft_is_not_over_an_hour_old_on_a_host_ahead(tenant_a, new_draft):
    new_draft()
    with time_machine.travel(datetime.now(UTC) + SKEW):
        assert _ids(tenant_a, "1h") == []


def test_a_draft_due_in_three_hours_is_not_due_soon_on_a_host_ahead(tenant_a, new_draft):
    draft = new_draft()
    Draft.objects.filter(pk=draft.pk).update(review_deadline=db_now() + timedelta(hours=3))
    with time_machine.travel(datetime.now(UTC) + SKEW):
        assert _ids(tenant_a, "due") == []


def test_the_age_filters_still_find_old_and_due_drafts(tenant_a, new_draft):
    old, due = new_draft(), new_draft()
    Draft.objects.filter(pk=old.pk).update(created_at=db_now() - timedelta(hours=1, minutes=1))
    Draft.objects.filter(pk=due.pk).update(review_deadline=db_now() + timedelta(hours=1))
    assert _ids(tenant_a, "1h") == [old.pk]
    assert _ids(tenant_a, "due") == [due.pk]
