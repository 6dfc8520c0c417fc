"""Reads of drafts: one draft, its full history, counts per status. Always tenant-scoped:
another tenant's row and a missing row raise the same NotFound."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter

from django.db.models import (
    BinaryField,
    BooleanField,
    Exists,
    ExpressionWrapper,
    Func,
    OuterRef,
    Prefetch,
    Q,
)

from intents.errors import NotFound
from intents.models import (
    Draft,
    DraftAttachment,
    DraftNote,
    DraftVersion,
    IntentEvent,
    SendAttempt,
    SendIntent,
)
from intents.selectors.common import as_int
from intents.selectors.intents import UNPROVEN_STATES
from intents.selectors.queue import view_counts


@dataclass
class DraftDetail:
    draft: Draft
    versions: list[DraftVersion]
    current: DraftVersion
    intent: SendIntent | None
    attempts: list[SendAttempt]
    events: list[IntentEvent]
    # Sends of earlier versions (the draft was reopened after they did not go out), newest first,
    # and which of them may have gone out anyway (their outcome was never proven).
    earlier_intents: list[SendIntent] = field(default_factory=list)
    unproven_intent_ids: set[int] = field(default_factory=set)
    # Internal notes between reviewers, oldest first (never sent, never hashed).
    notes: list[DraftNote] = field(default_factory=list)


def draft_get(*, tenant, draft_id) -> Draft:
    draft = (
        Draft.objects.select_related(
            "mailbox", "agent_token", "created_by", "decided_by", "assignee", "escalated_to"
        )
        .filter(tenant=tenant, pk=as_int(draft_id, "draft"))
        .first()
    )
    if draft is None:
        raise NotFound("not_found", "No such draft.")
    return draft


def draft_detail(*, tenant, draft_id) -> DraftDetail:
    """A draft with all its versions, its intent (if approved), the intent's attempts and the
    journal: a fixed number of queries whatever the history length."""
    draft = draft_get(tenant=tenant, draft_id=draft_id)
    versions = list(
        DraftVersion.objects.filter(tenant=tenant, draft=draft)
        .select_related("author_user", "author_token")
        # The files' names, types and sizes; their bytes stay in the blob table.
        .prefetch_related(Prefetch("attachments", queryset=DraftAttachment.objects.all()))
        .order_by("number")
    )
    current = next(v for v in versions if v.number == draft.current_version)
    # Newest first: a reopened draft has one intent per approved version, the latest is current.
    intents = list(
        SendIntent.objects.filter(tenant=tenant, draft=draft)
        .select_related("approver", "resolved_by", "draft_version")
        .order_by("-id")
    )
    intent = intents[0] if intents else None
    attempts = (
        list(SendAttempt.objects.filter(tenant=tenant, intent=intent).order_by("number"))
        if intent
        else []
    )
    # Every journal row of an intent also names its draft. An OR across the join to the intent
    # (intent__draft) defeated both foreign-key indexes: a sequential scan of the tenant's whole
    # journal per draft page (17 ms at 100,000 events, growing). Two plain columns give a
    # BitmapOr of the two indexes (0.3 ms, flat). See BENCHMARKS.md, review UI.
    journal = Q(draft=draft) if intent is None else Q(draft=draft) | Q(intent=intent)
    events = list(
        IntentEvent.objects.filter(tenant=tenant)
        .filter(journal)
        .select_related("actor_user", "actor_token")
        .order_by("created_at", "id")
    )
    unproven = {e.intent_id for e in events if e.intent_id and e.to_state in UNPROVEN_STATES}
    notes = list(
        DraftNote.objects.filter(tenant=tenant, draft=draft)
        .select_related("author")
        .order_by("created_at", "id")
    )
    return DraftDetail(
        draft, versions, current, intent, attempts, events, intents[1:], unproven, notes
    )


def draft_version_get(*, tenant, draft_id, number) -> DraftVersion:
    """One version of a draft by its number. Another tenant's version, a version of another
    draft and a missing one raise the same NotFound."""
    version = DraftVersion.objects.filter(
        tenant=tenant,
        draft__tenant=tenant,
        draft_id=as_int(draft_id, "draft"),
        number=as_int(number, "version"),
    ).first()
    if version is None:
        raise NotFound("not_found", "No such version.")
    return version


def draft_attachment_get(*, tenant, draft_id, attachment_id) -> DraftAttachment:
    """One file of one of the draft's versions, with its blob (bytes). Another tenant's file, a
    file of another draft and a missing one raise the same NotFound."""
    attachment = (
        DraftAttachment.objects.select_related("blob", "version")
        .filter(
            tenant=tenant,
            version__tenant=tenant,
            version__draft_id=as_int(draft_id, "draft"),
            pk=as_int(attachment_id, "attachment"),
        )
        .first()
    )
    if attachment is None:
        raise NotFound("not_found", "No such attachment.")
    return attachment


# --- the navigation's live counts (review.queries.nav_counts) ------------------------------------

NAV_COUNT_CAP = 99


def capped_count(qs, cap: int = NAV_COUNT_CAP) -> int:
    """How many rows, stopping at cap + 1: a badge says "99+", and a count of a huge queue is a
    scan that grows with it."""
    return qs[: cap + 1].count()


def pending_count(*, tenant, cap: int = NAV_COUNT_CAP) -> int:
    """Pending drafts of the tenant, up to cap + 1 (the queue's All view)."""
    return view_counts(tenant=tenant, viewer=None, cap=cap)[""]


def wrote_a_version_since_last_approval(draft: Draft, user) -> bool:
    """Whether ``user`` wrote (as a person) any version of the draft after the last version a
    send was approved for by someone else and not cancelled (all of them if none was): with
    four-eyes on edit, they may not approve it (``draft_approve``), and the draft page says so
    before they try."""
    return draft.pk in drafts_they_wrote_since_last_approval(
        tenant=draft.tenant_id, draft_ids=[draft.pk], user=user
    )


def drafts_they_wrote_since_last_approval(*, tenant, draft_ids, user) -> set[int]:
    """Of ``draft_ids``, those of which ``user`` wrote (as a person) a version after the last
    version a send was approved for (any version if none was): the rule of
    ``wrote_a_version_since_last_approval`` in one query for a whole queue page, which marks
    those rows before bulk approve is refused them."""
    if user is None or not draft_ids:
        return set()
    # No send approved for this version or a later one: it is after the last approval. A send
    # that was cancelled (undone in its window, cancelled or stopped by a person) is an approval
    # taken back: it lets no editor approve alone what its approver withdrew. A send the editor
    # approved themselves (while the rule was off) vouches for nothing: no second person saw
    # the edit, and the rule blocks that very send at its pre-call check. A send approved of
    # this very content (its hash) vouches for it too: a reopen's copy of an approved edit keeps
    # its editor's name but is no new writing of theirs, and counted as one it kept them from
    # approving a colleague's correction of it (in a team of two, nobody could).
    approved_since = (
        SendIntent.objects.filter(draft_id=OuterRef("draft_id"))
        .filter(
            Q(draft_version__number__gte=OuterRef("number"))
            | Q(content_hash=OuterRef("content_hash"))
        )
        .exclude(state=SendIntent.State.CANCELLED)
        .exclude(approver=user)
    )
    return set(
        DraftVersion.objects.filter(
            tenant=tenant,
            draft_id__in=draft_ids,
            author_kind=DraftVersion.Author.PERSON,
            author_user=user,
        )
        .filter(~Exists(approved_since))
        .values_list("draft_id", flat=True)
        .distinct()
    )


class _Digest(Func):
    """SHA-256 of a text column, by PostgreSQL's own sha256() (Django's SHA256 needs the
    pgcrypto extension)."""

    template = "sha256(convert_to(%(expressions)s, 'UTF8'))"
    output_field = BinaryField()


def html_unchanged_while_text_changed(*, tenant, draft_id: int) -> int | None:
    """The version since which the current version's HTML body has stood unchanged while the
    text body changed (a person corrected the text, or the agent revised it, and left the HTML
    as it was), or None: no HTML, or the text is the one written with it.

    Most mail clients show the customer the HTML part of a message that has both, not the text:
    a correction made to the text alone does not reach them."""
    return html_unchanged_since(tenant=tenant, draft_ids=[draft_id]).get(draft_id)


def html_unchanged_since(*, tenant, draft_ids) -> dict[int, int]:
    """``html_unchanged_while_text_changed`` of many drafts in one query: draft id to version,
    for those it names a version for. Compared by digests in the query, so the versions' bodies
    (up to a megabyte each) are not read; SHA-256, not MD5, since an agent writes both bodies and
    could make two texts that collide. The current version is the highest number."""
    rows = (
        DraftVersion.objects.filter(tenant=tenant, draft_id__in=list(draft_ids))
        .annotate(
            text_digest=_Digest("text"),
            html_digest=_Digest("html"),
            no_html=ExpressionWrapper(Q(html=""), output_field=BooleanField()),
        )
        .order_by("draft_id", "-number")
        .values_list("draft_id", "number", "text_digest", "html_digest", "no_html")
    )
    found = {}
    for draft_id, versions in groupby(rows, key=itemgetter(0)):
        since = _html_unchanged_since([row[1:] for row in versions])
        if since is not None:
            found[draft_id] = since
    return found


def _html_unchanged_since(versions: list[tuple]) -> int | None:
    """(number, text digest, HTML digest, no HTML) of one draft's versions, newest first."""
    _number, current_text, current_html, no_html = versions[0]
    if no_html:
        return None
    since = versions[0]
    for version in versions[1:]:
        if version[2] != current_html:
            break
        since = version
    return since[0] if since[1] != current_text else None


# A reply in these states has gone out, may go out, or is in review: another reply to the same
# message is then a second answer to one customer message.
ANSWERING_STATUSES = (Draft.Status.PENDING, Draft.Status.APPROVED)
# Sends that ended without going out: their reply answered nothing.
ENDED_UNSENT = (
    SendIntent.State.CANCELLED,
    SendIntent.State.FAILED,
    SendIntent.State.BLOCKED,
    SendIntent.State.EXPIRED,
)


def other_replies_to_its_message(*, tenant, draft: Draft) -> list[Draft]:
    """The other drafts, pending or approved, that answer the customer's message ``draft``
    answers (in its mailbox), oldest first, each with its latest send (``latest_intent``) or None.

    Two replies to one message (an agent that retried its post with a new Idempotency-Key, two
    agents of the tenant given the same mail) were each approved as the only answer: the thread
    a page shows holds the customer's messages, not the replies sent to them."""
    if not draft.in_reply_to:
        return []
    others = list(
        Draft.objects.filter(
            tenant=tenant,
            mailbox_id=draft.mailbox_id,
            in_reply_to=draft.in_reply_to,
            status__in=ANSWERING_STATUSES,
        )
        .exclude(pk=draft.pk)
        .order_by("created_at", "pk")
    )
    latest: dict[int | None, SendIntent] = {}
    for intent in SendIntent.objects.filter(
        tenant=tenant, draft_id__in=[d.pk for d in others]
    ).order_by("draft_id", "-id"):
        latest.setdefault(intent.draft_id, intent)
    for other in others:
        other.latest_intent = latest.get(other.pk)
    return others


def _answering_sends(*, tenant, mailbox, in_reply_to, draft):
    """The sends of other approved drafts answering this message that went out or may still."""
    return (
        SendIntent.objects.filter(
            tenant=tenant,
            draft__mailbox=mailbox,
            draft__in_reply_to=in_reply_to,
            draft__status=Draft.Status.APPROVED,
        )
        .exclude(state__in=ENDED_UNSENT)
        .exclude(draft=draft)
    )


def drafts_answering_its_message_sent(*, tenant, draft: Draft) -> list[int]:
    """The other approved drafts whose reply to the message ``draft`` answers went out or may
    still (its send did not end unsent), by id."""
    if not draft.in_reply_to:
        return []
    sends = _answering_sends(
        tenant=tenant, mailbox=draft.mailbox_id, in_reply_to=draft.in_reply_to, draft=draft.pk
    )
    return sorted(set(sends.values_list("draft_id", flat=True)))


def drafts_answered_elsewhere(*, tenant, draft_ids) -> set[int]:
    """Which of these drafts answer a customer message that another approved draft's reply
    answered or may still answer (``drafts_answering_its_message_sent``), in one query."""
    answering = _answering_sends(
        tenant=tenant,
        mailbox=OuterRef("mailbox"),
        in_reply_to=OuterRef("in_reply_to"),
        draft=OuterRef("pk"),
    )
    return set(
        Draft.objects.filter(tenant=tenant, pk__in=list(draft_ids))
        .exclude(in_reply_to="")
        .filter(Exists(answering))
        .values_list("pk", flat=True)
    )
