"""Console → Reviewer analytics: the page, its filters, who may see it, and the CSV export, against
the seeded history (tests/intents/analytics_seed.py)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.intents.analytics_seed import FORMULA, seed_history

FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


@pytest.fixture
def seeded(tenant_a, tenant_b):
    return seed_history(tenant_a, tenant_b)


def _url(tenant, name="admin_analytics"):
    return reverse(name, args=[tenant.slug])


def _rows(html: str) -> list[list[str]]:
    """Each table row's cells, as text."""
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
    cells = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S) for row in rows]
    return [[re.sub(r"<[^>]+>|\s+", " ", c).strip() for c in row] for row in cells if row]


def test_the_admin_sees_every_figure(seeded, tenant_a, signed_in):
    response = signed_in(seeded.admin).get(_url(tenant_a))
    html = response.content.decode()
    assert response.status_code == 200
    rows = _rows(html)
    assert ["support-bot", "2", "2", "6.5", "2", "1", "1", "35 min / 55 min"] in rows
    assert ["billing-bot", "1", "1", "8", "2", "0", "0", "1 h 25 min / 1 h 37 min"] in rows
    assert ["All tokens", "3", "3", "7", "4", "1", "1", "55 min / 1 h 31 min"] in rows
    assert ["gpt-x", "2", "1", "6", "2", "0", "0", "30 min / 46 min"] in rows
    assert ["unknown", "0", "1", "7", "0", "1", "1", "1 h 0 min / 1 h 0 min"] in rows
    assert '<q>wrong tone</q> <span class="muted">(3)</span>' in html


def test_the_chart_is_inline_svg_with_a_title_and_a_description(seeded, tenant_a, signed_in):
    html = signed_in(seeded.admin).get(_url(tenant_a)).content.decode()
    svg = re.search(r'<svg xmlns="http://www.w3.org/2000/svg" role="img".*?</svg>', html, re.S)
    assert svg is not None
    assert 'aria-labelledby="chart-title chart-desc"' in svg.group(0)
    assert '<title id="chart-title">' in svg.group(0)
    assert "12 drafts in all" in svg.group(0)
    assert svg.group(0).count("<rect") == 5 + 5 + 3
    assert "<script" not in html.split("<main", 1)[-1].split("</main>")[0]


def test_the_nav_links_the_page(seeded, tenant_a, signed_in):
    html = signed_in(seeded.admin).get(_url(tenant_a)).content.decode()
    assert f'<a href="{_url(tenant_a)}" aria-current="page">Reviewer analytics</a>' in html


def test_filters_by_token_model_and_period(seeded, tenant_a, signed_in):
    client = signed_in(seeded.admin)
    by_token = _rows(client.get(_url(tenant_a), {"token": seeded.billing.pk}).content.decode())
    assert ["All tokens", "1", "1", "8", "2", "0", "0", "1 h 25 min / 1 h 37 min"] in by_token
    assert not any(row[0] == "support-bot" for row in by_token)
    by_model = _rows(client.get(_url(tenant_a), {"model": "unknown"}).content.decode())
    assert ["All tokens", "0", "1", "7", "0", "1", "1", "1 h 0 min / 1 h 0 min"] in by_model
    old = client.get(_url(tenant_a), {"since": "2020-01-01", "until": "2020-01-31"})
    assert "No agent draft was decided in this period." in old.content.decode()


