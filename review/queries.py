"""Reads for the review pages that the general selectors do not cover: the filtered queue with its
warning flag, recipient warnings, thread context, the outbox's deliveries and the needs-attention
list (the word-level diff is in review.diff).

Every query is tenant-scoped, and each page issues a fixed number of queries whatever the number
of rows: the current version is joined (FilteredRelation), the warning flag is one correlated
EXISTS, and per-page lookups are batched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from django.db.models import (
    BooleanField,
    Count,
    Field,
    Model,
    Prefetch,
    Q,
    QuerySet,
)
from django.db.models.expressions import RawSQL
from django.utils.translation import gettext as _

from common.addresses import letters_beyond_ascii
from intents.errors import InvalidInput
from intents.models import Draft, DraftVersion, SendAttempt, SendIntent
from intents.policy import (
    SuppressedAs,
    needs_another_approver,
    normalize_address,
    on_thread,
    recipient_breaks_policy_sql,
    recipient_problems,
    tenant_suppressed,
)
from intents.selectors.drafts import (
    NAV_COUNT_CAP,
    capped_count,
    drafts_they_wrote_since_last_approval,
)
from intents.selectors.intents import current_sends
from intents.selectors.queue import (
    DEFAULT_SORT,
    QUEUE_SORTS,
    QueueFilter,
    queue_drafts,
    sorted_queue_page,
    view_counts,
)
from mailboxes.models import Mailbox
from tenants.models import AgentToken, Membership, Tenant, User
from webhooks.models import InboundMessage, RecipientDelivery
from webhooks.selectors import customer_wrote_after_draft

if TYPE_CHECKING:
    from intents.selectors.queue import QueueRow

QUEUE_PAGE = 50


def _db_column(model: type[Model], name: str) -> str:
    """The column name of a concrete field (a reverse relation has none)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or field.column is None:
        raise TypeError(f"{model.__name__}.{name} is not a concrete field")
    return field.column


def _column(model: type[Model], name: str) -> str:
    return f'"{model._meta.db_table}"."{_db_column(model, name)}"'


def _has_warning_sql(*, lookalikes: bool = False) -> str:
    """True when any recipient of the draft's current version breaks the recipient policy (the
    SQL form in intents.policy) or, when the draft's mailbox has customer messages in its thread,
    is not on the thread (``intents.policy.on_thread``'s rule, with the same comparison; the
    approval from a list asks ``strangers_to_thread``); with ``lookalikes``, also when one holds
    a character outside ASCII (``common.addresses.letters_beyond_ascii``: a code point above
    127; PostgreSQL text holds no NUL). Correlated on the outer draft row, so it filters and
    annotates in the same single query. Names come from the models."""
    draft, version, inbound = Draft._meta.db_table, DraftVersion._meta, InboundMessage._meta
    draft_id, tenant_id = _column(Draft, "id"), _column(Draft, "tenant")
    thread_id = _column(Draft, "thread_id")
    v = {name: _db_column(DraftVersion, name) for name in ("draft", "number", "to", "cc", "bcc")}
    i = {
        name: _db_column(InboundMessage, name)
        for name in ("tenant", "mailbox", "thread_id", "sender")
    }
    same_thread = (
        f"i.{i['tenant']} = {tenant_id} AND i.{i['mailbox']} = {_column(Draft, 'mailbox')} "
        f"AND i.{i['thread_id']} = {thread_id}"
    )
    breaks_policy = recipient_breaks_policy_sql(
        address="r.addr", tenant_id=tenant_id, mailbox_id=_column(Draft, "mailbox")
    )
    beyond_ascii = r"OR r.addr ~ '[^\x01-\x7f]'" if lookalikes else ""
    # Names from the models, no input.
    return f"""
EXISTS (
  SELECT 1
  FROM "{version.db_table}" v
  CROSS JOIN LATERAL unnest(v."{v["to"]}" || v."{v["cc"]}" || v."{v["bcc"]}") AS r(addr)
  WHERE v."{v["draft"]}" = {draft_id}
    AND v."{v["number"]}" = "{draft}"."{Draft._meta.get_field("current_version").column}"
    AND (
      {breaks_policy}
      {beyond_ascii}
      OR (
        {thread_id} <> ''
        AND EXISTS (SELECT 1 FROM "{inbound.db_table}" i WHERE {same_thread})
        AND NOT EXISTS (
          SELECT 1 FROM "{inbound.db_table}" i
          WHERE {same_thread}
            AND (lower(i.{i["sender"]}) = lower(r.addr)
                 OR right(lower(i.{i["sender"]}), length(lower(r.addr)) + 2)
                    = '<' || lower(r.addr) || '>')
        )
      )
    )
)
"""  # noqa: S608


HAS_WARNING_SQL = _has_warning_sql()
TO_CHECK_SQL = _has_warning_sql(lookalikes=True)


