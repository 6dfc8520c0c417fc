"""Console → Reviewer analytics: what reviewers did with the agents' drafts, per agent token and
per model, over a period (issue 17), with a chart, the same figures as a table, and a CSV export.

Tenant admins only. Approvers are not shown it: the figures span every mailbox of the tenant and
quote reject reasons, while an approver's rights may be limited to some mailboxes; the queue
already shows them what they decided.
"""

from __future__ import annotations

from datetime import date, timedelta

from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from common.csv_cells import csv_lines
from console import selectors
from console.analytics_chart import outcome_chart
from console.forms_analytics import AnalyticsFilterForm
from intents.selectors.analytics import (
    Figures,
    ReviewerAnalytics,
    models_seen,
    period_of_days,
    reviewer_analytics,
)
from tenants.access import ADMIN_ONLY, TenantRequest, tenant_view

CSV_HEADER = [
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
]


def _analytics(request: TenantRequest) -> tuple[AnalyticsFilterForm, ReviewerAnalytics, list]:
    """The bound filters (invalid ones are ignored and shown as such), the figures, the models
    seen in the period."""
    tokens = list(selectors.tokens(request.tenant))
    form = AnalyticsFilterForm(request.GET or None, tokens=tokens)
    data = form.cleaned_data if form.is_bound and form.is_valid() else {}
    zone = timezone.get_current_timezone()
    period = period_of_days(data.get("since"), data.get("until"), zone)
    result = reviewer_analytics(
        request.tenant,
        period,
        agent_token_id=data.get("token"),
        model=data.get("model") or None,
    )
    result.total.label = _("All tokens")
    for figures in result.by_token:
        figures.label = figures.label or _("(deleted token)")
    return form, result, models_seen(request.tenant, period)


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def analytics(request: TenantRequest) -> HttpResponse:
    form, result, models = _analytics(request)
    first_day, last_day = _days(result)
    return render(
        request,
        "console/analytics.html",
        {
            "form": form,
            "result": result,
            "models": models,
            "first_day": first_day,
            "last_day": last_day,
            "chart": outcome_chart([result.total, *result.by_token]),
            "export_query": request.GET.urlencode(),
        },
    )


def _days(result: ReviewerAnalytics) -> tuple[date, date]:
    """The first and last day of the period, in the viewer's zone."""
    zone = timezone.get_current_timezone()
    first = timezone.localtime(result.period.since, zone).date()
    last = timezone.localtime(result.period.until, zone).date() - timedelta(days=1)
    return first, last


def _row(breakdown: str, f: Figures) -> list:
    reasons = "; ".join(f"{r.text} ({r.count})" for r in f.top_reasons)
    return [
        breakdown,
        str(f.label),
        f.approved_unchanged,
        f.approved_edited,
        "" if f.median_edit_size is None else f.median_edit_size,
        f.rejected,
        f.expired,
        f.withdrawn,
        "" if f.decision_median_seconds is None else f.decision_median_seconds,
        "" if f.decision_p90_seconds is None else f.decision_p90_seconds,
        reasons,
    ]


@tenant_view(roles=ADMIN_ONLY)
@require_safe
def analytics_csv(request: TenantRequest) -> HttpResponse:
    """Small (one row per token and per model), so written whole rather than streamed."""
    _, result, _models = _analytics(request)
    rows = [
        _row("tenant", result.total),
        *(_row("token", figures) for figures in result.by_token),
        *(_row("model", figures) for figures in result.by_model),
    ]
    # Every cell through the exports' one guard (common.csv_cells), not two columns by hand.
    body = "".join(csv_lines(CSV_HEADER, ([str(cell) for cell in row] for row in rows)))
    first, last = _days(result)
    since, until = first.strftime("%Y%m%d"), last.strftime("%Y%m%d")
    response = HttpResponse(body, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="reviewer-analytics-{request.tenant.slug}-{since}-{until}.csv"'
    )
    return response
