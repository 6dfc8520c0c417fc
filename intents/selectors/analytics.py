"""What reviewers did with the agents' drafts: per tenant, per agent token and per model, over a
period (issue 17, "What reviewers changed").

A draft counts in the period in which it was decided (``decided_at``), once, by its final status:
approved unchanged (the approved version is what the agent last wrote, or a person's copy of it),
approved after edits (with the size of the edit, ``intents.changes.version_change``), rejected
(with the reasons, normalised), expired, withdrawn. Time to decision runs from the draft's creation
to ``decided_at`` and covers the drafts a person decided (approved or rejected): an expiry is the
deadline, a withdrawal the agent's own call.

Drafts a person wrote from scratch (``created_by`` set) are not the agents' and are left out. The
model is ``provenance["model"]`` as the agent sent it; without one it is ``unknown``.

The work is bounded and the query count constant (the tests assert it at two sizes): counts,
medians and p90s are SQL aggregates (``percentile_cont``, linear interpolation between ranks) on
the ``draft_decided`` index; the only rows read are the approved drafts whose last version a
person wrote, each paired with the agent's version before it in the same query, streamed.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import TYPE_CHECKING, TypedDict

from django.db.models import (
    Aggregate,
    CharField,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Func,
    Q,
    QuerySet,
    Window,
)
from django.db.models.functions import RowNumber
from django.utils import timezone

from common.days import FIRST_DAY, LAST_DAY
from intents.changes import BASE_FIELDS, EDIT_FIELDS, edit_size_from_agent, with_agent_base
from intents.errors import InvalidInput
from intents.models import Draft, DraftVersion

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _Model(TypedDict):
    model: str


if TYPE_CHECKING:
    DecidedDraft = WithAnnotations[Draft, _Model]

UNKNOWN_MODEL = "unknown"
MODEL_MAX = 100
REASON_MAX = 200
TOP_REASONS = 5
DEFAULT_DAYS = 30
MAX_DAYS = 400
DECIDED = ("approved", "rejected", "expired", "withdrawn")
BY_PERSON = ("approved", "rejected")


class Percentile(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expr)``."""

    function = "PERCENTILE_CONT"
    name = "Percentile"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)%(filter)s"

    def __init__(self, expression, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


class _ReasonKey(Func):
    """A reason as a person would group it: case, surrounding and repeated white space and a
    trailing full stop or exclamation do not make a different reason.

    All literals, no parameters: the key appears in GROUP BY and in the window's ORDER BY, and
    PostgreSQL matches the two only if they are the same text (psycopg binds each parameter as
    its own $n)."""

    template = (
        "LOWER(LEFT(REGEXP_REPLACE(TRIM(REGEXP_REPLACE(%(expressions)s, '\\s+', ' ', 'g')),"
        f" '[\\s.!]+$', ''), {REASON_MAX}))"
    )


@dataclass(frozen=True)
class Period:
    """Half-open: ``since`` <= decided_at < ``until``, both aware."""

    since: datetime
    until: datetime


def period_of_days(since: date | None, until: date | None, zone: tzinfo) -> Period:
    """Whole days in ``zone`` from ``since`` to ``until`` inclusive; by default the last
    ``DEFAULT_DAYS`` days ending today (in that zone)."""
    today = timezone.localdate(timezone=zone)
    until = until or today
    try:
        # The default start goes no further back than the first day a period may begin on.
        since = since or max(FIRST_DAY, until - timedelta(days=DEFAULT_DAYS - 1))
        start = datetime.combine(since, time.min, tzinfo=zone)
        end = datetime.combine(until + timedelta(days=1), time.min, tzinfo=zone)
    except OverflowError:  # a day next to the calendar's ends (year 1, year 9999)
        raise _out_of_range() from None
    return period_between(start, end)


# Periods are counted between common.days' days (these instants allow a day's slack for any
# time zone).
EARLIEST = datetime.combine(FIRST_DAY - timedelta(days=1), time.min, tzinfo=UTC)
LATEST = datetime.combine(LAST_DAY + timedelta(days=2), time.min, tzinfo=UTC)


def _out_of_range() -> InvalidInput:
    return InvalidInput(
        "period_out_of_range",
        "A period must lie between the years 2000 and 9000.",
        "since",
    )


def period_between(since: datetime | None, until: datetime | None) -> Period:
    """An explicit period (naive times are UTC); by default the ``DEFAULT_DAYS`` days up to now.
    Refused: an empty or reversed period, or one longer than ``MAX_DAYS`` days."""
    until = _aware(until) if until else timezone.now()
    if not EARLIEST < until <= LATEST or (since is not None and not _aware(since) >= EARLIEST):
        raise _out_of_range()
    since = _aware(since) if since else until - timedelta(days=DEFAULT_DAYS)
    if since >= until:
        raise InvalidInput("period_invalid", "since must be before until.", "since")
    if until - since > timedelta(days=MAX_DAYS):
        raise InvalidInput("period_too_long", f"A period is at most {MAX_DAYS} days long.", "until")
    return Period(since=since, until=until)


def _aware(value: datetime) -> datetime:
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


@dataclass
class Reason:
    text: str
    count: int


@dataclass
class Figures:
    """One group's numbers. ``key`` is the token id (``None``: a deleted token), the model name,
    or ``"all"``; ``label`` is what a person reads."""

    key: object
    label: str
    approved_unchanged: int = 0
    approved_edited: int = 0
    rejected: int = 0
    expired: int = 0
    withdrawn: int = 0
    median_edit_size: float | None = None
    decision_median_seconds: float | None = None
    decision_p90_seconds: float | None = None
    top_reasons: list[Reason] = field(default_factory=list)

    @property
    def approved(self) -> int:
        return self.approved_unchanged + self.approved_edited

    @property
    def total(self) -> int:
        return self.approved + self.rejected + self.expired + self.withdrawn


@dataclass
class ReviewerAnalytics:
    period: Period
    total: Figures
    by_token: list[Figures]
    by_model: list[Figures]


class _ModelName(Func):
    """``provenance->>'model'``, trimmed and cut to ``MODEL_MAX``; ``unknown`` when absent or
    blank. Literals only, for the reason ``_ReasonKey`` gives (it is a window's partition)."""

    template = (
        "COALESCE(NULLIF(LEFT(TRIM(%(expressions)s ->> 'model'), "
        f"{MODEL_MAX}), ''), '{UNKNOWN_MODEL}')"
    )
    output_field = CharField()


def _model_expr(prefix: str = "") -> _ModelName:
    return _ModelName(F(f"{prefix}provenance"))


def decided_drafts(
    tenant,
    period: Period,
    *,
    agent_token_id: int | None = None,
    model: str | None = None,
    mailbox_ids: set[int] | None = None,
) -> QuerySet[DecidedDraft]:
    """The agents' drafts of ``tenant`` decided in ``period``, with ``model`` annotated
    (``mailbox_ids``: only those mailboxes' drafts; None, every mailbox's)."""
    qs = Draft.objects.filter(
        tenant=tenant,
        decided_at__gte=period.since,
        decided_at__lt=period.until,
        status__in=DECIDED,
        created_by__isnull=True,
    ).annotate(model=_model_expr())
    if agent_token_id is not None:
        qs = qs.filter(agent_token_id=agent_token_id)
    if model is not None:
        qs = qs.filter(model=model)
    if mailbox_ids is not None:
        qs = qs.filter(mailbox_id__in=mailbox_ids)
    return qs


def models_seen(tenant, period: Period) -> list[str]:
    """The model names of the drafts decided in ``period`` (for a filter's choices)."""
    names = decided_drafts(tenant, period).values_list("model", flat=True).distinct()
    return sorted(names)


def reviewer_analytics(
    tenant,
    period: Period,
    *,
    agent_token_id: int | None = None,
    model: str | None = None,
    mailbox_ids: set[int] | None = None,
) -> ReviewerAnalytics:
    """The figures of ``tenant``'s agents' drafts decided in ``period``: of one token's
    (``agent_token_id``), one model's, or only those of ``mailbox_ids`` (a restricted token's
    mailboxes: the agent API's report card shows nothing of a mailbox the token does not reach)
    when given."""
    drafts = decided_drafts(
        tenant, period, agent_token_id=agent_token_id, model=model, mailbox_ids=mailbox_ids
    )
    edits = _edit_sizes(drafts)
    groups = {dim: _figures(drafts, dim, edits) for dim in (None, "agent_token_id", "model")}
    total = groups[None].get("all") or Figures(key="all", label="")
    by_token = list(groups["agent_token_id"].values())
    names = dict(
        tenant.agent_tokens.filter(pk__in=[f.key for f in by_token]).values_list("pk", "name")
    )
    for figures in by_token:
        figures.label = names.get(figures.key, "")
    by_token.sort(key=lambda f: (-f.total, f.label, str(f.key)))
    by_model = sorted(groups["model"].values(), key=lambda f: (-f.total, f.label))
    return ReviewerAnalytics(period=period, total=total, by_token=by_token, by_model=by_model)


def _figures(drafts: QuerySet[DecidedDraft], dim: str | None, edits: list[tuple]) -> dict:
    """Figures per value of ``dim`` (``None``: one group, "all"): 2 queries."""
    key_of = (lambda row: row[dim]) if dim else (lambda row: "all")
    duration = ExpressionWrapper(F("decided_at") - F("created_at"), output_field=DurationField())
    by_person = Q(status__in=BY_PERSON)
    aggregates = {
        "approved": Count("pk", filter=Q(status="approved")),
        "rejected": Count("pk", filter=Q(status="rejected")),
        "expired": Count("pk", filter=Q(status="expired")),
        "withdrawn": Count("pk", filter=Q(status="withdrawn")),
        "decision_median": Percentile(duration, 0.5, filter=by_person),
        "decision_p90": Percentile(duration, 0.9, filter=by_person),
    }
    if dim:
        rows = list(drafts.values(dim).order_by().annotate(**aggregates))
    else:
        rows = [drafts.aggregate(**aggregates)]
    out: dict = {}
    for row in rows:
        key = key_of(row)
        out[key] = Figures(
            key=key,
            label=str(key),
            approved_unchanged=row["approved"],
            rejected=row["rejected"],
            expired=row["expired"],
            withdrawn=row["withdrawn"],
            decision_median_seconds=_seconds(row["decision_median"]),
            decision_p90_seconds=_seconds(row["decision_p90"]),
        )
    _add_edits(out, dim, edits)
    _add_reasons(out, drafts, dim, key_of)
    return out


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _add_edits(out: dict, dim: str | None, edits: list[tuple]) -> None:
    sizes: dict = defaultdict(list)
    for token_id, model, size in edits:
        key = {None: "all", "agent_token_id": token_id, "model": model}[dim]
        sizes[key].append(size)
    for key, values in sizes.items():
        figures = out[key]
        figures.approved_edited = len(values)
        figures.approved_unchanged -= len(values)
        figures.median_edit_size = float(statistics.median(values))


def _add_reasons(out: dict, drafts: QuerySet[DecidedDraft], dim: str | None, key_of) -> None:
    """The ``TOP_REASONS`` most frequent reasons per group, ties by the reason's text."""
    group = (dim,) if dim else ()
    rows = (
        drafts.filter(status="rejected")
        .annotate(reason_key=_ReasonKey(F("reject_reason")))
        .values(*group, "reason_key")
        .order_by()
        .annotate(count=Count("pk"))
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F(dim)] if dim else [],
                order_by=[F("count").desc(), F("reason_key").asc()],
            )
        )
        .filter(rank__lte=TOP_REASONS)
        .order_by(*group, "rank")
    )
    for row in rows:
        out[key_of(row)].top_reasons.append(Reason(text=row["reason_key"], count=row["count"]))