# The warning flag of the one queue query (intents.selectors.queue), its "check recipients"
# badge; constant SQL, no input.
HAS_WARNING = RawSQL(HAS_WARNING_SQL, [], output_field=BooleanField())  # noqa: S611
# What its "Recipients to check" filter finds: every draft whose page counts a recipient to
# check (``review.pages``' warning_count), a recipient not in plain ASCII too, which has its own
# badge on the row (``lookalike_recipients``).
TO_CHECK = RawSQL(TO_CHECK_SQL, [], output_field=BooleanField())  # noqa: S611


TOTAL_CAP = 10_000


@dataclass
class QueuePage:
    rows: list[QueueRow]
    total: int
    next_cursor: str | None
    newest_id: int
    total_cap: int
    prev_cursor: str | None = None


def queue_page(
    *,
    tenant: Tenant,
    f: QueueFilter,
    after: str = "",
    before: str = "",
    sort: str = DEFAULT_SORT,
    limit: int = QUEUE_PAGE,
) -> QueuePage:
    """One page in the order ``sort`` (a key of QUEUE_SORTS; another shows the default),
    keyset-paginated both ways: two queries whatever the size. A cursor we did not hand out (an
    edited link, or one of another order) shows the first page. Counting stops at TOTAL_CAP: an
    exact count of a huge queue is a scan that grows with it, and "10,000+" tells a reviewer as
    much."""
    sort = sort if sort in QUEUE_SORTS else DEFAULT_SORT
    qs = queue_drafts(tenant=tenant, f=f, warning=HAS_WARNING, to_check=TO_CHECK)
    total = qs[: TOTAL_CAP + 1].count()
    # The rows only, not the count: "customer wrote again", the rule the approval applies.
    rows = qs.annotate(wrote_again=customer_wrote_after_draft())
    try:
        page = sorted_queue_page(
            rows, sort=sort, after=after or None, before=before or None, limit=limit
        )
    except InvalidInput:
        page = sorted_queue_page(rows, sort=sort, limit=limit)
    return QueuePage(
        rows=page.items,
        total=total,
        next_cursor=page.next_cursor,
        newest_id=0,
        total_cap=TOTAL_CAP,
        prev_cursor=page.extra["prev_cursor"],
    )


def queue_view_counts(*, tenant: Tenant, user_id: int) -> dict[str, int]:
    """The queue's tabs: pending drafts per view, each counted up to TOTAL_CAP."""
    return view_counts(tenant=tenant, viewer=user_id, cap=TOTAL_CAP)


def queue_holders(*, tenant: Tenant, shown: list[int]) -> list[Draft]:
    """The shown drafts' holders now (for the queue's live badges): one query."""
    if not shown:
        return []
    return list(
        Draft.objects.filter(tenant=tenant, pk__in=shown)
        .select_related("assignee")
        .only(
            "pk",
            "mailbox_id",
            "assignee_id",
            "claim_expires_at",
            "assignee__full_name",
            "assignee__email",
        )
    )


def queue_changes(*, tenant: Tenant, since_id: int, shown: list[int]) -> tuple[int, int]:
    """(new pending drafts with an id above since_id, shown drafts no longer pending)."""
    new = Draft.objects.filter(tenant=tenant, status=Draft.Status.PENDING, pk__gt=since_id).count()
    gone = 0
    if shown:
        gone = (
            Draft.objects.filter(tenant=tenant, pk__in=shown)
            .exclude(status=Draft.Status.PENDING)
            .count()
        )
    return new, gone


def newest_draft_id(*, tenant: Tenant) -> int:
    last = Draft.objects.filter(tenant=tenant).order_by("-id").values_list("id", flat=True)[:1]
    return next(iter(last), 0)


def four_eyes_blocked(
    *, tenant: Tenant, rows: list[QueueRow], user: User | None
) -> tuple[set[int], set[int]]:
    """Of queue rows this person may decide, those draft_approve refuses them under four-eyes on
    edit: (the rows whose current version they wrote, the rows of which they wrote an earlier
    version since the last approval). The queue's badges and "Approve & next" ask this; one
    query for all the rows at most."""
    current = {
        d.pk
        for d in rows
        if needs_another_approver(
            tenant=tenant, author_kind=d.cur_author, author_user_id=d.cur_author_user_id, user=user
        )
    }
    earlier = (
        drafts_they_wrote_since_last_approval(
            tenant=tenant, draft_ids=[d.pk for d in rows], user=user
        )
        if tenant.second_approver_on_edit
        else set()
    )
    return current, earlier - current


# How many drafts "Approve & next" looks at for one this person may approve; past them (a queue
# of drafts all of their own), the queue.
NEXT_APPROVABLE_SCAN = 200


