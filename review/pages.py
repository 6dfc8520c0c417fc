"""What each review page shows, for the person looking: the reads of intents.selectors and
review.queries put together with that person's rights, so that a view only reads the request,
calls one of these and renders."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.text import get_text_list
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from common.text import invisible_shown
from config.clock import db_now
from intents import selectors
from intents.content_marks import current_content_marks, marks_of
from intents.html_hidden_words import HiddenWords, hidden_words
from intents.html_links import html_links
from intents.html_styles import (
    READER_LOOKS,
    conditional_comments,
    css_added_text,
    html_words,
    reader_looks,
    remote_images,
    style_warnings,
)
from intents.models import Draft, DraftAttachment, DraftVersion, SendIntent
from intents.policy import (
    ANSWERED_MESSAGE_GONE_REASON,
    EARLIER_VERSION_REASON,
    NOTE_WRITERS,
    SECOND_APPROVER_REASON,
    answered_author_left_out,
    answered_message_gone,
    approvable_mailbox_ids,
    approver_memberships,
    can_approve,
    domains_named,
    files_of_others,
    invisible_in_content,
    lookalike_hosts_in_content,
    lookalike_recipients,
    may_decide,
    mixed_thread_domains,
    needs_another_approver,
    sender_address,
)
from intents.selectors.drafts import (
    drafts_answered_elsewhere,
    html_unchanged_since,
    html_unchanged_while_text_changed,
    other_replies_to_its_message,
    wrote_a_version_since_last_approval,
)
from intents.selectors.presence import present_on_drafts
from intents.selectors.queue import QueueFilter
from review import journal_words, queries
from review.diff import VersionDiff, version_diff
from review.queries import QueuePage, Recipient
from tenants.models import Membership, Tenant, User
from webhooks.selectors import (
    customer_messages_after_draft,
    inbound_for_thread,
    inbound_messages,
    senders_by_thread,
    senders_of_messages,
    thread_senders,
)

# What the draft page calls the fields of a version when it names what one of them holds.
CONTENT_FIELDS = {
    "subject": gettext_lazy("Subject"),
    "text": gettext_lazy("Text"),
    "html": gettext_lazy("HTML"),
}

# --- queue ---------------------------------------------------------------------------------------


def queue(
    *,
    tenant: Tenant,
    membership: Membership,
    user: User | None,
    f: QueueFilter,
    after: str,
    before: str = "",
    sort: str = "oldest",
) -> QueuePage:
    """One page of the queue, each row marked with what this person may do with it."""
    page = queries.queue_page(tenant=tenant, f=f, after=after, before=before, sort=sort)
    allowed = approvable_mailbox_ids(membership)
    # Two queries for the whole page: the senders of each row's thread, and the author of the
    # message each row answers (the rules the approval from this list asks, intents.policy).
    senders = senders_by_thread(
        tenant=tenant, threads=[(d.mailbox_id, d.thread_id) for d in page.rows]
    )
    authors = senders_of_messages(
        tenant=tenant, messages=[(d.mailbox_id, d.in_reply_to) for d in page.rows]
    )
    # One query for the whole page: the rows whose customer message another approved draft's
    # reply answered (draft_approve leaves them to the draft's page).
    answered_elsewhere = drafts_answered_elsewhere(
        tenant=tenant, draft_ids=[d.pk for d in page.rows if d.in_reply_to]
    )
    # One query for the whole page: who else has each row's draft open.
    present = present_on_drafts(
        tenant=tenant, draft_ids=[d.pk for d in page.rows], exclude_user=user
    )
    # One query for the whole page, with four-eyes on edit: the rows of which this person wrote
    # an earlier version since the last approval (an agent's or a colleague's version on top of
    # their edit), which draft_approve refuses them as it refuses their current version.
    for draft in page.rows:
        draft.can_decide = may_decide(allowed, draft.mailbox_id)
    wrote_current, wrote_earlier = queries.four_eyes_blocked(
        tenant=tenant, rows=[d for d in page.rows if d.can_decide], user=user
    )
    for draft in page.rows:
        draft.present = present.get(draft.pk, [])
        # Not offered for bulk approve: the service would refuse it (four-eyes on edit). Each
        # case has its badge: their current version, or an earlier one since the last approval.
        draft.wrote_earlier_version = draft.pk in wrote_earlier
        draft.approve_blocked = draft.pk in wrote_current or draft.wrote_earlier_version
        recipients = [*(draft.cur_to or []), *(draft.cur_cc or []), *(draft.cur_bcc or [])]
        draft.more_recipients = len(recipients) - 1
        # Left out of bulk approve (draft_approve refuses it from a list): only the draft's page
        # names the letters that make an address look like another.
        draft.lookalikes = lookalike_recipients(recipients)
        draft.thread_domains = domains_named(
            mixed_thread_domains(senders.get((draft.mailbox_id, draft.thread_id), []))
        )
        author = authors.get((draft.mailbox_id, draft.in_reply_to), "")
        draft.author_left_out = (
            sender_address(author) if answered_author_left_out(recipients, author) else ""
        )
        draft.answered_elsewhere = draft.pk in answered_elsewhere
    _mark_what_readers_see_otherwise(tenant, page.rows)
    return page


def _mark_what_readers_see_otherwise(tenant: Tenant, rows: list) -> None:
    """Mark each row whose content another reader sees otherwise (reader looks, hidden text,
    misleading links, invisible characters, look-alike domains, a text changed under an HTML
    left as it was): draft_approve leaves such a draft to its page, which names each. For the
    rows offered for bulk approve, their versions' marks (``intents.content_marks``: kept per
    content, so only versions not seen before are read, up to a megabyte each) and one query
    for those whose text changed under an HTML left as it was (their digests, no body read);
    a row not offered is marked by its subject alone."""
    offered = [d for d in rows if d.can_decide and not d.approve_blocked]
    marks = current_content_marks(tenant=tenant, draft_ids=[d.pk for d in offered])
    unchanged = html_unchanged_since(
        tenant=tenant, draft_ids=[d.pk for d in offered if d.current_version > 1]
    )
    for draft in rows:
        mark = marks.get(draft.pk) or marks_of(subject=draft.cur_subject or "", text="", html="")
        draft.lookalike_hosts = mark.lookalike_hosts
        draft.misleading_links = mark.misleading_links
        draft.invisible_characters = mark.invisible_characters
        draft.reader_looks = get_text_list(
            [str(READER_LOOKS[look]) for look in mark.reader_looks], _("and")
        )
        # Named apart: most HTML with a phone's @media rule looks otherwise to some readers,
        # and hidden words must not read as that in a list of such rows.
        draft.hidden_words = "hidden_text" in mark.reader_looks
        draft.html_unchanged_since = unchanged.get(draft.pk)


# --- draft page ----------------------------------------------------------------------------------


@dataclass
class ReviewFile:
    """A file of the version the page shows, with the customer's message it was forwarded from
    (none for an uploaded one): that message's time when it is still recorded, and whether its
    author is left out of the reply's recipients (``intents.policy.files_of_others``)."""

    file: DraftAttachment
    source_at: datetime | None = None
    source_left_out: bool = False


