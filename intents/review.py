"""Reads for the review UI that the general selectors do not cover: the filtered queue with its
warning flag, recipient warnings, thread context and the word-level diff.

Every query is tenant-scoped, and each page issues a fixed number of queries whatever the number
of rows: the current version is joined (FilteredRelation), the warning flag is one correlated
EXISTS, and per-page lookups are batched.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from email.utils import parseaddr

from django.db.models import BooleanField, F, Q
from django.db.models.expressions import RawSQL
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from intents.errors import InvalidInput
from intents.models import Draft, DraftVersion, SendIntent, Suppression
from intents.selectors.queue import QueueFilter, draft_queue

QUEUE_PAGE = 50

# True when any recipient of the draft's current version is suppressed, outside the mailbox's
# recipient policy, or (when the thread is known) not among the thread's participants. Correlated
# on the outer draft row, so it filters and annotates in the same single query.
HAS_WARNING_SQL = """
EXISTS (
  SELECT 1
  FROM intents_draftversion v
  JOIN mailboxes_mailbox m ON m.id = intents_draft.mailbox_id
  CROSS JOIN LATERAL unnest(v."to" || v.cc || v.bcc) AS r(addr)
  WHERE v.draft_id = intents_draft.id
    AND v.number = intents_draft.current_version
    AND (
      EXISTS (
        SELECT 1 FROM intents_suppression s
        WHERE s.tenant_id = intents_draft.tenant_id AND s.address = lower(r.addr)
      )
      OR (
        m.policy_mode = 'restricted'
        AND NOT (
          lower(r.addr) = ANY (m.allowed_addresses::text[])
          OR split_part(lower(r.addr), '@', 2) = ANY (m.allowed_domains::text[])
        )
      )
      OR (
        intents_draft.thread_id <> ''
        AND EXISTS (
          SELECT 1 FROM webhooks_inboundmessage i
          WHERE i.tenant_id = intents_draft.tenant_id AND i.thread_id = intents_draft.thread_id
        )
        AND NOT EXISTS (
          SELECT 1 FROM webhooks_inboundmessage i
          WHERE i.tenant_id = intents_draft.tenant_id AND i.thread_id = intents_draft.thread_id
            AND (lower(i.sender) = lower(r.addr) OR lower(i.sender) LIKE '%%<' || lower(r.addr) || '>')
        )
      )
    )
)
"""


# The warning flag of the one queue query (intents.selectors.queue); constant SQL, no input.
HAS_WARNING = RawSQL(HAS_WARNING_SQL, [], output_field=BooleanField())  # noqa: S611

TOTAL_CAP = 10_000


@dataclass
class QueuePage:
    rows: list[Draft]
    total: int
    next_cursor: str | None
    newest_id: int
    total_cap: int


def queue_page(*, tenant, f: QueueFilter, after: str = "", limit: int = QUEUE_PAGE) -> QueuePage:
    """Oldest first, keyset-paginated on (created_at, id): two queries whatever the size. A
    cursor we did not hand out (an edited link) shows the first page."""
    query = {"tenant": tenant, "f": f, "warning": HAS_WARNING, "limit": limit}
    try:
        page = draft_queue(**query, cursor=after or None, count_upto=TOTAL_CAP)
    except InvalidInput:
        page = draft_queue(**query, count_upto=TOTAL_CAP)
    return QueuePage(
        rows=page.items,
        total=page.extra["total"],
        next_cursor=page.next_cursor,
        newest_id=0,
        total_cap=TOTAL_CAP,
    )


def queue_changes(*, tenant, since_id: int, shown: list[int]) -> tuple[int, int]:
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


def newest_draft_id(*, tenant) -> int:
    last = Draft.objects.filter(tenant=tenant).order_by("-id").values_list("id", flat=True)[:1]
    return next(iter(last), 0)


def next_pending(*, tenant, membership, after: Draft) -> Draft | None:
    """The next pending draft after this one (queue order) that this person may decide."""
    qs = Draft.objects.filter(tenant=tenant, status=Draft.Status.PENDING).filter(
        Q(created_at__gt=after.created_at) | Q(created_at=after.created_at, id__gt=after.pk)
    )
    if not membership.approve_all_mailboxes:
        qs = qs.filter(mailbox__in=membership.approve_mailboxes.all())
    found = qs.order_by("created_at", "id").first()
    if found is None:
        found = (
            Draft.objects.filter(tenant=tenant, status=Draft.Status.PENDING)
            .exclude(pk=after.pk)
            .order_by("created_at", "id")
            .first()
        )
    return found


def approvable_mailbox_ids(membership) -> set[int] | None:
    """None means every mailbox; otherwise the ids this member may decide for."""
    if membership.role not in ("admin", "approver"):
        return set()
    if membership.approve_all_mailboxes:
        return None
    return set(membership.approve_mailboxes.values_list("pk", flat=True))


def may_decide(allowed: set[int] | None, mailbox_id: int) -> bool:
    return allowed is None or mailbox_id in allowed


# --- recipients ----------------------------------------------------------------------------------


@dataclass
class Recipient:
    kind: str  # to, cc, bcc
    address: str
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (code, message): blocks a send
    notes: list[tuple[str, str]] = field(default_factory=list)  # (code, message): worth a look


def _domain(address: str) -> str:
    return address.rpartition("@")[2].lower()


def thread_participants(inbound: list) -> set[str]:
    return {parseaddr(m.sender)[1].lower() for m in inbound if parseaddr(m.sender)[1]}


def recipients_with_warnings(*, tenant, draft: Draft, version: DraftVersion, inbound: list):
    """Every recipient of the version, each with what a reviewer should know about it."""
    mailbox = draft.mailbox
    addresses = [a.lower() for a in version.all_recipients]
    suppressed = {
        s.address: s for s in Suppression.objects.filter(tenant=tenant, address__in=addresses)
    }
    participants = thread_participants(inbound)
    out = []
    for kind in ("to", "cc", "bcc"):
        for address in getattr(version, kind):
            address = address.lower()
            r = Recipient(kind=kind, address=address)
            if address in suppressed:
                r.warnings.append(
                    (
                        "suppressed",
                        f"Suppressed: {suppressed[address].get_reason_display().lower()}",
                    )
                )
            if not mailbox.allows_recipient(address):
                r.warnings.append(("not_allowed", "Outside this mailbox's recipient policy"))
            if participants and address not in participants:
                r.warnings.append(("not_on_thread", "Not a participant of this thread"))
            if _domain(address) != _domain(mailbox.address):
                r.notes.append(("external", f"External domain {_domain(address)}"))
            if kind == "bcc":
                r.notes.append(("bcc", "Blind copy: other recipients will not see it"))
            out.append(r)
    return out


def added_recipients(first: DraftVersion, current: DraftVersion) -> set[str]:
    return {a.lower() for a in current.all_recipients} - {a.lower() for a in first.all_recipients}


def inbound_for(*, tenant, draft: Draft, limit: int = 10) -> list:
    from webhooks.models import InboundMessage

    if not draft.thread_id:
        return []
    return list(
        InboundMessage.objects.filter(tenant=tenant, thread_id=draft.thread_id).order_by(
            "-received_at"
        )[:limit]
    )[::-1]


# --- diff ----------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s+|[^\s]+")


def _lf(body: str) -> str:
    return body.replace("\r\n", "\n").replace("\r", "\n")


def word_diff(old: str, new: str) -> SafeString:
    """Word-level diff as escaped HTML with <ins>/<del>; whitespace is kept as written, except
    that CRLF and lone CR compare as LF: versions saved before the draft services normalised line
    endings hold the browser's CRLF, and every line of them would show as changed."""
    a = _TOKEN.findall(_lf(old or ""))
    b = _TOKEN.findall(_lf(new or ""))
    parts: list[str] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            parts.append(escape("".join(a[i1:i2])))
            continue
        if op in ("delete", "replace"):
            parts.append(f"<del>{escape(''.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            parts.append(f"<ins>{escape(''.join(b[j1:j2]))}</ins>")
    return mark_safe("".join(parts))  # noqa: S308 - every piece above is escaped


@dataclass
class VersionDiff:
    base: DraftVersion
    target: DraftVersion
    subject: SafeString
    text: SafeString
    html_changed: bool
    added: list[str]
    removed: list[str]

    @property
    def changed(self) -> bool:
        return self.base.content_hash != self.target.content_hash and (
            self.base.subject != self.target.subject
            or self.base.text != self.target.text
            or self.html_changed
            or bool(self.added or self.removed)
        )


def version_diff(base: DraftVersion, target: DraftVersion) -> VersionDiff:
    def tagged(v):
        return {f"{k}: {a.lower()}" for k in ("to", "cc", "bcc") for a in getattr(v, k)}

    old, new = tagged(base), tagged(target)
    return VersionDiff(
        base=base,
        target=target,
        subject=word_diff(base.subject, target.subject),
        text=word_diff(base.text, target.text),
        html_changed=base.html != target.html,
        added=sorted(new - old),
        removed=sorted(old - new),
    )


# --- outbox --------------------------------------------------------------------------------------

ATTENTION_STATES = ("uncertain", "needs_attention", "failed", "blocked")


def current_sends(tenant):
    """A tenant's intents, without those superseded by a re-approval: once a person reopened the
    draft (a newer version exists), the old send is history, not something left to act on."""
    return SendIntent.objects.filter(
        tenant=tenant, draft_version__number=F("draft__current_version")
    )


def attention_intents(*, tenant, state: str = "", limit: int = 100) -> list[SendIntent]:
    """Sends a person should look at, with their attempts and deliveries: three queries."""
    from django.db.models import Prefetch

    from intents.models import SendAttempt

    qs = current_sends(tenant)
    if state == "held":
        qs = qs.filter(state="queued").exclude(held_reason="")
    elif state in ATTENTION_STATES:
        qs = qs.filter(state=state)
    else:
        qs = qs.filter(Q(state__in=ATTENTION_STATES) | (Q(state="queued") & ~Q(held_reason="")))
    return list(
        qs.select_related("mailbox", "draft", "draft_version", "approver")
        .prefetch_related(
            Prefetch("attempts_log", queryset=SendAttempt.objects.order_by("number")),
        )
        .order_by("updated_at", "id")[:limit]
    )


def attention_counts(*, tenant) -> dict[str, int]:
    from django.db.models import Count

    counts = current_sends(tenant).aggregate(
        uncertain=Count("id", filter=Q(state="uncertain")),
        needs_attention=Count("id", filter=Q(state="needs_attention")),
        failed=Count("id", filter=Q(state="failed")),
        blocked=Count("id", filter=Q(state="blocked")),
        held=Count("id", filter=Q(state="queued") & ~Q(held_reason="")),
    )
    counts["all"] = sum(counts.values())
    return counts


def outbox_deliveries(intents: list[SendIntent]) -> dict[int, list]:
    from webhooks.models import RecipientDelivery

    by_intent: dict[int, list] = {}
    if not intents:
        return by_intent
    for d in RecipientDelivery.objects.filter(intent__in=[i.pk for i in intents]).order_by(
        "address"
    ):
        by_intent.setdefault(d.intent_id, []).append(d)
    return by_intent
