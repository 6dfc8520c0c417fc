"""Drafts and their versions: create, add a version (a draft's end without a send is ``endings``)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from django.db import transaction
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from config.clock import db_now
from intents import errors
from intents.content_marks import keep_marks
from intents.hashing import content_hash as compute_content_hash
from intents.journal import journal
from intents.models import Draft, DraftVersion, IntentEvent
from intents.policy import active_membership, answered_message_gone, can_approve
from intents.services.assignment import auto_assignee
from intents.services.attachments import Planned, attach, hash_entries, planned, planned_uploads
from intents.services.common import (
    active_tenant,
    copied_back_into_review,
    lock_draft,
    require_active_mailbox,
    require_nothing_sent,
    require_pending,
    require_standing,
    tenant_mailbox,
)
from intents.services.content import (
    MAX_PROVENANCE_BYTES,
    MAX_PROVENANCE_DEPTH,
    PRIORITY_RANGE,
    answered_message,
    clean_content,
    draft_reply_subject,
    reply_subject_of,
)
from intents.services.deadlines import deadline_times

log = logging.getLogger("intents.services")


def _check_agent_token(tenant, agent_token) -> None:
    """The token's tenant. Whether it is still live and reaches the mailbox is read in the
    writing transaction (``require_standing``): this token object is of the request's start."""
    if agent_token.tenant_id != tenant.pk:
        raise errors.NoRight(message="This agent token does not belong to the tenant.")


# The API's 404s (``agent_api.queries``) for a token whose restriction no longer reaches the
# mailbox: the live request's answer, and a restricted token learns nothing of others.
def _no_mailbox() -> errors.NotFound:
    return errors.NotFound("mailbox_not_found", "No such mailbox.", field="mailbox")


def no_draft() -> errors.NotFound:
    return errors.NotFound("not_found", "No such draft.")


def _require_active(mailbox) -> None:
    if not mailbox.is_active:
        raise errors.MailboxInactive(
            message=_("%(address)s is not active.") % {"address": mailbox.address}, field="mailbox"
        )


def draft_author(tenant, mailbox, agent_token, actor_user) -> tuple[dict, dict]:
    """(DraftVersion author fields, IntentEvent actor fields), after checking the actor."""
    if (agent_token is None) == (actor_user is None):
        raise errors.InvalidInput("actor_required", "Exactly one of agent or person must act.")
    if agent_token is not None:
        _check_agent_token(tenant, agent_token)
        return (
            {"author_kind": DraftVersion.Author.AGENT, "author_token": agent_token},
            {"actor_kind": IntentEvent.Actor.AGENT, "actor_token": agent_token},
        )
    membership = active_membership(tenant=tenant, user=actor_user)
    if not can_approve(membership=membership, mailbox=mailbox):
        raise errors.NoRight(message=_("You may not write drafts for this mailbox."))
    return (
        {"author_kind": DraftVersion.Author.PERSON, "author_user": actor_user},
        {"actor_kind": IntentEvent.Actor.PERSON, "actor_user": actor_user},
    )