@dataclass
class DraftReview:
    """The draft page's context (its field names are the template's variables)."""

    draft: Draft
    detail: selectors.DraftDetail
    current: DraftVersion
    first: DraftVersion
    recipients: list[Recipient]
    warning_count: int
    # Which kinds of warning the recipients to check hold: the box beside the Approve button
    # says which are refused and which are only to check.
    any_refused: bool
    any_only_to_check: bool
    inbound: list
    newer_inbound: list
    # The ids of the customer's messages this page shows, carried by the approve form: a newer
    # one it did not show refuses the approval (draft_approve's messages_seen).
    messages_seen: str
    diff: VersionDiff | None
    can_decide: bool
    approve_blocked_reason: str
    provenance: dict
    # The message the reply answers was in an inbox deleted at AgentMail (answered_message_gone).
    answered_gone: bool = False
    unproven_earlier: list[SendIntent] = field(default_factory=list)
    files: list[ReviewFile] = field(default_factory=list)
    # Whose conversation the reply carries (intents.policy, the rules a list's approval asks):
    # the answered message's author when no recipient is them, and the thread's organisations
    # (address domains) when they are more than one.
    author_left_out: str = ""
    thread_domains: str = ""
    # The other pending or approved drafts answering the same customer message, oldest first
    # (each with its ``latest_intent``): the thread shows the customer's messages, not replies.
    answered_elsewhere: list[Draft] = field(default_factory=list)
    # Whole seconds left to undo the approval (0: nothing to undo), and whether this person may.
    undo_seconds: int = 0
    can_undo: bool = False
    # The journal and the notes in one time line, oldest first: (kind, row), kind "event"/"note".
    timeline: list[tuple[str, object]] = field(default_factory=list)
    can_note: bool = False
    # Ownership: whom this person may hand the draft to, and whether they may release it.
    hand_to: list = field(default_factory=list)
    may_pass_on: bool = False
    # The HTML body declares fonts of its own (style_warnings): the page says so beside the body.
    body_fonts: bool = False
    # It loads a stylesheet from elsewhere (style_warnings): said beside the body too.
    body_remote_styles: bool = False
    # It shows images from elsewhere (remote_images), which the frame does not load.
    body_remote_images: bool = False
    # Its CSS shows it otherwise to some readers (reader_looks): (code, words), said beside the
    # body and before Approve.
    body_looks: list[tuple[str, str]] = field(default_factory=list)
    body_looks_named: str = ""
    # The version since which the HTML stayed as it is while the text changed, or None: most
    # mail clients show the HTML, so the page says so beside both bodies and before Approve.
    html_unchanged_since: int | None = None
    # The source of Outlook's conditional comments, which the frame cannot show.
    body_conditionals: list[str] = field(default_factory=list)
    # Every word of the HTML when its styles hide or add text (html_words), and each CSS
    # ``content`` declaration, which the frame shows and clients without pseudo-elements do not.
    body_words: str = ""
    # Of them, the words it hides (hidden_words), and whether those are all it hides.
    body_hidden_words: list[str] = field(default_factory=list)
    body_hidden_complete: bool = True
    # Each link of the HTML with where it leads (html_links), and whether one of them shows one
    # address and leads to another, or runs or carries something: said before Approve too.
    body_links: list = field(default_factory=list)
    body_misleading_links: bool = False
    # The characters nobody sees in the subject and bodies (invisible_in_content): (field, its
    # name, the characters named); and the subject with them written as code points.
    content_invisible: list[tuple[str, str, str]] = field(default_factory=list)
    # The domains in the subject and bodies that may read as another (lookalike_hosts_in_
    # content): (field, its name, the names); said before Approve too.
    content_lookalike_hosts: list[tuple[str, str, list]] = field(default_factory=list)
    subject_invisible_shown: str = ""
    body_css_added: list[str] = field(default_factory=list)