def _edit_sizes(drafts: QuerySet[DecidedDraft]) -> list[tuple]:
    """(token id, model, edit size) of every approved draft a person changed: one query, streamed.

    The approved draft's current version is the approved one. Only those a person wrote are read,
    each with the agent's last version before it (``with_agent_base``); a person's version
    identical to the agent's (a reopened copy, an edit undone) is unchanged. Once the retention
    purge emptied the bodies, the size it kept (``purged_edit_size``) is the edit's: measured
    again, every change of the text was gone, and the draft counted as approved as written.
    """
    rows = (
        with_agent_base(
            DraftVersion.objects.filter(
                draft__in=drafts.filter(status="approved").values("pk"),
                number=F("draft__current_version"),
                author_kind=DraftVersion.Author.PERSON,
            )
        )
        .annotate(token_id=F("draft__agent_token_id"), model=_model_expr("draft__"))
        .values(
            "token_id",
            "model",
            "body_purged_at",
            "purged_edit_size",
            *EDIT_FIELDS,
            *BASE_FIELDS,
        )
    )
    sizes = []
    for row in rows.iterator(chunk_size=500):
        if row["body_purged_at"] is not None:
            size = row["purged_edit_size"]
        else:
            size = edit_size_from_agent(row)
        if size is not None:
            sizes.append((row["token_id"], row["model"], size))
    return sizes


__all__ = [
    "DEFAULT_DAYS",
    "UNKNOWN_MODEL",
    "Figures",
    "Period",
    "Reason",
    "ReviewerAnalytics",
    "models_seen",
    "period_between",
    "period_of_days",
    "reviewer_analytics",
]