def draft_create(
    *,
    tenant,
    mailbox,
    to,
    cc=(),
    bcc=(),
    subject=None,
    text="",
    html="",
    in_reply_to="",
    thread_id="",
    provenance=None,
    not_after=None,
    priority=0,
    agent_token=None,
    actor_user=None,
    attachments=(),
) -> Draft:
    """A pending draft (version 1) in the review queue, after validating everything it holds.

    ``attachments``: the files (``intents.attachments.Upload``), already fetched or decoded."""
    tenant = active_tenant(tenant)
    mailbox = tenant_mailbox(tenant, mailbox)
    _require_active(mailbox)
    # Refused before its content is judged; asked again in the writing transaction.
    draft_author(tenant, mailbox, agent_token, actor_user)
    in_reply_to, thread_id, reply_subject, customer_at = _reply_reference(
        tenant, mailbox, in_reply_to, thread_id
    )
    content = clean_content(
        tenant=tenant,
        mailbox=mailbox,
        to=to,
        cc=cc,
        bcc=bcc,
        subject=subject,
        text=text,
        html=html,
        reply_subject=reply_subject,
    )
    files = planned_uploads(attachments or ())
    provenance = _clean_provenance(provenance)
    _check_priority(priority)
    _check_not_after(not_after)
    with transaction.atomic():
        require_standing(tenant, agent_token, mailbox_id=mailbox.pk, missing=_no_mailbox())
        now = db_now()
        sla_due_at, sla_warn_at = deadline_times(tenant, mailbox, customer_at or now)
        assignee = auto_assignee(mailbox)
        # After auto_assignee's FOR UPDATE of an auto-assigning mailbox: holding KEY SHARE first,
        # two drafts created at once would each wait for the other's.
        require_active_mailbox(mailbox, field="mailbox")
        # A person's right again, after the last lock waited for: an admin's change committed
        # meanwhile (deactivated, a viewer now, the mailbox's right gone) stops the draft.
        author_fields, actor_fields = draft_author(tenant, mailbox, agent_token, actor_user)
        draft = Draft.objects.create(
            tenant=tenant,
            mailbox=mailbox,
            agent_token=author_fields.get("author_token"),
            created_by=author_fields.get("author_user"),
            thread_id=thread_id,
            in_reply_to=in_reply_to,
            provenance=provenance,
            priority=priority,
            current_version=1,
            review_deadline=now + timedelta(hours=tenant.review_deadline_hours),
            not_after=not_after,
            sla_due_at=sla_due_at,
            sla_warn_at=sla_warn_at,
            assignee=assignee,
            assigned_how=Draft.AssignedHow.AUTO if assignee else "",
            auto_assigned_to=assignee,
        )
        _first_version(tenant, draft, content, files, author_fields, actor_fields)
        if assignee is not None:
            _journal_auto_assigned(tenant, draft, assignee)
    log.info("intents.draft.created", extra={"tenant_id": tenant.pk, "draft_id": draft.pk})
    return draft


# A draft's latest send time may lie this far ahead at most (and an instant past the year 9999
# in UTC, which PostgreSQL cannot store, is far beyond it).
NOT_AFTER_HORIZON = timedelta(days=366)


def _check_not_after(not_after) -> None:
    if not_after is None:
        return
    # The database clock, which the sweep's expiry and approval's refusal read: this host's clock
    # two minutes ahead refused a send-by time a minute away, two minutes behind it accepted one
    # already passed.
    now = db_now()
    if not_after <= now:
        raise errors.InvalidInput(
            "not_after_past", "not_after is already in the past.", "not_after"
        )
    if not_after - now > NOT_AFTER_HORIZON:
        raise errors.InvalidInput(
            "not_after_too_far",
            "not_after may be at most 366 days ahead.",
            "not_after",
        )


def _journal_auto_assigned(tenant, draft: Draft, assignee) -> None:
    journal(
        tenant=tenant,
        draft=draft,
        action="draft.assigned",
        actor_kind=IntentEvent.Actor.SWEEP,
        actor_label="auto-assign",
        from_state=Draft.Status.PENDING,
        to_state=Draft.Status.PENDING,
        data={"holder": assignee.pk, "rule": "round_robin"},
    )


def _reply_reference(tenant, mailbox, in_reply_to, thread_id) -> tuple:
    """(in_reply_to, thread_id, the reply's subject or None for a new message, when the customer's
    message arrived or None), checked."""
    in_reply_to = (in_reply_to or "").strip()
    thread_id = (thread_id or "").strip()
    if len(in_reply_to) > 998 or len(thread_id) > 255:
        raise errors.InvalidInput("reference_too_long", "A message or thread id is too long.")
    if not in_reply_to and thread_id:
        # AgentMail's send route starts a new thread; only its reply route joins one. A new
        # message filed under a thread would show the reviewer that thread's conversation, check
        # its recipients against that thread's customers and be held by its mail, none of which
        # the message is part of.
        raise errors.InvalidInput(
            "thread_id_without_in_reply_to",
            "A new message (no in_reply_to) starts its own thread, so it takes no thread_id; "
            "to answer in a thread, give in_reply_to (the message you answer) instead.",
            "thread_id",
        )
    if not in_reply_to:
        return in_reply_to, thread_id, None, None
    answered = answered_message(
        tenant=tenant, mailbox=mailbox, in_reply_to=in_reply_to, thread_id=thread_id
    )
    if answered_message_gone(mailbox, answered):
        raise errors.InvalidInput(
            "in_reply_to_inbox_lost",
            f"in_reply_to {in_reply_to} was received by the inbox of {mailbox.address} that was "
            "deleted at AgentMail and made again: AgentMail no longer has that message, so a "
            "reply to it cannot be sent. Write the answer as a new message (no in_reply_to).",
            "in_reply_to",
        )
    # The reply joins the answered message's thread: the reviewer sees that conversation.
    return (
        in_reply_to,
        answered.thread_id,
        reply_subject_of(answered),
        answered.received_at,
    )


