"""The one queue query: drafts of a tenant with their current version joined in, filtered and
keyset-paginated. The review pages (pending, oldest first, with filters and a warning flag), the
agent API (any status, newest first) and the tests all read drafts through ``draft_queue``.

One statement per page (plus an optional capped count) whatever the number of rows: the current
version is joined (FilteredRelation), not fetched per draft.
"""

from __future__ import annotations

from collections.abc import Callable
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
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from intents.errors import InvalidInput
from intents.models import Draft, DraftVersion, SendIntent
from intents.selectors.common import (
    DEFAULT_PAGE,
    Page,
    counts_up_to,
    decode_cursor,
    encode_cursor,
    limit_of,
)

if TYPE_CHECKING:
    from django.db.models.expressions import OrderBy
    from django_stubs_ext import StrOrPromise, WithAnnotations

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
    ("", _("Any age")),
    ("1h", _("Waiting over 1 hour")),
    ("4h", _("Waiting over 4 hours")),
    ("24h", _("Waiting over a day")),
    ("due", _("Deadline within 2 hours")),
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


VIEWS = ("", "mine", "unassigned", "escalated")


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
    to_check: Expression | None = None,
    with_intent_state: bool = False,
) -> QuerySet[QueueRow]:
    """Drafts in ``status`` (any when None), only of ``mailbox_ids`` when given, with the current
    version's fields as ``cur_*`` annotations. ``warning`` (a boolean expression on the draft row,
    from the recipient policy) is annotated as ``has_warning``; ``to_check`` (one that holds
    whenever ``warning`` does, and for every other recipient the draft's page counts as to check)
    as ``to_check``, and serves ``f.warnings``; ``with_intent_state`` adds the state of the
    draft's latest send."""
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
    if to_check is not None:
        qs = qs.annotate(to_check=to_check)
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


def view_counts(*, tenant, viewer: int | None, cap: int) -> dict[str, int]:
    """Pending drafts per queue view (VIEWS: All, Mine for ``viewer``, Unassigned, Escalated),
    each counted up to ``cap`` + 1 on its own partial index through ``_in_view``, in one
    statement whatever the queue's size. The queue's tabs and the navigation's badges read it."""
    pending = Draft.objects.filter(tenant=tenant, status=Draft.Status.PENDING)
    return counts_up_to(
        {
            view: _in_view(pending, QueueFilter(view=view, viewer=viewer))  # type: ignore[arg-type]
            for view in VIEWS
        },
        cap,
    )


def _filtered(qs: QuerySet[QueueRow], f: QueueFilter) -> QuerySet[QueueRow]:
    qs = _in_view(qs, f)
    if f.mailbox:
        qs = qs.filter(mailbox_id=f.mailbox)
    if f.agent:
        qs = qs.filter(agent_token_id=f.agent)
    # The database's clock, which set created_at and the review deadline: this host's clock moved
    # drafts into "over 1 h" or "due within 2 h" by its skew.
    if f.age in ("1h", "4h", "24h"):
        qs = qs.filter(created_at__lte=Now() - timedelta(hours=int(f.age[:-1])))
    elif f.age == "due":
        qs = qs.filter(review_deadline__lte=Now() + timedelta(hours=2))
    if f.warnings:
        # A Q, not a keyword: to_check is an annotation only some callers add.
        qs = qs.filter(Q(to_check=True))
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


@dataclass(frozen=True)
class SortKey:
    field: str
    descending: bool
    parse: Callable[[str], object]
    # A nullable column: NULL sorts after every value going forwards (as if infinitely late);
    # its cursor value is the empty string.
    nullable: bool = False


@dataclass(frozen=True)
class QueueSort:
    """One order of the review queue: its label, and the keys of its keyset (the last one
    unique, so the order is total and a cursor names one place)."""

    label: StrOrPromise
    keys: tuple[SortKey, ...]