def timeline(detail: selectors.DraftDetail) -> list[tuple[str, object]]:
    """Journal rows and notes interleaved by the database time they were written. A note's own
    journal row (draft.note_added) is shown as the note itself, not twice."""
    rows: list[tuple[datetime, int, int, str, object]] = [
        (e.created_at, 0, e.pk, "event", e) for e in detail.events if e.action != "draft.note_added"
    ]
    rows += [(n.created_at, 1, n.pk, "note", n) for n in detail.notes]
    rows.sort(key=lambda r: r[:3])
    return [(kind, row) for *_, kind, row in rows]


def undo_seconds_left(intent: SendIntent | None, now: datetime) -> int:
    """Whole seconds (rounded up, database clock) left in the send's undo window; 0 when it
    cannot be undone. Display only: intent_undo decides again under the row lock."""
    if (
        intent is None
        or intent.state != SendIntent.State.QUEUED
        or intent.hold_until is None
        or intent.attempts
    ):
        return 0
    return max(0, math.ceil((intent.hold_until - now).total_seconds()))


def _recipients(
    *, tenant: Tenant, detail: selectors.DraftDetail, senders: list[str]
) -> list[Recipient]:
    first, current = detail.versions[0], detail.current
    recipients = queries.recipients_with_warnings(
        tenant=tenant, draft=detail.draft, version=current, senders=senders
    )
    added = queries.added_recipients(first, current)
    for r in recipients:
        if r.address in added:
            r.notes.append(("added", _("Added after the agent's first version")))
    return recipients