def _clean_provenance(provenance) -> dict:
    provenance = provenance or {}
    if not isinstance(provenance, dict):
        raise errors.InvalidInput(
            "provenance_invalid", "provenance must be an object.", "provenance"
        )
    if _depth(provenance) > MAX_PROVENANCE_DEPTH:
        # Small but deep nesting fits the size and then fails every reader that renders it.
        raise errors.InvalidInput(
            "provenance_too_deep",
            f"provenance nests more than {MAX_PROVENANCE_DEPTH} levels deep.",
            "provenance",
        )
    if len(json.dumps(provenance, default=str)) > MAX_PROVENANCE_BYTES:
        raise errors.InvalidInput(
            "provenance_too_large",
            f"provenance is larger than {MAX_PROVENANCE_BYTES} bytes.",
            "provenance",
        )
    return provenance


def _depth(value) -> int:
    """How deep objects and arrays nest in ``value`` (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


def _check_priority(priority) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise errors.InvalidInput("priority_invalid", "priority must be an integer.", "priority")
    if not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]:
        raise errors.InvalidInput(
            "priority_invalid",
            f"priority must be between {PRIORITY_RANGE[0]} and {PRIORITY_RANGE[1]}.",
            "priority",
        )


def _first_version(
    tenant, draft: Draft, content: dict, files: list[Planned], author_fields, actor_fields
) -> None:
    version = DraftVersion.objects.create(
        draft=draft,
        tenant=tenant,
        number=1,
        content_hash=compute_content_hash(
            mailbox_id=draft.mailbox_id,
            in_reply_to=draft.in_reply_to,
            attachments=hash_entries(files),
            **content,
        ),
        **content,
        **author_fields,
    )
    attach(tenant, version, files)
    transaction.on_commit(lambda: keep_marks(version), robust=True)
    journal(
        tenant=tenant,
        draft=draft,
        action="draft.created",
        to_state=Draft.Status.PENDING,
        data={"version": 1, "content_hash": version.content_hash, **_files_data(files)},
        **actor_fields,
    )


def _files_data(files: list[Planned]) -> dict:
    """What the journal keeps of a version's files: names, types, sizes, digests (no bytes)."""
    if not files:
        return {}
    return {
        "attachments": [
            {
                "filename": f.filename,
                "content_type": f.content_type,
                "size": f.size,
                "sha256": f.sha256,
            }
            for f in files
        ]
    }


def draft_add_version(
    *,
    tenant,
    draft_id,
    to,
    cc,
    bcc,
    subject,
    text,
    html,
    agent_token=None,
    actor_user=None,
    base_version=None,
    attachments=None,
) -> DraftVersion:
    """Add the next version of a pending draft.

    ``attachments``: the new version's files (``intents.attachments.Upload``; an empty list
    removes them all); None keeps the current version's files as they are (a person's edit).

    ``base_version`` is the version the author started from. It is checked under the draft's
    lock: two people saving on the same version, or a person saving after an agent's revision
    landed, would otherwise both succeed and the later save would silently replace the other.
    Without it (agents that do not send one) the version is added on top of the current one.
    """
    tenant = active_tenant(tenant)
    if base_version is not None and (
        isinstance(base_version, bool) or not isinstance(base_version, int) or base_version < 1
    ):
        raise errors.InvalidInput(
            "base_version_invalid", "base_version must be a version number.", "base_version"
        )
    with transaction.atomic():
        draft = lock_draft(tenant, draft_id)
        # Before the draft's state: a token revoked, or narrowed away from the draft's mailbox,
        # gets the API's answer to it, not the decision on a draft it may no longer read.
        require_standing(tenant, agent_token, mailbox_id=draft.mailbox_id, missing=no_draft())
        require_pending(draft)
        # Pending again after a reopen, yet its earlier send was then proven sent: a version
        # added now could never be approved, and its author would be told it is in review.
        require_nothing_sent(draft)
        author_fields, actor_fields = draft_author(tenant, draft.mailbox, agent_token, actor_user)
        fields = {"to": to, "cc": cc, "bcc": bcc, "subject": subject, "text": text, "html": html}
        try:
            _require_current_base(draft, base_version)
        except errors.VersionConflict:
            repeated = _same_save_again(
                tenant, draft, base_version, actor_user, attachments, fields
            )
            if repeated is None:
                raise
            return repeated
        content = clean_content(
            tenant=tenant,
            mailbox=draft.mailbox,
            reply_subject=draft_reply_subject(tenant, draft),
            **fields,
        )
        current = DraftVersion.objects.get(draft=draft, number=draft.current_version)
        files = planned(attachments, current)
        return _next_version(
            tenant, draft, content, files, author_fields, actor_fields, base_version
        )


