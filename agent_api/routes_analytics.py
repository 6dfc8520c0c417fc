"""``GET /api/v1/analytics``: what reviewers did with this token's drafts (issue 17).

The figures are the calling token's own, in its own tenant and within its mailboxes (a draft of
a mailbox the token no longer reaches is not counted, as it is a 404 on every route): a token is
one agent, and these are its report card (a tenant admin sees every token's on the console page). There is no parameter
to ask for the tenant or another token. This is not a wall between agents: a draft is reached
by mailbox, not by the token that wrote it (a rotated token carries on its predecessor's
drafts), so ``GET /drafts/{id}`` shows any draft of the token's mailboxes, its reviewers'
reasons included.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django.http import HttpResponse
from ninja import Query, Router, Schema
from pydantic import Field

from agent_api.auth import DRAFTS_READ, AgentRequest, refuse_unknown_query
from agent_api.errors import ApiProblem
from agent_api.routes import ERRORS_READ
from agent_api.schemas import parse_date_time
from intents.selectors.analytics import (
    DEFAULT_DAYS,
    MAX_DAYS,
    Figures,
    period_between,
    reviewer_analytics,
)

router = Router()

# Strings parsed here, not pydantic datetimes: pydantic's lax mode also takes a number as a Unix
# time (``until=0.5``), which the published schema does not allow. A date alone, or a date-time
# read as the API reads every date-time (``agent_api.schemas.parse_date_time``).
DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
SINCE = Query(
    None,
    description=f"Decided at or after: an RFC 3339 date-time, or a date (midnight UTC). "
    f"Default: {DEFAULT_DAYS} days before `until`.",
)
UNTIL = Query(
    None,
    description="Decided before: an RFC 3339 date-time, or a date (midnight UTC). Default: now.",
)


def _moment(value: str | None, field: str) -> datetime | None:
    if value is None:
        return None
    try:
        if DATE.fullmatch(value):
            return datetime.fromisoformat(value).replace(tzinfo=UTC)
        return parse_date_time(value)
    except ValueError:
        raise ApiProblem(
            422,
            "validation_failed",
            f"{field} must be an RFC 3339 date-time or a date.",
            errors=[{"field": field, "message": "Not a date-time or a date."}],
        ) from None


DESCRIPTION = f"""The calling token's drafts decided in the period (at most {MAX_DAYS} days):
approved as written, approved after a person's edits (with the median edit size), rejected (with
the five most frequent reasons), expired, withdrawn, and the median and p90 time to decision;
overall and per model. Only this token's own figures: there is no way to ask for another token's
or the whole tenant's, and a draft of a mailbox outside the token's mailboxes is not counted. A
period that is empty or reversed is 422 `period_invalid`, one too long 422 `period_too_long`."""


class ReasonOut(Schema):
    reason: str = Field(description="Normalised: lower case, white space collapsed.")
    count: int


class TimeToDecisionOut(Schema):
    median_seconds: float | None
    p90_seconds: float | None


class FiguresOut(Schema):
    approved_unchanged: int
    approved_edited: int
    median_edit_size: float | None = Field(
        description="Characters added plus removed in subject and text, plus recipients moved."
    )
    rejected: int
    top_reasons: list[ReasonOut]
    expired: int
    withdrawn: int
    time_to_decision: TimeToDecisionOut = Field(
        description="From the draft's creation to a person's approval or rejection."
    )


class ModelFiguresOut(FiguresOut):
    model: str = Field(description='`provenance.model` as sent; "unknown" without one.')


class TokenOut(Schema):
    id: int
    name: str


class AnalyticsOut(Schema):
    since: datetime
    until: datetime
    token: TokenOut
    figures: FiguresOut
    by_model: list[ModelFiguresOut]


def _figures(f: Figures) -> dict:
    return {
        "approved_unchanged": f.approved_unchanged,
        "approved_edited": f.approved_edited,
        "median_edit_size": f.median_edit_size,
        "rejected": f.rejected,
        "top_reasons": [{"reason": r.text, "count": r.count} for r in f.top_reasons],
        "expired": f.expired,
        "withdrawn": f.withdrawn,
        "time_to_decision": {
            "median_seconds": f.decision_median_seconds,
            "p90_seconds": f.decision_p90_seconds,
        },
    }


@router.get(
    "/analytics",
    auth=DRAFTS_READ,
    response={200: AnalyticsOut, **ERRORS_READ},
    summary="What reviewers did with this token's drafts",
    description=DESCRIPTION,
    tags=["analytics"],
    operation_id="analytics_get",
)
def get_analytics(
    request: AgentRequest,
    since: str | None = SINCE,
    until: str | None = UNTIL,
):
    refuse_unknown_query(request, frozenset({"since", "until"}))
    token = request.auth
    period = period_between(_moment(since, "since"), _moment(until, "until"))
    # Within the token's mailboxes, as every route is: a token that lost a mailbox read there
    # how many of its drafts were rejected and why, where each of those drafts is a 404.
    result = reviewer_analytics(
        token.tenant, period, agent_token_id=token.pk, mailbox_ids=token.mailbox_scope()
    )
    body = AnalyticsOut.model_validate(
        {
            "since": period.since,
            "until": period.until,
            "token": {"id": token.pk, "name": token.name},
            "figures": _figures(result.total),
            "by_model": [{"model": f.key, **_figures(f)} for f in result.by_model],
        }
    )
    return HttpResponse(body.model_dump_json(), content_type="application/json")