def _unproven_earlier(detail: selectors.DraftDetail) -> list[SendIntent]:
    """Earlier sends of a pending draft that may have gone out: the reviewer is warned."""
    return [
        i
        for i in ([detail.intent] if detail.intent else []) + detail.earlier_intents
        if i.state == SendIntent.State.NEEDS_ATTENTION
        or (i.pk in detail.unproven_intent_ids and i.state != SendIntent.State.ACCEPTED)
    ]


def draft_review(
    *, tenant: Tenant, membership: Membership, user: User | None, draft_id: int
) -> DraftReview:
    """Raises intents.errors.NotFound for another tenant's draft as for a missing one."""
    detail = selectors.draft_detail(tenant=tenant, draft_id=draft_id)
    draft, current = detail.draft, detail.current
    # What the approval will ask the page to have shown (draft_approve): marked new, and shown
    # even when ten newer messages (or a Date weeks back) put it beyond the thread's newest.
    after_draft = customer_messages_after_draft(tenant=tenant, draft=draft)
    # Oldest first, as a conversation reads.
    inbound = inbound_for_thread(
        tenant=tenant,
        mailbox=draft.mailbox_id,
        thread_id=draft.thread_id,
        limit=10,
        also=after_draft,
        answering=draft.in_reply_to,
    )[::-1]
    anchor = next((m for m in inbound if m.message_id == draft.in_reply_to), None)
    since = anchor.received_at if anchor else draft.created_at
    first = detail.versions[0]
    pending = draft.status == Draft.Status.PENDING
    can_decide = pending and can_approve(membership=membership, mailbox=draft.mailbox)
    # The inbox that held the answered message was deleted at AgentMail: the reply cannot go
    # out in its thread, and draft_approve refuses it.
    answered_gone = bool(draft.in_reply_to) and answered_message_gone(draft.mailbox, anchor)
    approve_blocked_reason = (
        _approve_blocked_reason(tenant, draft, current, user, answered_gone=answered_gone)
        if can_decide
        else ""
    )
    # Every sender of the thread, as the queue's flag and the approval from a list read it: the
    # ten messages the page shows left a stranger unflagged once the thread passed ten.
    senders = thread_senders(tenant=tenant, mailbox=draft.mailbox_id, thread_id=draft.thread_id)
    recipients = _recipients(tenant=tenant, detail=detail, senders=senders)
    undo_seconds = (
        undo_seconds_left(detail.intent, db_now()) if draft.status == Draft.Status.APPROVED else 0
    )
    return DraftReview(
        draft=draft,
        detail=detail,
        current=current,
        first=first,
        recipients=recipients,
        warning_count=sum(1 for r in recipients if r.warnings),
        any_refused=any(w.refused for r in recipients for w in r.warnings),
        any_only_to_check=any(not w.refused for r in recipients for w in r.warnings),
        inbound=inbound,
        newer_inbound=[
            m for m in inbound if (m.received_at > since or m.pk in after_draft) and m is not anchor
        ],
        messages_seen=",".join(str(m.pk) for m in inbound),
        diff=version_diff(first, current) if len(detail.versions) > 1 else None,
        can_decide=can_decide,
        approve_blocked_reason=approve_blocked_reason,
        answered_gone=answered_gone,
        provenance=draft.provenance if isinstance(draft.provenance, dict) else {},
        unproven_earlier=_unproven_earlier(detail) if pending else [],
        **_conversation(tenant=tenant, draft=draft, current=current, senders=senders),
        answered_elsewhere=other_replies_to_its_message(tenant=tenant, draft=draft),
        undo_seconds=undo_seconds,
        can_undo=bool(undo_seconds) and can_approve(membership=membership, mailbox=draft.mailbox),
        timeline=timeline(detail),
        # Notes went with the bodies at the retention purge; a new one would be refused.
        can_note=membership.role in NOTE_WRITERS and current.body_purged_at is None,
        **_ownership(draft, membership, can_decide),
        **_body_warnings(tenant, draft, current),
    )