def _next_version(
    tenant,
    draft: Draft,
    content: dict,
    files: list[Planned],
    author_fields,
    actor_fields,
    base_version,
) -> DraftVersion:
    """Insert the draft's next version and make it current (call with the draft locked)."""
    number = draft.current_version + 1
    version = DraftVersion.objects.create(
        draft=draft,
        tenant=tenant,
        number=number,
        content_hash=compute_content_hash(
            mailbox_id=draft.mailbox_id,
            in_reply_to=draft.in_reply_to,
            attachments=hash_entries(files),
            **content,
        ),
        **content,
        **author_fields,
    )
    attach(tenant, version, files)
    transaction.on_commit(lambda: keep_marks(version), robust=True)
    Draft.objects.filter(pk=draft.pk).update(current_version=number, updated_at=Now())
    journal(
        tenant=tenant,
        draft=draft,
        action="draft.version_added",
        from_state=Draft.Status.PENDING,
        to_state=Draft.Status.PENDING,
        data={
            "version": number,
            "content_hash": version.content_hash,
            "base_version": base_version,
            **_files_data(files),
        },
        **actor_fields,
    )
    return version


def _require_current_base(draft: Draft, base_version: int | None) -> None:
    """Refuse a version based on anything but the current one (call with the draft locked)."""
    if base_version is None or base_version == draft.current_version:
        return
    if base_version > draft.current_version:
        raise errors.InvalidInput(
            "base_version_unknown",
            _("This draft has no version %(base)s; version %(current)s is current.")
            % {"base": base_version, "current": draft.current_version},
            "base_version",
        )
    values = {"current": draft.current_version, "base": base_version}
    copy = copied_back_into_review(draft, base_version)
    copied_by = copy.action if copy else None
    if copied_by == "draft.approval_undone":
        message = (
            _(
                "The approval of version %(base)s was undone: version %(current)s is the same "
                "text, back in review. Base your revision on version %(current)s."
            )
            % values
        )
    elif copied_by == "draft.reopened":
        message = (
            _(
                "Version %(base)s was approved and its send did not go out; a person put it "
                "back in review as version %(current)s, the same text. Base your revision on "
                "version %(current)s."
            )
            % values
        )
    else:
        message = (
            _("Someone saved version %(current)s while you were editing version %(base)s.") % values
        )
    raise errors.VersionConflict(
        message, base_version=base_version, current_version=draft.current_version
    )


def _same_save_again(
    tenant, draft: Draft, base_version, actor_user, attachments, fields: dict
) -> DraftVersion | None:
    """The current version when it is this very save, already made: the person's own version,
    saved on the same base, with the same content (call with the draft locked). A double click,
    or a post repeated after a slow answer, was refused as "Someone saved version N+1 while you
    were editing version N", about the person's own save. None for anything else: a colleague's
    save (their name is on it), another text, an agent's revision in between."""
    if actor_user is None or attachments is not None or draft.current_version != base_version + 1:
        return None
    current = DraftVersion.objects.get(draft=draft, number=draft.current_version)
    if current.author_kind != DraftVersion.Author.PERSON or current.author_user_id != actor_user.pk:
        return None
    saved_on = (
        IntentEvent.objects.filter(
            draft=draft, action="draft.version_added", data__version=current.number
        )
        .values_list("data__base_version", flat=True)
        .first()
    )
    if saved_on != base_version:
        return None
    try:
        content = clean_content(
            tenant=tenant,
            mailbox=draft.mailbox,
            reply_subject=draft_reply_subject(tenant, draft),
            **fields,
        )
    except errors.DraftError:
        return None
    again = compute_content_hash(
        mailbox_id=draft.mailbox_id,
        in_reply_to=draft.in_reply_to,
        attachments=hash_entries(planned(None, current)),
        **content,
    )
    return current if again == current.content_hash else None