def _int_in(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InvalidInput("cursor_invalid", "The cursor is not valid.", "cursor") from None


_ID_ASC = SortKey("id", False, lambda v: _id_in(v))
_ID_DESC = SortKey("id", True, lambda v: _id_in(v))

# The review queue's orders, by the key a URL carries (?sort=). Another order is one more entry:
# its keys must be non-null columns of the draft row (or annotations queue_drafts adds).
QUEUE_SORTS: dict[str, QueueSort] = {
    "oldest": QueueSort(
        _("Oldest first"), (SortKey("created_at", False, lambda v: _datetime_in(v)), _ID_ASC)
    ),
    "newest": QueueSort(
        _("Newest first"), (SortKey("created_at", True, lambda v: _datetime_in(v)), _ID_DESC)
    ),
    "priority": QueueSort(
        _("Highest priority first"),
        (
            SortKey("priority", True, _int_in),
            SortKey("created_at", False, lambda v: _datetime_in(v)),
            _ID_ASC,
        ),
    ),
    # Least time left first (intents.services.deadlines fixes sla_due_at at creation); drafts
    # without a deadline come last, oldest first among themselves by id.
    "due": QueueSort(
        _("Least time left"),
        (SortKey("sla_due_at", False, lambda v: _datetime_in(v), nullable=True), _ID_ASC),
    ),
}
DEFAULT_SORT = "oldest"


def _beyond(sort: QueueSort, values: list[object], *, backwards: bool) -> Q:
    """The rows after ``values`` in this order (before them when ``backwards``): the keyset
    condition (k1 > v1) OR (k1 = v1 AND k2 > v2) OR ..., each comparison turned by its key's
    direction."""
    condition = Q(pk__in=[])
    equal = Q()
    for key, value in zip(sort.keys, values, strict=True):
        later = key.descending == backwards
        condition |= equal & _past(key, value, later=later)
        equal &= Q(**{f"{key.field}__isnull": True}) if value is None else Q(**{key.field: value})
    return condition


def _past(key: SortKey, value: object, *, later: bool) -> Q:
    """The rows whose ``key`` is past ``value`` (greater when ``later``, else smaller); a NULL of a
    nullable key counts as greater than every value."""
    if not key.nullable:
        return Q(**{f"{key.field}__{'gt' if later else 'lt'}": value})
    if value is None:
        return Q(pk__in=[]) if later else Q(**{f"{key.field}__isnull": False})
    beyond = Q(**{f"{key.field}__{'gt' if later else 'lt'}": value})
    return beyond | Q(**{f"{key.field}__isnull": True}) if later else beyond


def _order(sort: QueueSort, *, backwards: bool) -> list[OrderBy]:
    order = []
    for key in sort.keys:
        descending = key.descending != backwards
        column = F(key.field)
        if key.nullable:
            # NULL is the greatest value: last ascending, first descending.
            order.append(
                column.desc(nulls_first=True) if descending else column.asc(nulls_last=True)
            )
        else:
            order.append(column.desc() if descending else column.asc())
    return order


def _sort_cursor(name: str, sort: QueueSort, row) -> str:
    values = (getattr(row, key.field) for key in sort.keys)
    return encode_cursor(name, *("" if value is None else value for value in values))


def _sort_values(name: str, sort: QueueSort, cursor: str) -> list[object]:
    parts = decode_cursor(cursor, len(sort.keys) + 1)
    if parts[0] != name:
        raise InvalidInput("cursor_invalid", "The cursor is for another order.", "cursor")
    return [
        None if key.nullable and raw == "" else key.parse(raw)
        for key, raw in zip(sort.keys, parts[1:], strict=True)
    ]


def sorted_queue_page(
    qs: QuerySet[QueueRow],
    *,
    sort: str = DEFAULT_SORT,
    after: str | None = None,
    before: str | None = None,
    limit: int = DEFAULT_PAGE,
) -> Page:
    """One page of ``qs`` in the order ``QUEUE_SORTS[sort]``, after the cursor ``after`` or
    before the cursor ``before`` (previous page), with ``next_cursor`` and ``prev_cursor``. A
    cursor of another order or not from here is ``InvalidInput`` naming ``cursor``."""
    if sort not in QUEUE_SORTS:
        raise InvalidInput("sort_invalid", f"Unknown sort {sort!r}.", "sort")
    order = QUEUE_SORTS[sort]
    backwards = bool(before) and not after
    cursor = before if backwards else after
    if cursor:
        qs = qs.filter(_beyond(order, _sort_values(sort, order, cursor), backwards=backwards))
    rows = list(qs.order_by(*_order(order, backwards=backwards))[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    if backwards:
        rows.reverse()
    # Going forwards, rows before the cursor exist (we came from them); going back, the page we
    # came from is after this one. Either may have been decided meanwhile: the page is then empty.
    has_next, has_prev = (True, more) if backwards else (more, bool(cursor))
    next_cursor = _sort_cursor(sort, order, rows[-1]) if rows and has_next else None
    prev_cursor = _sort_cursor(sort, order, rows[0]) if rows and has_prev else None
    for draft in rows:
        draft.current = _listed_version(draft)
    return Page(rows, next_cursor, limit, {"prev_cursor": prev_cursor})


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
    if newest_first:
        if cursor:
            qs = qs.filter(id__lt=_id_in(decode_cursor(cursor, 1)[0]))
        rows = list(qs.order_by("-id")[: limit + 1])
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
        next_cursor = (
            encode_cursor(last.pk) if newest_first else encode_cursor(last.created_at, last.pk)
        )
    for draft in rows:
        draft.current = _listed_version(draft)
    return Page(rows, next_cursor, limit, extra)


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
