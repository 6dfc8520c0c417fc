"""The reviewer analytics selector, checked number by number against a seeded history
(tests/intents/analytics_seed.py says what it holds and why)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from intents.errors import InvalidInput
from intents.models import Draft, DraftVersion, SendIntent
from intents.retention import draft_bodies_purge
from intents.selectors.analytics import (
    models_seen,
    period_between,
    period_of_days,
    reviewer_analytics,
)
from tests.factories import make_local_mailbox
from tests.intents import analytics_seed
from tests.intents.analytics_seed import FORMULA, seed_history

UTC = ZoneInfo("UTC")
MIN = 60.0


@pytest.fixture
def seeded(tenant_a, tenant_b):
    return seed_history(tenant_a, tenant_b)


def _numbers(f):
    return {
        "approved_unchanged": f.approved_unchanged,
        "approved_edited": f.approved_edited,
        "median_edit_size": f.median_edit_size,
        "rejected": f.rejected,
        "expired": f.expired,
        "withdrawn": f.withdrawn,
        "median": f.decision_median_seconds,
        "p90": f.decision_p90_seconds,
        "reasons": [(r.text, r.count) for r in f.top_reasons],
    }


def _last_30_days():
    return period_of_days(None, None, UTC)


def test_tenant_totals(seeded, tenant_a):
    result = reviewer_analytics(tenant_a, _last_30_days())
    assert _numbers(result.total) == {
        "approved_unchanged": 3,
        "approved_edited": 3,
        "median_edit_size": 7.0,
        "rejected": 4,
        "expired": 1,
        "withdrawn": 1,
        "median": 55 * MIN,
        "p90": 91 * MIN,
        "reasons": [("wrong tone", 3), (FORMULA.lower(), 1)],
    }


def test_per_token(seeded, tenant_a):
    result = reviewer_analytics(tenant_a, _last_30_days())
    assert [(f.key, f.label) for f in result.by_token] == [
        (seeded.support.pk, "support-bot"),
        (seeded.billing.pk, "billing-bot"),
    ]
    support, billing = result.by_token
    assert _numbers(support) == {
        "approved_unchanged": 2,
        "approved_edited": 2,
        "median_edit_size": 6.5,
        "rejected": 2,
        "expired": 1,
        "withdrawn": 1,
        "median": 35 * MIN,
        "p90": 55 * MIN,
        "reasons": [("wrong tone", 2)],
    }
    assert _numbers(billing) == {
        "approved_unchanged": 1,
        "approved_edited": 1,
        "median_edit_size": 8.0,
        "rejected": 2,
        "expired": 0,
        "withdrawn": 0,
        "median": 85 * MIN,
        "p90": 97 * MIN,
        "reasons": [(FORMULA.lower(), 1), ("wrong tone", 1)],
    }


def test_per_model(seeded, tenant_a):
    result = reviewer_analytics(tenant_a, _last_30_days())
    by_model = {f.key: _numbers(f) for f in result.by_model}
    assert [f.key for f in result.by_model] == ["gpt-x", "claude-y", "unknown"]
    assert by_model["gpt-x"] == {
        "approved_unchanged": 2,
        "approved_edited": 1,
        "median_edit_size": 6.0,
        "rejected": 2,
        "expired": 0,
        "withdrawn": 0,
        "median": 30 * MIN,
        "p90": 46 * MIN,
        "reasons": [("wrong tone", 2)],
    }
    assert by_model["unknown"] == {
        "approved_unchanged": 0,
        "approved_edited": 1,
        "median_edit_size": 7.0,
        "rejected": 0,
        "expired": 1,
        "withdrawn": 1,
        "median": 60 * MIN,
        "p90": 60 * MIN,
        "reasons": [],
    }
    assert by_model["claude-y"] == _numbers(result.by_token[1])


def test_filters_by_token_and_model(seeded, tenant_a):
    period = _last_30_days()
    billing = reviewer_analytics(tenant_a, period, agent_token_id=seeded.billing.pk)
    assert _numbers(billing.total) == _numbers(billing.by_token[0])
    assert [f.key for f in billing.by_model] == ["claude-y"]
    unknown = reviewer_analytics(tenant_a, period, model="unknown")
    assert (unknown.total.approved_edited, unknown.total.expired) == (1, 1)
    assert [f.label for f in unknown.by_token] == ["support-bot"]
    assert models_seen(tenant_a, period) == ["claude-y", "gpt-x", "unknown"]


def test_another_tenants_token_counts_nothing(seeded, tenant_a, tenant_b):
    other_token = tenant_b.agent_tokens.get()
    result = reviewer_analytics(tenant_a, _last_30_days(), agent_token_id=other_token.pk)
    assert result.total.total == 0
    assert result.by_token == []


def test_other_tenant_sees_only_its_own(seeded, tenant_b):
    result = reviewer_analytics(tenant_b, _last_30_days())
    assert (result.total.approved_unchanged, result.total.rejected) == (1, 1)
    assert result.total.total == 2


def test_a_period_that_covers_the_old_decision(seeded, tenant_a):
    today = timezone.localdate(timezone=UTC)
    period = period_of_days(today - timedelta(days=45), today - timedelta(days=35), UTC)
    result = reviewer_analytics(tenant_a, period)
    assert _numbers(result.total)["rejected"] == 1
    assert result.total.total == 1


def test_period_of_days_is_whole_days_in_the_zone():
    berlin = ZoneInfo("Europe/Berlin")
    period = period_of_days(date(2026, 11, 1), date(2026, 11, 30), berlin)
    assert period.since == datetime(2026, 11, 1, tzinfo=berlin)
    assert period.until == datetime(2026, 12, 1, tzinfo=berlin)
    assert period.since.astimezone(UTC) == datetime(2026, 10, 31, 23, 0, tzinfo=UTC)


def test_default_period_is_the_last_30_days_ending_today():
    period = period_of_days(None, None, UTC)
    assert period.until - period.since == timedelta(days=30)
    assert period.until.date() == timezone.localdate(timezone=UTC) + timedelta(days=1)


@pytest.mark.parametrize(
    ("since", "until", "code"),
    [
        (datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC), "period_invalid"),
        (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC), "period_invalid"),
        (datetime(2024, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC), "period_too_long"),
    ],
)
def test_bad_periods_are_refused(since, until, code):
    with pytest.raises(InvalidInput) as refused:
        period_between(since, until)
    assert refused.value.code == code


def _more_history(tenant, n):
    """n more drafts of each kind that the analytics read row by row (edited approvals) and in
    aggregate (plain approvals, rejections)."""
    mailbox = make_local_mailbox(tenant, username=f"more-{n}")
    token = tenant.agent_tokens.get(name="support-bot")
    approver = tenant.memberships.filter(role="approver").first().user
    for i in range(n):
        draft = analytics_seed.agent_draft(tenant, mailbox, token, f"model-{i % 3}")
        analytics_seed.person_edit(tenant, draft, approver, text=f"Edit number {i}.")
        analytics_seed.approve(tenant, draft, approver, i + 1)
        plain = analytics_seed.agent_draft(tenant, mailbox, token, f"model-{i % 3}")
        analytics_seed.reject(tenant, plain, approver, f"Reason {i}", i + 1)


@pytest.mark.parametrize("extra", [0, 12])
def test_query_count_does_not_grow_with_rows(
    seeded, tenant_a, extra, django_assert_max_num_queries
):
    _more_history(tenant_a, extra)
    with django_assert_max_num_queries(8):
        result = reviewer_analytics(tenant_a, _last_30_days())
    assert result.total.approved_edited == 3 + extra
    assert result.total.rejected == 4 + extra


def test_the_retention_purge_leaves_the_figures_of_the_period_as_they_were(seeded, tenant_a):
    """A tenant keeping bodies one day: the drafts of the last 30 days lose their text, and the
    person's edits of it (e1, e3) must still count as edits, of the same size."""
    before = _numbers(reviewer_analytics(tenant_a, _last_30_days()).total)
    tenant_a.retention_days = 1
    tenant_a.save(update_fields=["retention_days"])
    for intent in SendIntent.objects.filter(tenant=tenant_a):
        SendIntent.objects.filter(pk=intent.pk).update(
            state="accepted", provider_message_id=f"<{intent.pk}@sent>"
        )
    two_days_ago = timezone.now() - timedelta(days=2)
    Draft.objects.filter(tenant=tenant_a).update(updated_at=two_days_ago)
    SendIntent.objects.filter(tenant=tenant_a).update(updated_at=two_days_ago)

    assert draft_bodies_purge() > 0

    assert not DraftVersion.objects.filter(tenant=tenant_a, body_purged_at__isnull=True).exists()
    assert _numbers(reviewer_analytics(tenant_a, _last_30_days()).total) == before