def next_pending(
    *,
    tenant: Tenant,
    membership: Membership,
    after: Draft,
    user: User | None = None,
    approvable: bool = False,
) -> Draft | None:
    """The next pending draft after this one (queue order) that this person may decide, wrapping
    around to the queue's start. With ``approvable``, one they may approve now too: of an active
    mailbox (``Mailbox.is_active``, which draft_approve asks) and not refused them by four-eyes
    on edit (``four_eyes_blocked``, the queue's rule); "Approve & next" landed on drafts whose
    Approve was refused."""
    decidable = queue_drafts(
        tenant=tenant,
        mailbox_ids=(
            None
            if membership.approve_all_mailboxes
            else membership.approve_mailboxes.values_list("pk", flat=True)
        ),
    )
    if approvable:
        decidable = decidable.filter(mailbox__status=Mailbox.Status.ACTIVE)
    limit = NEXT_APPROVABLE_SCAN if approvable else 1
    later = Q(created_at__gt=after.created_at) | Q(created_at=after.created_at, id__gt=after.pk)
    found = list(decidable.filter(later).order_by("created_at", "id")[:limit])
    if len(found) < limit:
        # Wrapped around to the queue's start: still only drafts this person may decide (the
        # wrap once dropped the mailbox rule and sent them to a draft without a decision box).
        wrapped = decidable.exclude(later).exclude(pk=after.pk).order_by("created_at", "id")
        found += wrapped[: limit - len(found)]
    if approvable:
        current, earlier = four_eyes_blocked(tenant=tenant, rows=found, user=user)
        found = [d for d in found if d.pk not in current and d.pk not in earlier]
    return found[0] if found else None


# --- recipients ----------------------------------------------------------------------------------


class RecipientWarning(NamedTuple):
    """Something to check about a recipient before approving. ``refused``: the approval is
    refused for it (the recipient rule, intents.policy.recipient_problems); otherwise it is only
    to check on the page (a list's approval leaves such a draft to its page)."""

    code: str
    message: str
    refused: bool


@dataclass
class Recipient:
    kind: str  # to, cc, bcc
    address: str
    warnings: list[RecipientWarning] = field(default_factory=list)  # to check first
    notes: list[tuple[str, str]] = field(default_factory=list)  # (code, message): worth a look

    @property
    def refused(self) -> bool:
        return any(w.refused for w in self.warnings)

    def warn(self, code: str, message: str, *, refused: bool) -> None:
        self.warnings.append(RecipientWarning(code, message, refused))


def _domain(address: str) -> str:
    return address.rpartition("@")[2].lower()


def is_external(address: str, own_domains: list[str]) -> bool:
    """Whether the address is outside the organisation's own domains (or their subdomains). A
    tenant that named none has nothing to be outside of: comparing with the mailbox's domain
    called every customer external (the AgentMail address is never the customer's domain)."""
    if not own_domains:
        return False
    domain = _domain(address)
    return not any(domain == own or domain.endswith("." + own) for own in own_domains)


def recipients_with_warnings(
    *, tenant: Tenant, draft: Draft, version: DraftVersion, senders: list[str]
) -> list[Recipient]:
    """Every recipient of the version, each with what a reviewer should know about it. What
    blocks a send is asked of the recipient rule itself (intents.policy.recipient_problems, as
    the worker asks it before the call); the suppression entries covering them are read once
    (``tenant_suppressed``: an address's own, or its base address's for a sub-address), for
    their reasons.
    ``senders``: of every customer message of the draft's thread (``thread_senders``, as the
    queue's flag and the approval from a list read them), lower-cased."""
    mailbox = draft.mailbox
    addresses = [a.lower() for a in version.all_recipients]
    suppressed = tenant_suppressed(tenant.pk, _normal_forms(addresses))
    problems = {
        (p.address, p.code): p
        for p in recipient_problems(
            tenant=tenant, mailbox=mailbox, addresses=addresses, suppressed=suppressed
        )
    }
    out = []
    for kind in ("to", "cc", "bcc"):
        for address in getattr(version, kind):
            address = address.lower()
            r = Recipient(kind=kind, address=address)
            if (address, "invalid") in problems:
                r.warn("invalid", problems[address, "invalid"].message, refused=True)
            if (address, "suppressed") in problems:
                r.warn("suppressed", _suppressed_warning(address, suppressed), refused=True)
            if (address, "own_mailbox") in problems:
                r.warn(
                    "own_mailbox",
                    _("This mailbox itself: the reply would come back into its inbox"),
                    refused=True,
                )
            if (address, "not_allowed") in problems:
                r.warn("not_allowed", _("Outside this mailbox's recipient policy"), refused=True)
            if senders and not on_thread(address, senders):
                r.warn("not_on_thread", _("Not a participant of this thread"), refused=False)
            # Counted among the recipients to check, as the stranger is: a list's approval
            # leaves both to this page, the only one that names the letters.
            if beyond := letters_beyond_ascii(address):
                r.warn(
                    "non_ascii",
                    _("Not plain ASCII: it holds %(chars)s") % {"chars": beyond},
                    refused=False,
                )
            if is_external(address, tenant.own_domains):
                r.notes.append(
                    ("external", _("Outside your organisation: %(d)s") % {"d": _domain(address)})
                )
            if kind == "bcc":
                r.notes.append(("bcc", _("Blind copy: other recipients will not see it")))
            out.append(r)
    return out


