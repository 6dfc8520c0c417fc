"""The one queue query: drafts of a tenant with their current version joined in, filtered and
keyset-paginated. The review pages (pending, oldest first, with filters and a warning flag), the
agent API (any status, newest first) and the tests all read drafts through ``draft_queue``.

One statement per page (plus an optional capped count) whatever the number of rows: the current
version is joined (FilteredRelation), not fetched per draft.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypedDict, cast

from django.db.models import (
    Expression,
    F,
    FilteredRelation,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
)
from django.utils import timezone

from intents.errors import InvalidInput
from intents.models import Draft, DraftVersion, SendIntent
from intents.selectors.common import DEFAULT_PAGE, Page, decode_cursor, encode_cursor, limit_of

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

MAX_ID = 2**63 - 1


class _CurrentVersion(TypedDict):
    """What a queue row carries of its current version (queue_drafts' annotations; has_warning only when a caller asks for it)."""

    cur_subject: str
    cur_to: list[str] | None
    cur_cc: list[str] | None
    cur_bcc: list[str] | None
    cur_hash: str
    cur_author: str
    cur_author_user_id: int | None
    has_warning: bool


if TYPE_CHECKING:
    QueueRow = WithAnnotations[Draft, _CurrentVersion]

AGE_CHOICES = [
    ("", "Any age"),
    ("1h", "Waiting over 1 hour"),
    ("4h", "Waiting over 4 hours"),
    ("24h", "Waiting over a day"),
    ("due", "Deadline within 2 hours"),
]


@dataclass(frozen=True)
class QueueFilter:
    """What a reviewer narrows the queue by (the review page's filter form)."""

    mailbox: int | None = None
    agent: int | None = None
    age: str = ""  # "", "1h", "4h", "24h", "due"
    warnings: bool = False
    q: str = ""
    # Whose drafts: "" (all), "mine" (held by ``viewer``), "unassigned", "escalated".
    view: str = ""
    viewer: int | None = None
    # The order: "" (oldest first) or "due" (least time left first; no deadline last).
    sort: str = ""


VIEWS = ("", "mine", "unassigned", "escalated")
SORTS = ("", "due")


class ArrayToString(Func):
    function = "array_to_string"
    output_field = TextField()


def queue_drafts(
    *,
    tenant,
    status: str | None = Draft.Status.PENDING,
    mailbox_ids=None,
    f: QueueFilter | None = None,
    warning: Expression | None = None,
    with_intent_state: bool = False,
) -> QuerySet[QueueRow]:
    """Drafts in ``status`` (any when None), only of ``mailbox_ids`` when given, with the current
    version's fields as ``cur_*`` annotations. ``warning`` (a boolean expression on the draft row,
    from the recipient policy) is annotated as ``has_warning`` and serves ``f.warnings``;
    ``with_intent_state`` adds the state of the draft's latest send."""
    if status is not None and status not in Draft.Status.values:
        raise InvalidInput("status_invalid", f"Unknown status {status!r}.", "status")
    qs = Draft.objects.filter(tenant=tenant)
    if status is not None:
        qs = qs.filter(status=status)
    if mailbox_ids is not None:
        qs = qs.filter(mailbox_id__in=list(mailbox_ids))
    qs = qs.select_related("mailbox", "agent_token", "assignee").annotate(
        cur=FilteredRelation("versions", condition=Q(versions__number=F("current_version"))),
        cur_subject=F("cur__subject"),
        cur_to=F("cur__to"),
        cur_cc=F("cur__cc"),
        cur_bcc=F("cur__bcc"),
        cur_hash=F("cur__content_hash"),
        cur_author=F("cur__author_kind"),
        cur_author_user_id=F("cur__author_user_id"),
    )
    if warning is not None:
        qs = qs.annotate(has_warning=warning)
    if with_intent_state:
        latest = SendIntent.objects.filter(draft=OuterRef("pk")).order_by("-id")
        qs = qs.annotate(intent_state=Subquery(latest.values("state")[:1]))
    # The stubs infer annotate()'s row type from the expressions, not as the named QueueRow.
    rows = cast("QuerySet[QueueRow]", qs)
    return _filtered(rows, f) if f is not None else rows


def _in_view(qs: QuerySet[QueueRow], f: QueueFilter) -> QuerySet[QueueRow]:
    """Each view reads one partial index of intents.models.Draft (draft_held, draft_unheld,
    draft_escalated), so it stays an index range at any queue size."""
    if f.view == "mine":
        return qs.filter(assignee_id=f.viewer) if f.viewer else qs.none()
    if f.view == "unassigned":
        return qs.filter(assignee__isnull=True)
    if f.view == "escalated":
        return qs.filter(escalated_at__isnull=False)
    return qs


def _filtered(qs: QuerySet[QueueRow], f: QueueFilter) -> QuerySet[QueueRow]:
    qs = _in_view(qs, f)
    if f.mailbox:
        qs = qs.filter(mailbox_id=f.mailbox)
    if f.agent:
        qs = qs.filter(agent_token_id=f.agent)
    now = timezone.now()
    if f.age in ("1h", "4h", "24h"):
        qs = qs.filter(created_at__lte=now - timedelta(hours=int(f.age[:-1])))
    elif f.age == "due":
        qs = qs.filter(review_deadline__lte=now + timedelta(hours=2))
    if f.warnings:
        # A Q, not a keyword: has_warning is an annotation only some callers add.
        qs = qs.filter(Q(has_warning=True))
    if f.q:
        term = f.q.strip()
        recipients = Func(
            Func(F("cur__to"), F("cur__cc"), function="array_cat"),
            F("cur__bcc"),
            function="array_cat",
        )
        qs = qs.annotate(cur_recipients=ArrayToString(recipients, Value(" "))).filter(
            Q(cur__subject__icontains=term) | Q(cur_recipients__icontains=term)
        )
    return qs


def draft_queue(
    *,
    tenant,
    status: str | None = Draft.Status.PENDING,
    mailbox_ids=None,
    f: QueueFilter | None = None,
    warning: Expression | None = None,
    with_intent_state: bool = False,
    newest_first: bool = False,
    cursor: str | None = None,
    limit=DEFAULT_PAGE,
    count_upto: int | None = None,
) -> Page:
    """One page of ``queue_drafts``: oldest first on (created_at, id), the review queue's order,
    or newest first on id. Each draft's ``current`` is its current version as the queue lists it
    (subject, recipients, hash, author; not a saved row). With ``count_upto``, ``extra["total"]``
    counts the matching drafts, stopping there (an exact count of a huge queue is a scan that
    grows with it). A cursor this function did not return is ``InvalidInput`` naming ``cursor``.
    """
    limit = limit_of(limit)
    qs = queue_drafts(
        tenant=tenant,
        status=status,
        mailbox_ids=mailbox_ids,
        f=f,
        warning=warning,
        with_intent_state=with_intent_state,
    )
    extra = {} if count_upto is None else {"total": qs[: count_upto + 1].count()}
    by_due = f is not None and f.sort == "due" and not newest_first
    if newest_first:
        if cursor:
            qs = qs.filter(id__lt=_id_in(decode_cursor(cursor, 1)[0]))
        rows = list(qs.order_by("-id")[: limit + 1])
    elif by_due:
        if cursor:
            qs = _after_due(qs, *decode_cursor(cursor, 2))
        rows = list(qs.order_by(F("sla_due_at").asc(nulls_last=True), "id")[: limit + 1])
    else:
        if cursor:
            created, raw_pk = decode_cursor(cursor, 2)
            created_at, pk = _datetime_in(created), _id_in(raw_pk)
            qs = qs.filter(Q(created_at__gt=created_at) | Q(created_at=created_at, id__gt=pk))
        rows = list(qs.order_by("created_at", "id")[: limit + 1])
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        if newest_first:
            next_cursor = encode_cursor(last.pk)
        elif by_due:
            next_cursor = encode_cursor(last.sla_due_at or "", last.pk)
        else:
            next_cursor = encode_cursor(last.created_at, last.pk)
    for draft in rows:
        draft.current = _listed_version(draft)
    return Page(rows, next_cursor, limit, extra)


def _after_due(qs: QuerySet[QueueRow], due: str, raw_pk: str) -> QuerySet[QueueRow]:
    """Rows after (due, id) in the time-left order: deadlines ascending, then those with none."""
    pk = _id_in(raw_pk)
    if not due:
        return qs.filter(sla_due_at__isnull=True, id__gt=pk)
    due_at = _datetime_in(due)
    return qs.filter(
        Q(sla_due_at__gt=due_at) | Q(sla_due_at=due_at, id__gt=pk) | Q(sla_due_at__isnull=True)
    )


def _id_in(value: str) -> int:
    try:
        pk = int(value)
    except ValueError:
        raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor") from None
    if not 0 < pk <= MAX_ID:
        raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor")
    return pk


def _datetime_in(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor") from None


def _listed_version(draft: QueueRow) -> DraftVersion:
    return DraftVersion(
        draft=draft,
        tenant_id=draft.tenant_id,
        number=draft.current_version,
        subject=draft.cur_subject or "",
        to=draft.cur_to or [],
        cc=draft.cur_cc or [],
        bcc=draft.cur_bcc or [],
        content_hash=draft.cur_hash or "",
        author_kind=draft.cur_author or "",
        author_user_id=draft.cur_author_user_id,
    )