def _approve_blocked_reason(
    tenant: Tenant, draft: Draft, current: DraftVersion, user: User | None, *, answered_gone: bool
) -> str:
    """Why Approve is not offered to one who may decide, as draft_approve would refuse it; ""."""
    if answered_gone:
        return str(ANSWERED_MESSAGE_GONE_REASON)
    if needs_another_approver(
        tenant=tenant,
        author_kind=current.author_kind,
        author_user_id=current.author_user_id,
        user=user,
    ):
        return str(SECOND_APPROVER_REASON)
    if tenant.second_approver_on_edit and wrote_a_version_since_last_approval(draft, user):
        # An earlier version of theirs, since the last approval: draft_approve refuses it too,
        # and the button offered what the click then refused.
        return str(EARLIER_VERSION_REASON)
    return ""


def invisible_named(*, subject: str, text: str, html: str) -> dict:
    """What a page of a message to approve (a draft's, a broadcast's) says of the characters
    nobody sees in it (``invisible_in_content``): ``content_invisible``, (field, its name, the
    characters named) for each field holding some; ``subject_invisible_shown``, the subject
    with them as code points when it holds some."""
    invisible = invisible_in_content(subject=subject, text=text, html=html)
    return {
        "content_invisible": [
            (where, str(CONTENT_FIELDS[where]), named) for where, named in invisible.items()
        ],
        "subject_invisible_shown": invisible_shown(subject) if "subject" in invisible else "",
    }


def lookalike_hosts_named(*, subject: str, text: str, html: str) -> dict:
    """What a page of a message to approve (a draft's, a broadcast's) says of the domains it
    names that may read as another (``lookalike_hosts_in_content``):
    ``content_lookalike_hosts``, (field, its name, the names) for each field naming some."""
    return {
        "content_lookalike_hosts": [
            (where, str(CONTENT_FIELDS[where]), hosts)
            for where, hosts in lookalike_hosts_in_content(
                subject=subject, text=text, html=html
            ).items()
        ]
    }


def links_named(html: str) -> dict:
    """What a page of a message to approve (a draft's, a broadcast's) says of the links of its
    HTML (``html_links``): ``body_links``, each with where it leads; ``body_misleading_links``,
    whether one shows one address and leads to another, or runs or carries something."""
    links = html_links(html)
    return {
        "body_links": links,
        "body_misleading_links": any(link.misleading for link in links),
    }


def styles_named(html: str) -> dict:
    """What a page that frames a message's HTML (a draft's, a broadcast's) says the frame does
    not apply: its own fonts, styles and images from elsewhere (review/_frame_notes.html)."""
    body_fonts, body_remote_styles = style_warnings(html)
    return {
        "body_fonts": body_fonts,
        "body_remote_styles": body_remote_styles,
        "body_remote_images": remote_images(html),
    }


def _body_warnings(tenant: Tenant, draft: Draft, current: DraftVersion) -> dict:
    """What the page says beside the HTML body: fonts and styles from elsewhere, remote
    images, an HTML left as it was under a changed text, and its looks to other readers."""
    return {
        **invisible_named(subject=current.subject, text=current.text, html=current.html),
        **lookalike_hosts_named(subject=current.subject, text=current.text, html=current.html),
        **links_named(current.html),
        **styles_named(current.html),
        "html_unchanged_since": html_unchanged_while_text_changed(tenant=tenant, draft_id=draft.pk),
        **looks_named(current.html),
    }