def _normal_forms(addresses: list[str]) -> list[str]:
    out = []
    for address in addresses:
        try:
            out.append(normalize_address(address))
        except ValueError:
            continue  # refused as invalid by the rule itself
    return out


def _suppressed_warning(address: str, suppressed: dict[str, SuppressedAs]) -> str:
    """The badge's words: the entry's reason, and the entry itself when it is the base address
    of this sub-address (the address on the list is not the one on the page)."""
    entry = suppressed[address]
    reason = str(entry.reason_label).lower()
    if entry.address == address:
        return _("Suppressed: %(reason)s") % {"reason": reason}
    return _("Suppressed as %(entry)s: %(reason)s") % {"entry": entry.address, "reason": reason}


def added_recipients(first: DraftVersion, current: DraftVersion) -> set[str]:
    return {a.lower() for a in current.all_recipients} - {a.lower() for a in first.all_recipients}


# --- outbox --------------------------------------------------------------------------------------

ATTENTION_STATES = ("uncertain", "needs_attention", "failed", "blocked")


def attention_intents(*, tenant: Tenant, state: str = "", limit: int = 100) -> list[SendIntent]:
    """Sends a person should look at, with their attempts and deliveries: three queries."""
    qs = current_sends(tenant)
    if state == "held":
        qs = qs.filter(state="queued").exclude(held_reason="")
    elif state in ATTENTION_STATES:
        qs = qs.filter(state=state)
    else:
        qs = qs.filter(_attention_filter())
    return list(
        qs.select_related("mailbox", "draft", "draft_version", "approver", "broadcast")
        .prefetch_related(
            Prefetch("attempts_log", queryset=SendAttempt.objects.order_by("number")),
        )
        .order_by("updated_at", "id")[:limit]
    )


def _attention_filter() -> Q:
    return Q(state__in=ATTENTION_STATES) | (Q(state="queued") & ~Q(held_reason=""))


@dataclass(frozen=True)
class NavCounts:
    """The navigation's live counts; None for a count this build cannot make yet."""

    queue: int
    attention: int
    mine: int
    escalated: int
    cap: int = NAV_COUNT_CAP


def nav_counts(*, tenant: Tenant, user) -> NavCounts:
    """The navigation's capped counts (Queue, Mine, Escalated in one statement, Needs attention
    in another), polled by every open tab: kept cheap on purpose (each reads an index and stops
    at the cap)."""
    views = view_counts(tenant=tenant, viewer=user.pk, cap=NAV_COUNT_CAP)
    return NavCounts(
        queue=views[""],
        attention=capped_count(current_sends(tenant).filter(_attention_filter())),
        mine=views["mine"],
        escalated=views["escalated"],
    )


def attention_counts(*, tenant: Tenant) -> dict[str, int]:
    counts = current_sends(tenant).aggregate(
        uncertain=Count("id", filter=Q(state="uncertain")),
        needs_attention=Count("id", filter=Q(state="needs_attention")),
        failed=Count("id", filter=Q(state="failed")),
        blocked=Count("id", filter=Q(state="blocked")),
        held=Count("id", filter=Q(state="queued") & ~Q(held_reason="")),
    )
    counts["all"] = sum(counts.values())
    return counts


def outbox_deliveries(intents: list[SendIntent]) -> dict[int, list[RecipientDelivery]]:
    by_intent: dict[int, list] = {}
    if not intents:
        return by_intent
    for d in RecipientDelivery.objects.filter(intent__in=[i.pk for i in intents]).order_by(
        "address"
    ):
        by_intent.setdefault(d.intent_id, []).append(d)
    return by_intent


def intent_deliveries(*, tenant: Tenant, intent: SendIntent) -> list[RecipientDelivery]:
    """The per-recipient delivery states of one send, by address."""
    return list(RecipientDelivery.objects.filter(tenant=tenant, intent=intent).order_by("address"))


def review_agents(tenant: Tenant) -> QuerySet[AgentToken]:
    """The tenant's agent tokens for the queue's filter."""
    return AgentToken.objects.filter(tenant=tenant).order_by("name").only("id", "name")


def review_mailboxes(tenant: Tenant) -> QuerySet[Mailbox]:
    """The tenant's mailboxes for the queue's filter."""
    return Mailbox.objects.filter(tenant=tenant).order_by("address").only("id", "address")