def test_bad_filters_are_ignored_and_said(seeded, tenant_a, tenant_b, signed_in):
    other_token = tenant_b.agent_tokens.get()
    client = signed_in(seeded.admin)
    response = client.get(
        _url(tenant_a), {"token": other_token.pk, "since": "2026-02-30", "model": "x" * 500}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Some filters were not understood and were ignored:" in html
    assert ["All tokens", "3", "3", "7", "4", "1", "1", "55 min / 1 h 31 min"] in _rows(html)
    reversed_period = client.get(_url(tenant_a), {"since": "2026-02-01", "until": "2026-01-01"})
    assert "The period ends before it starts." in reversed_period.content.decode()


@pytest.mark.parametrize("name", ["admin_analytics", "admin_analytics_csv"])
@pytest.mark.parametrize(
    ("params", "said"),
    [
        # A start alone, far back: the period ran to today, past 400 days (a 500).
        ({"since": "2000-01-01"}, "A period is at most 400 days long."),
        ({"since": "2999-01-01"}, "The period ends before it starts."),
        # The calendar's ends: date arithmetic overflowed (a 500).
        ({"until": "9999-12-31"}, "8999-12-31"),
        ({"until": "0001-01-01"}, "2000-01-01"),
    ],
)
def test_filters_the_period_cannot_hold_are_said_not_a_500(
    seeded, tenant_a, signed_in, name, params, said
):
    response = signed_in(seeded.admin).get(_url(tenant_a, name), params)

    assert response.status_code == 200
    if name == "admin_analytics":
        assert said in response.content.decode()


@pytest.mark.parametrize("name", ["admin_analytics", "admin_analytics_csv"])
def test_approvers_and_viewers_are_refused(seeded, tenant_a, member_of, signed_in, name):
    assert signed_in(seeded.approver).get(_url(tenant_a, name)).status_code == 403
    viewer = member_of(tenant_a, "viewer").user
    assert signed_in(viewer).get(_url(tenant_a, name)).status_code == 403


@pytest.mark.parametrize("name", ["admin_analytics", "admin_analytics_csv"])
def test_another_tenants_admin_gets_404(seeded, tenant_a, tenant_b, signed_in, name):
    other_admin = tenant_b.memberships.get(role="admin").user
    assert signed_in(other_admin).get(_url(tenant_a, name)).status_code == 404


def test_another_tenants_admin_sees_only_their_own(seeded, tenant_b, signed_in):
    other_admin = tenant_b.memberships.get(role="admin").user
    rows = _rows(signed_in(other_admin).get(_url(tenant_b)).content.decode())
    assert ["All tokens", "1", "0", "—", "1", "0", "0", "1 min / 1 min"] in rows


def test_the_csv_cell_by_cell(seeded, tenant_a, signed_in):
    response = signed_in(seeded.admin).get(_url(tenant_a, "admin_analytics_csv"))
    today = timezone.localdate().strftime("%Y%m%d")
    first = (timezone.localdate() - timezone.timedelta(days=29)).strftime("%Y%m%d")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="reviewer-analytics-tenant-a-{first}-{today}.csv"'
    )
    formula = "'" + FORMULA.lower()
    assert rows == [
        [
            "breakdown",
            "group",
            "approved_unchanged",
            "approved_edited",
            "median_edit_size",
            "rejected",
            "expired",
            "withdrawn",
            "decision_median_seconds",
            "decision_p90_seconds",
            "top_reject_reasons",
        ],
        ["tenant", "All tokens", "3", "3", "7.0", "4", "1", "1", "3300.0", "5460.0",
         # After "; " (a column of its own where Excel splits on semicolons) it stays text too.
         f"wrong tone (3);' {FORMULA.lower()} (1)"],
        ["token", "support-bot", "2", "2", "6.5", "2", "1", "1", "2100.0", "3300.0",
         "wrong tone (2)"],
        ["token", "billing-bot", "1", "1", "8.0", "2", "0", "0", "5100.0", "5820.0",
         f"{formula} (1); wrong tone (1)"],
        ["model", "gpt-x", "2", "1", "6.0", "2", "0", "0", "1800.0", "2760.0", "wrong tone (2)"],
        ["model", "claude-y", "1", "1", "8.0", "2", "0", "0", "5100.0", "5820.0",
         f"{formula} (1); wrong tone (1)"],
        ["model", "unknown", "0", "1", "7.0", "0", "1", "1", "3600.0", "3600.0", ""],
    ]  # fmt: skip
    assert all(not cell.startswith(FORMULA_LEADS) for row in rows for cell in row)


def test_a_hostile_token_name_and_model_stay_text(tenant_a, tenant_b, signed_in):
    seeded = seed_history(tenant_a, tenant_b)
    seeded.support.name = "@SUM(1+1)"
    seeded.support.save(update_fields=["name"])
    rows = list(
        csv.reader(
            io.StringIO(
                signed_in(seeded.admin).get(_url(tenant_a, "admin_analytics_csv")).content.decode()
            )
        )
    )
    assert rows[2][:2] == ["token", "'@SUM(1+1)"]


def test_a_token_name_holding_a_tab_is_quoted_and_stays_text(tenant_a, tenant_b, signed_in):
    """The analytics export wrote with its own csv.writer, guarding two columns by hand: a tab
    in a token name was left unquoted and what followed it unguarded, unlike the other
    exports."""
    seeded = seed_history(tenant_a, tenant_b)
    seeded.support.name = "Bot\t=SUM(1+1)"
    seeded.support.save(update_fields=["name"])
    body = signed_in(seeded.admin).get(_url(tenant_a, "admin_analytics_csv")).content.decode()

    assert '"token","Bot\t\'=SUM(1+1)",' in body
    assert list(csv.reader(io.StringIO(body)))[2][:2] == ["token", "Bot\t'=SUM(1+1)"]


@pytest.mark.parametrize("name", ["admin_analytics", "admin_analytics_csv"])
@pytest.mark.parametrize("until", ["2000-01-01", "2000-01-28"])
def test_an_end_day_near_the_first_day_starts_the_default_period_on_that_day(
    tenant_a, member_of, signed_in, name, until
):
    """A missing start is the default length before the end, but never before the first day a
    period may begin on (it was a 500: the computed start fell outside the years allowed)."""
    response = signed_in(member_of(tenant_a, "admin").user).get(
        _url(tenant_a, name), {"until": until}
    )
    assert response.status_code == 200


@pytest.mark.parametrize("name", ["admin_analytics", "admin_analytics_csv"])
def test_a_longest_period_across_daylight_saving_changes_is_counted(
    tenant_a, member_of, signed_in, name
):
    """400 local days with two autumn changes and one spring one (400 days and an hour)."""
    admin = member_of(tenant_a, "admin")
    admin.user.time_zone = "Europe/Berlin"
    admin.user.save(update_fields=["time_zone"])
    response = signed_in(admin.user).get(
        _url(tenant_a, name), {"since": "2023-10-01", "until": "2024-11-03"}
    )
    assert response.status_code == 200