def looks_named(body: str) -> dict:
    """What a page of a message to approve (a draft's, a broadcast's) says of the readers its
    HTML's own styles show it otherwise to (``reader_looks``), with the source of Outlook's
    conditional comments, and every word of it when its styles hide or add text."""
    looks = [(look, str(READER_LOOKS[look])) for look in reader_looks(body)]
    # Located only here, where the page names hidden text: the bulk approval reads
    # reader_looks of every draft and never this.
    hidden = hidden_words(body) if "hidden_text" in dict(looks) else HiddenWords([], True)
    return {
        "body_looks": looks,
        "body_looks_named": get_text_list([words for _look, words in looks], _("and")),
        "body_conditionals": conditional_comments(body),
        # What its styles hide from the frame and what they add, as text.
        "body_words": html_words(body) if "hidden_text" in dict(looks) else "",
        "body_hidden_words": hidden.words,
        "body_hidden_complete": hidden.complete,
        "body_css_added": css_added_text(body),
    }


def _conversation(
    *, tenant: Tenant, draft: Draft, current: DraftVersion, senders: list[str]
) -> dict:
    """Whose conversation the reply carries: its files with their sources, the author of the
    answered message if the reply leaves them out, the thread's organisations if several. One
    query (the answered message and the files' sources) beside the thread's senders."""
    attached = list(current.attachments.all())
    addresses = current.all_recipients
    messages = inbound_messages(
        tenant=tenant,
        mailbox=draft.mailbox_id,
        message_ids={draft.in_reply_to, *(f.source_message_id for f in attached)},
    )
    answered = messages.get(draft.in_reply_to)
    author = answered.sender if answered is not None else ""
    domains = mixed_thread_domains(senders)
    files = []
    for f in attached:
        source = messages.get(f.source_message_id)
        files.append(
            ReviewFile(
                file=f,
                source_at=source.received_at if source is not None else None,
                source_left_out=bool(files_of_others([(f.filename, f.source_sender)], addresses)),
            )
        )
    return {
        "files": files,
        "author_left_out": (
            sender_address(author) if answered_author_left_out(addresses, author) else ""
        ),
        "thread_domains": domains_named(domains) if domains else "",
    }


def edit_aside(*, tenant: Tenant, draft: Draft) -> dict:
    """What the editor keeps beside the form: the customer's message the draft answers (or the
    thread's latest when the draft names none), and the rest of the thread, oldest first."""
    inbound = inbound_for_thread(
        tenant=tenant,
        mailbox=draft.mailbox_id,
        thread_id=draft.thread_id,
        limit=10,
        answering=draft.in_reply_to,
    )[::-1]
    answered = next((m for m in inbound if m.message_id == draft.in_reply_to), None)
    return {
        "answered": answered or (inbound[-1] if inbound else None),
        "answered_exactly": answered is not None,
        "thread_others": [m for m in inbound if m is not (answered or inbound[-1])],
    }


def _ownership(draft: Draft, membership: Membership, can_decide: bool) -> dict:
    """Whether this person may pass the draft on (its holder, or an admin), and to whom: the
    members who may review its mailbox now, but its current holder."""
    may_pass_on = can_decide and (draft.assignee_id == membership.user_id or membership.is_admin)
    if not may_pass_on:
        return {"hand_to": [], "may_pass_on": False}
    # Memberships, not users: the list says who is away (marked away, they would not see it).
    colleagues = [
        m for m in approver_memberships(mailbox=draft.mailbox) if m.user_id != draft.assignee_id
    ]
    return {"hand_to": colleagues, "may_pass_on": True}


# --- send page -----------------------------------------------------------------------------------

# Delivery webhooks usually arrive within seconds of acceptance; past this, a page left open stops
# polling for ones that may never come (a reload still shows them).
DELIVERY_WATCH = timedelta(minutes=30)
SETTLED_DELIVERY = frozenset({"delivered", "bounced", "complained", "rejected"})


def send_page_live(intent: SendIntent, deliveries) -> bool:
    """Whether the send page keeps refreshing its status: while a worker may still act, and after
    acceptance until every recipient has a settled delivery state. Stopping at acceptance (the
    first webhook can land a moment after the worker commits) left "delivered" unseen."""
    if intent.state in ("queued", "sending", "uncertain"):
        return True
    if intent.state != SendIntent.State.ACCEPTED:
        return False
    settled = {d.address for d in deliveries if d.state in SETTLED_DELIVERY}
    recipients = {a for addresses in intent.recipients.values() for a in addresses}
    return not recipients <= settled and timezone.now() - intent.updated_at < DELIVERY_WATCH


def held_for_messages(*, tenant: Tenant, intent: SendIntent) -> list:
    """The customer's messages a held send's release asks its page to have shown (those
    ``intent_release`` checks: written in the thread after the draft), oldest first, as a
    conversation reads; none for a send that is not held."""
    draft = intent.draft
    if intent.state != SendIntent.State.QUEUED or not intent.held_reason or draft is None:
        return []
    after_draft = customer_messages_after_draft(tenant=tenant, draft=draft)
    # No newest beyond them (limit=0): those, and only those, are what the release is about.
    return inbound_for_thread(
        tenant=tenant,
        mailbox=draft.mailbox_id,
        thread_id=draft.thread_id,
        limit=0,
        also=after_draft,
    )[::-1]


def send_page(*, tenant: Tenant, membership: Membership, intent: SendIntent) -> dict:
    """The send page's context: the send, its attempts, journal and deliveries, what this
    person may do with it, and for a held send the customer's messages that held it (their ids
    carried by the release form: intent_release's messages_seen)."""
    deliveries = queries.intent_deliveries(tenant=tenant, intent=intent)
    can_decide = can_approve(membership=membership, mailbox=intent.mailbox)
    held_for = held_for_messages(tenant=tenant, intent=intent)
    events = selectors.intent_events(tenant=tenant, intent_id=intent.pk)
    return {
        "intent": intent,
        "version": intent.draft_version,
        "attempts": selectors.intent_attempts(tenant=tenant, intent_id=intent.pk),
        "events": events,
        "resolution": journal_words.resolution_words(intent, events),
        "deliveries": deliveries,
        "unapproved_recipients": journal_words.unapproved_recipients(events),
        "can_decide": can_decide,
        "live": send_page_live(intent, deliveries),
        "can_reopen": can_decide and selectors.intent_reopenable(intent),
        "may_have_gone_out": bool(
            selectors.intents_that_may_have_gone_out(tenant=tenant, intent_ids=[intent.pk])
        ),
        "undo_seconds": undo_seconds_left(intent, db_now()),
        "held_for": held_for,
        "messages_seen": ",".join(str(m.pk) for m in held_for),
    }


def outbox_marks(*, membership: Membership, intents: list[SendIntent]) -> None:
    """Mark each outbox row with the seconds left to undo it, for this person (0: no undo)."""
    allowed = approvable_mailbox_ids(membership)
    now = db_now()
    for intent in intents:
        left = undo_seconds_left(intent, now)
        intent.undo_seconds = left if may_decide(allowed, intent.mailbox_id) else 0


# --- needs attention -----------------------------------------------------------------------------


def attention(
    *, tenant: Tenant, membership: Membership, state: str
) -> tuple[list[SendIntent], dict[str, int]]:
    """The sends a person should look at, each marked with what this person may do, and the
    count per tab."""
    intents = queries.attention_intents(tenant=tenant, state=state)
    allowed = approvable_mailbox_ids(membership)
    unproven = selectors.intents_that_may_have_gone_out(
        tenant=tenant, intent_ids=[i.pk for i in intents]
    )
    for intent in intents:
        intent.can_decide = may_decide(allowed, intent.mailbox_id)
        intent.can_reopen = intent.can_decide and selectors.intent_reopenable(intent)
        intent.may_have_gone_out = intent.pk in unproven
    return intents, queries.attention_counts(tenant=tenant)
