"""Every write to drafts and send intents: one function per transition (DESIGN.md).

Each runs in one transaction, is guarded by its source state (a row lock or a conditional UPDATE
whose row count is the truth) and writes its IntentEvent in the same transaction. Follow-up work
(waking a worker) is scheduled with ``transaction.on_commit``; nothing here touches the network.
The worker-side transitions (claim, record result, reconcile) live in ``intents/execution.py``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Now
from django.utils import timezone

from config.clock import db_now
from intents import errors
from intents.hashing import content_hash as compute_content_hash
from intents.models import Draft, DraftVersion, IntentEvent, SendIntent
from intents.policy import (
    SECOND_APPROVER_REASON,
    active_membership,
    can_approve,
    needs_another_approver,
    normalize_address,
    recipient_problems,
)
from intents.selectors import intents_that_may_have_gone_out
from mailboxes import provider
from mailboxes.headers import line_break_in
from mailboxes.models import Mailbox
from tenants.models import Tenant
from webhooks.selectors import inbound_message

log = logging.getLogger("intents.services")

MAX_RECIPIENTS = 50
MAX_SUBJECT = 998
MAX_BODY = 1_000_000
MAX_PROVENANCE_BYTES = 16_384
MAX_REASON = 2_000
PRIORITY_RANGE = (-100, 100)

_PROBLEM_CODES = {
    "invalid": "recipient_invalid",
    "not_allowed": "recipient_not_allowed",
    "suppressed": "recipient_suppressed",
}


# --- helpers -------------------------------------------------------------------------------------


def journal(
    *,
    tenant,
    action: str,
    actor_kind: str,
    draft=None,
    intent=None,
    actor_user=None,
    actor_token=None,
    actor_label: str = "",
    from_state: str = "",
    to_state: str = "",
    reason: str = "",
    data: dict | None = None,
) -> IntentEvent:
    tenant_id = tenant if isinstance(tenant, int) else tenant.pk
    return IntentEvent.objects.create(
        tenant_id=tenant_id,
        draft_id=getattr(draft, "pk", draft),
        intent_id=getattr(intent, "pk", intent),
        actor_kind=actor_kind,
        actor_user=actor_user,
        actor_token=actor_token,
        actor_label=actor_label[:100],
        action=action,
        from_state=from_state,
        to_state=to_state,
        reason=reason,
        data=data or {},
    )


@dataclass(frozen=True)
class Entry:
    """One journal row of a batch (``journal_many``); the fields of ``journal`` a worker uses."""

    tenant_id: int
    action: str
    actor_kind: str
    draft_id: int | None = None
    intent_id: int | None = None
    actor_label: str = ""
    from_state: str = ""
    to_state: str = ""
    reason: str = ""
    data: dict = dataclasses.field(default_factory=dict)


def journal_many(entries: list[Entry]) -> None:
    """Append a batch's journal rows in one statement, with what ``journal`` writes per row
    (no person or token; ``created_at`` from the database clock, the column's default).

    The statement's text does not depend on the batch size (arrays, not a VALUES list), so it is
    prepared once per connection.
    """
    if not entries:
        return
    columns = list(
        zip(
            *(
                (
                    e.tenant_id,
                    e.draft_id,
                    e.intent_id,
                    e.actor_kind,
                    e.actor_label[:100],
                    e.action,
                    e.from_state,
                    e.to_state,
                    e.reason,
                    json.dumps(e.data),
                )
                for e in entries
            ),
            strict=True,
        )
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {IntentEvent._meta.db_table} (tenant_id, draft_id, intent_id, "  # noqa: S608
            "actor_kind, actor_label, action, from_state, to_state, reason, data) "
            "SELECT t, d, i, k, l, a, f, s, r, j::jsonb FROM unnest(%s::bigint[], "
            "%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::text[], %s::text[]) AS u(t, d, i, k, l, a, f, s, r, j)",
            [list(column) for column in columns],
        )


def enqueue_execution(intent_id: int) -> None:
    """Wake a worker for this intent. Losing this is harmless: the sweep finds every due intent."""
    try:
        from django_q.tasks import async_task

        async_task("intents.tasks.execute_intent", intent_id, task_name=f"intent-{intent_id}")
    except Exception:
        log.exception("intents.intent.enqueue_failed", extra={"intent_id": intent_id})


def _active_tenant(tenant) -> Tenant:
    current = Tenant.objects.filter(pk=tenant.pk).first()
    if current is None:
        raise errors.NotFound("not_found", "No such tenant.")
    if not current.is_active:
        raise errors.TenantInactive(message="This tenant is suspended; nothing can be changed.")
    return current


def _tenant_mailbox(tenant, mailbox) -> Mailbox:
    mailbox_id = getattr(mailbox, "pk", mailbox)
    try:
        mailbox_id = int(mailbox_id)
    except (TypeError, ValueError):
        raise errors.NotFound("mailbox_not_found", "No such mailbox.", field="mailbox") from None
    found = Mailbox.objects.filter(tenant=tenant, pk=mailbox_id).first()
    if found is None:
        raise errors.NotFound("mailbox_not_found", "No such mailbox.", field="mailbox")
    return found


def _address_list(value, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Iterable):
        raise errors.InvalidInput("invalid", f"{field} must be a list of addresses.", field=field)
    items = list(value)
    for item in items:
        if not isinstance(item, str):
            raise errors.InvalidInput(
                "recipient_invalid", f"{field} must contain only addresses.", field=field
            )
    return items


def _lf_line_endings(body: str) -> str:
    # Browsers submit textareas with CRLF (the HTML form encoding), agents send what their
    # platform writes. One form, before hashing, so a body nobody changed keeps its hash and the
    # word diff marks only what a person changed (DESIGN.md: "hashed with normalised line endings").
    return body.replace("\r\n", "\n").replace("\r", "\n")


def clean_content(
    *, tenant, mailbox, to, cc, bcc, subject, text, html, reply_subject: str | None = None
) -> dict:
    """Validated, normalised draft content, or a DraftError naming the field and address at fault.

    Addresses are lower-cased and de-duplicated across to/cc/bcc (first list wins), so the stored
    version is exactly what will be sent and what the hash covers. For a reply, ``reply_subject``
    is the subject AgentMail will give it; it replaces ``subject``, which may be left out or
    written out but not different.
    """
    lists = {"to": _address_list(to, "to"), "cc": _address_list(cc, "cc")}
    lists["bcc"] = _address_list(bcc, "bcc")
    seen: set[str] = set()
    cleaned: dict[str, list[str]] = {}
    for field, addresses in lists.items():
        problems = recipient_problems(tenant=tenant, mailbox=mailbox, addresses=addresses)
        if problems:
            problem = problems[0]
            raise errors.RecipientRefused(
                _PROBLEM_CODES[problem.code], problem.message, field=field, address=problem.address
            )
        out: list[str] = []
        for address in addresses:
            normalised = normalize_address(address)
            if normalised not in seen:
                seen.add(normalised)
                out.append(normalised)
        cleaned[field] = out
    if not cleaned["to"]:
        raise errors.InvalidInput("no_recipients", "A draft needs at least one recipient.", "to")
    if len(seen) > MAX_RECIPIENTS:
        raise errors.InvalidInput(
            "too_many_recipients", f"A draft may have at most {MAX_RECIPIENTS} recipients.", "to"
        )
    if reply_subject is not None:
        if isinstance(subject, str) and subject.strip() not in ("", reply_subject.strip()):
            raise errors.InvalidInput(
                "subject_not_reply_subject",
                "A reply's subject is set by AgentMail from the message it answers: "
                f'"{reply_subject}". Leave the subject out, or send exactly that.',
                "subject",
            )
        subject = reply_subject
    if not isinstance(subject, str) or not subject.strip():
        raise errors.InvalidInput("subject_required", "A subject is required.", "subject")
    if len(subject) > MAX_SUBJECT:
        raise errors.InvalidInput(
            "subject_too_long", f"The subject is longer than {MAX_SUBJECT} characters.", "subject"
        )
    if line_break := line_break_in(subject):
        message = f"The subject must be a single line; it holds {line_break}."
        raise errors.InvalidInput("subject_invalid", message, "subject")
    text = text or ""
    html = html or ""
    if not isinstance(text, str) or not isinstance(html, str):
        raise errors.InvalidInput("body_invalid", "The body must be text.", "text")
    text, html = _lf_line_endings(text), _lf_line_endings(html)
    if not text.strip() and not html.strip():
        raise errors.InvalidInput("body_required", "A text or HTML body is required.", "text")
    for field, value in (("text", text), ("html", html)):
        if len(value) > MAX_BODY:
            raise errors.InvalidInput(
                "body_too_long", f"The {field} body is longer than {MAX_BODY} characters.", field
            )
    subject = subject if reply_subject is not None else subject.strip()
    return {**cleaned, "subject": subject, "text": text, "html": html}


def _answered_message(*, tenant, mailbox, in_reply_to: str, thread_id: str):
    """The customer's message a reply answers. AgentMail's reply route takes the thread and the
    subject from it, so it must have come into this mailbox (and this thread, when one is named):
    otherwise the approver would see one conversation and the customer of another get the reply.
    """
    message = inbound_message(tenant=tenant, mailbox=mailbox, message_id=in_reply_to)
    if message is None:
        raise errors.InvalidInput(
            "in_reply_to_unknown",
            f"in_reply_to {in_reply_to} is not a message received by {mailbox.address} "
            "(if it arrived only just now, retry in a few seconds).",
            "in_reply_to",
        )
    if thread_id and message.thread_id != thread_id:
        raise errors.InvalidInput(
            "in_reply_to_other_thread",
            f"in_reply_to {in_reply_to} is not in thread {thread_id}.",
            "in_reply_to",
        )
    return message


def _reply_subject(tenant, draft: Draft) -> str | None:
    """The subject AgentMail will give this draft's reply; None for a new message."""
    if not draft.in_reply_to:
        return None
    answered = _answered_message(
        tenant=tenant,
        mailbox=draft.mailbox,
        in_reply_to=draft.in_reply_to,
        thread_id=draft.thread_id,
    )
    return provider.reply_subject(answered.subject)


def _check_agent_token(tenant, agent_token, mailbox) -> None:
    if agent_token.tenant_id != tenant.pk:
        raise errors.NoRight(message="This agent token does not belong to the tenant.")
    if agent_token.revoked_at is not None:
        raise errors.NoRight(message="This agent token has been revoked.")
    if agent_token.expires_at is not None and agent_token.expires_at <= timezone.now():
        raise errors.NoRight(message="This agent token has expired.")
    restricted = list(agent_token.mailboxes.values_list("pk", flat=True))
    if restricted and mailbox.pk not in restricted:
        # The same answer as a missing mailbox: a restricted token learns nothing about others.
        raise errors.NotFound("mailbox_not_found", "No such mailbox.", field="mailbox")


def _author(tenant, mailbox, agent_token, actor_user) -> tuple[dict, dict]:
    """(DraftVersion author fields, IntentEvent actor fields), after checking the actor."""
    if (agent_token is None) == (actor_user is None):
        raise errors.InvalidInput("actor_required", "Exactly one of agent or person must act.")
    if agent_token is not None:
        _check_agent_token(tenant, agent_token, mailbox)
        return (
            {"author_kind": DraftVersion.Author.AGENT, "author_token": agent_token},
            {"actor_kind": IntentEvent.Actor.AGENT, "actor_token": agent_token},
        )
    membership = active_membership(tenant=tenant, user=actor_user)
    if not can_approve(membership=membership, mailbox=mailbox):
        raise errors.NoRight(message="You may not write drafts for this mailbox.")
    return (
        {"author_kind": DraftVersion.Author.PERSON, "author_user": actor_user},
        {"actor_kind": IntentEvent.Actor.PERSON, "actor_user": actor_user},
    )


def _lock_in_tenant(model, tenant, pk, missing: str):
    """Lock one row of the tenant; another tenant's id and a missing or malformed one give the
    same NotFound."""
    try:
        pk = int(pk)
    except (TypeError, ValueError):
        raise errors.NotFound("not_found", missing) from None
    row = (
        model.objects.select_for_update(of=("self",))
        .select_related("mailbox")
        .filter(tenant=tenant, pk=pk)
        .first()
    )
    if row is None:
        raise errors.NotFound("not_found", missing)
    return row


def _lock_draft(tenant, draft_id) -> Draft:
    return _lock_in_tenant(Draft, tenant, draft_id, "No such draft.")


def _require_pending(draft: Draft) -> None:
    if draft.status != Draft.Status.PENDING:
        raise errors.NotPending(
            message=f"This draft is already {draft.get_status_display().lower()}."
        )


def _clean_reason(reason, *, required: bool) -> str:
    reason = (reason or "").strip() if isinstance(reason, str | None) else ""
    if required and not reason:
        raise errors.InvalidInput("reason_required", "Please give a reason.", "reason")
    if len(reason) > MAX_REASON:
        raise errors.InvalidInput(
            "reason_too_long", f"The reason is longer than {MAX_REASON} characters.", "reason"
        )
    return reason


# --- drafts --------------------------------------------------------------------------------------


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
) -> Draft:
    tenant = _active_tenant(tenant)
    mailbox = _tenant_mailbox(tenant, mailbox)
    if not mailbox.is_active:
        raise errors.MailboxInactive(message=f"{mailbox.address} is not active.", field="mailbox")
    author_fields, actor_fields = _author(tenant, mailbox, agent_token, actor_user)
    in_reply_to = (in_reply_to or "").strip()
    thread_id = (thread_id or "").strip()
    if len(in_reply_to) > 998 or len(thread_id) > 255:
        raise errors.InvalidInput("reference_too_long", "A message or thread id is too long.")
    reply_subject = None
    if in_reply_to:
        answered = _answered_message(
            tenant=tenant, mailbox=mailbox, in_reply_to=in_reply_to, thread_id=thread_id
        )
        # The reply joins the answered message's thread: the reviewer sees that conversation.
        thread_id = answered.thread_id
        reply_subject = provider.reply_subject(answered.subject)
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
    provenance = provenance or {}
    if not isinstance(provenance, dict):
        raise errors.InvalidInput(
            "provenance_invalid", "provenance must be an object.", "provenance"
        )
    if len(json.dumps(provenance, default=str)) > MAX_PROVENANCE_BYTES:
        raise errors.InvalidInput(
            "provenance_too_large",
            f"provenance is larger than {MAX_PROVENANCE_BYTES} bytes.",
            "provenance",
        )
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise errors.InvalidInput("priority_invalid", "priority must be an integer.", "priority")
    if not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]:
        raise errors.InvalidInput(
            "priority_invalid",
            f"priority must be between {PRIORITY_RANGE[0]} and {PRIORITY_RANGE[1]}.",
            "priority",
        )
    if not_after is not None and not_after <= timezone.now():
        raise errors.InvalidInput(
            "not_after_past", "not_after is already in the past.", "not_after"
        )

    with transaction.atomic():
        now = db_now()
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
        )
        version = DraftVersion.objects.create(
            draft=draft,
            tenant=tenant,
            number=1,
            content_hash=compute_content_hash(
                mailbox_id=mailbox.pk, in_reply_to=in_reply_to, **content
            ),
            **content,
            **author_fields,
        )
        journal(
            tenant=tenant,
            draft=draft,
            action="draft.created",
            to_state=Draft.Status.PENDING,
            data={"version": 1, "content_hash": version.content_hash},
            **actor_fields,
        )
    log.info("intents.draft.created", extra={"tenant_id": tenant.pk, "draft_id": draft.pk})
    return draft


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
) -> DraftVersion:
    """Add the next version of a pending draft.

    ``base_version`` is the version the author started from. It is checked under the draft's
    lock: two people saving on the same version, or a person saving after an agent's revision
    landed, would otherwise both succeed and the later save would silently replace the other.
    Without it (agents that do not send one) the version is added on top of the current one.
    """
    tenant = _active_tenant(tenant)
    if base_version is not None and (
        isinstance(base_version, bool) or not isinstance(base_version, int) or base_version < 1
    ):
        raise errors.InvalidInput(
            "base_version_invalid", "base_version must be a version number.", "base_version"
        )
    with transaction.atomic():
        draft = _lock_draft(tenant, draft_id)
        _require_pending(draft)
        author_fields, actor_fields = _author(tenant, draft.mailbox, agent_token, actor_user)
        _require_current_base(draft, base_version)
        content = clean_content(
            tenant=tenant,
            mailbox=draft.mailbox,
            to=to,
            cc=cc,
            bcc=bcc,
            subject=subject,
            text=text,
            html=html,
            reply_subject=_reply_subject(tenant, draft),
        )
        number = draft.current_version + 1
        version = DraftVersion.objects.create(
            draft=draft,
            tenant=tenant,
            number=number,
            content_hash=compute_content_hash(
                mailbox_id=draft.mailbox_id, in_reply_to=draft.in_reply_to, **content
            ),
            **content,
            **author_fields,
        )
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
            f"This draft has no version {base_version}; version {draft.current_version} is "
            "current.",
            "base_version",
        )
    raise errors.VersionConflict(
        f"Someone saved version {draft.current_version} while you were editing version "
        f"{base_version}.",
        base_version=base_version,
        current_version=draft.current_version,
    )


def draft_approve(*, tenant, draft_id, version, content_hash, actor) -> SendIntent:
    """Approve exactly the version and hash the approver saw, creating the send intent.

    The draft row lock serialises concurrent approvals; the OneToOne on draft_version is the
    database's backstop. The idempotency key is born here and never changes.
    """
    tenant = _active_tenant(tenant)
    with transaction.atomic():
        draft = _lock_draft(tenant, draft_id)
        _require_pending(draft)
        current = DraftVersion.objects.get(draft=draft, number=draft.current_version)
        if str(version) != str(current.number) or content_hash != current.content_hash:
            raise errors.StaleVersion(
                message=(
                    f"The draft changed since you opened it: version {current.number} is current. "
                    "Review it again before approving."
                )
            )
        membership = active_membership(tenant=tenant, user=actor)
        if not can_approve(membership=membership, mailbox=draft.mailbox):
            raise errors.NoRight(message=f"You may not approve sends from {draft.mailbox.address}.")
        if not draft.mailbox.is_active:
            raise errors.MailboxInactive(message=f"{draft.mailbox.address} is not active.")
        if needs_another_approver(
            tenant=tenant,
            author_kind=current.author_kind,
            author_user_id=current.author_user_id,
            user=actor,
        ):
            raise errors.SecondApproverRequired(message=SECOND_APPROVER_REASON)
        if SendIntent.objects.filter(draft=draft, state=SendIntent.State.ACCEPTED).exists():
            # A reopened draft whose earlier send was later proven sent (marked accepted with
            # evidence): approving it would send the reply twice.
            raise errors.NotPending(
                "already_sent", "An earlier send of this draft was accepted: it went out."
            )
        now = db_now()
        if draft.review_deadline is not None and draft.review_deadline <= now:
            raise errors.NotPending("review_expired", "The review deadline of this draft passed.")
        if draft.not_after is not None and draft.not_after <= now:
            raise errors.NotPending("not_after_passed", "This draft may no longer be sent.")
        for field, addresses in current.recipients.items():
            problems = recipient_problems(tenant=tenant, mailbox=draft.mailbox, addresses=addresses)
            if problems:
                raise errors.RecipientRefused(
                    _PROBLEM_CODES[problems[0].code],
                    problems[0].message,
                    field=field,
                    address=problems[0].address,
                )
        try:
            with transaction.atomic():
                intent = SendIntent.objects.create(
                    tenant=tenant,
                    mailbox=draft.mailbox,
                    draft=draft,
                    draft_version=current,
                    approver=actor,
                    approved_at=now,
                    content_hash=current.content_hash,
                    recipients=current.recipients,
                    idempotency_key=f"cs-{tenant.pk}-{uuid.uuid4().hex}",
                    state=SendIntent.State.QUEUED,
                    priority=draft.priority,
                    next_attempt_at=now,
                    not_after=draft.not_after,
                )
        except IntegrityError:
            raise errors.NotPending(message="This version is already approved.") from None
        Draft.objects.filter(pk=draft.pk).update(
            status=Draft.Status.APPROVED, decided_by=actor, decided_at=now, updated_at=Now()
        )
        journal(
            tenant=tenant,
            draft=draft,
            intent=intent,
            action="draft.approved",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=Draft.Status.PENDING,
            to_state=Draft.Status.APPROVED,
            data={"version": current.number, "content_hash": current.content_hash},
        )
        journal(
            tenant=tenant,
            draft=draft,
            intent=intent,
            action="intent.created",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            to_state=SendIntent.State.QUEUED,
            data={"idempotency_key": intent.idempotency_key},
        )
        transaction.on_commit(lambda: enqueue_execution(intent.pk))
    log.info(
        "intents.draft.approved",
        extra={"tenant_id": tenant.pk, "draft_id": draft.pk, "intent_id": intent.pk},
    )
    return intent


# A send in one of these states certainly did not go out by our hand (failed, blocked, expired,
# cancelled before a call) or nobody could prove it did (needs_attention). DESIGN.md: "a resend is a
# new approval and a new intent", never a retry of the old one with its key.
REOPENABLE_STATES = frozenset(
    {
        SendIntent.State.NEEDS_ATTENTION,
        SendIntent.State.FAILED,
        SendIntent.State.BLOCKED,
        SendIntent.State.CANCELLED,
        SendIntent.State.EXPIRED,
    }
)


def draft_reopen(*, tenant, draft_id, actor, reason) -> Draft:
    """Put an approved draft whose send did not go out back into review, as a new version.

    The new version is a copy of the approved one authored by the person reopening it, so only a
    fresh approval of that exact version (and its hash) can send it, and that approval creates a
    new intent with a new idempotency key. The old version keeps its intent: one intent per
    version stays true. Refused while the latest send is live (it may still go out) or once any
    send of the draft was accepted.
    """
    tenant = _active_tenant(tenant)
    reason = _clean_reason(reason, required=True)
    with transaction.atomic():
        draft = _lock_draft(tenant, draft_id)
        _require_decider(tenant, actor, draft.mailbox)
        if draft.status == Draft.Status.PENDING:
            raise errors.NotPending(
                "already_pending",
                f"This draft is already back in the review queue (version {draft.current_version}).",
            )
        if draft.status != Draft.Status.APPROVED:
            raise errors.NotPending(
                "not_approved",
                f"This draft was {draft.get_status_display().lower()}, never sent; "
                "only an approved draft whose send did not go out can be re-approved.",
            )
        # Locking the latest intent too serialises against a person resolving or cancelling it
        # (those take the intent row lock) and against a worker claiming it.
        intent = (
            SendIntent.objects.select_for_update(of=("self",))
            .select_related("draft_version")
            .filter(tenant=tenant, draft=draft)
            .order_by("-id")
            .first()
        )
        if intent is None:
            raise errors.IntentError("no_send", "This draft has no send to re-approve.")
        if intent.state == SendIntent.State.ACCEPTED or (
            SendIntent.objects.filter(draft=draft, state=SendIntent.State.ACCEPTED).exists()
        ):
            raise errors.IntentError(
                "intent_accepted",
                f"Send #{intent.pk} of this draft was accepted by AgentMail: it went out. "
                "Write a new reply instead of sending this one again.",
            )
        if intent.state not in REOPENABLE_STATES:
            raise errors.IntentError(
                "intent_live",
                f"Send #{intent.pk} is still {intent.get_state_display().lower()} and may still "
                "go out. Wait for its outcome, or cancel it, before re-approving.",
            )
        if not draft.mailbox.is_active:
            raise errors.MailboxInactive(message=f"{draft.mailbox.address} is not active.")
        source = intent.draft_version
        if source.body_purged_at is not None:
            raise errors.DraftError(
                "body_purged",
                "The approved body was purged by the retention policy; it cannot be sent again.",
            )
        content = {
            "to": list(source.to),
            "cc": list(source.cc),
            "bcc": list(source.bcc),
            "subject": source.subject,
            "text": source.text,
            "html": source.html,
        }
        may_have_gone_out = intent.state == SendIntent.State.NEEDS_ATTENTION or (
            intent.pk in intents_that_may_have_gone_out(tenant=tenant, intent_ids=[intent.pk])
        )
        now = db_now()
        number = draft.current_version + 1
        version = DraftVersion.objects.create(
            draft=draft,
            tenant=tenant,
            number=number,
            content_hash=compute_content_hash(
                mailbox_id=draft.mailbox_id, in_reply_to=draft.in_reply_to, **content
            ),
            author_kind=DraftVersion.Author.PERSON,
            author_user=actor,
            **content,
        )
        updates = {
            "status": Draft.Status.PENDING,
            "current_version": number,
            "decided_by": None,
            "decided_at": None,
            # A fresh review window: the old deadline has usually passed and the sweep would
            # expire the draft before anyone could approve it.
            "review_deadline": now + timedelta(hours=tenant.review_deadline_hours),
            "updated_at": Now(),
        }
        not_after_cleared = None
        if draft.not_after is not None and draft.not_after <= now:
            # The person decides to send after the agent's send-before time; keeping it would make
            # the new version impossible to approve. The journal keeps the old value.
            updates["not_after"] = None
            not_after_cleared = draft.not_after.isoformat()
        Draft.objects.filter(pk=draft.pk, status=Draft.Status.APPROVED).update(**updates)
        journal(
            tenant=tenant,
            draft=draft,
            intent=intent,
            action="draft.reopened",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=Draft.Status.APPROVED,
            to_state=Draft.Status.PENDING,
            reason=reason,
            data={
                "version": number,
                "content_hash": version.content_hash,
                "copied_from_version": source.number,
                "earlier_intent": intent.pk,
                "earlier_intent_state": intent.state,
                "earlier_may_have_gone_out": may_have_gone_out,
                "not_after_cleared": not_after_cleared,
            },
        )
    log.info(
        "intents.draft.reopened",
        extra={
            "tenant_id": tenant.pk,
            "draft_id": draft.pk,
            "earlier_intent_id": intent.pk,
            "earlier_state": intent.state,
        },
    )
    draft.refresh_from_db()
    return draft


def draft_reject(*, tenant, draft_id, reason, actor) -> Draft:
    tenant = _active_tenant(tenant)
    reason = _clean_reason(reason, required=True)
    with transaction.atomic():
        draft = _lock_draft(tenant, draft_id)
        _require_pending(draft)
        membership = active_membership(tenant=tenant, user=actor)
        if not can_approve(membership=membership, mailbox=draft.mailbox):
            raise errors.NoRight(
                message=f"You may not decide on drafts of {draft.mailbox.address}."
            )
        Draft.objects.filter(pk=draft.pk).update(
            status=Draft.Status.REJECTED,
            reject_reason=reason,
            decided_by=actor,
            decided_at=Now(),
            updated_at=Now(),
        )
        journal(
            tenant=tenant,
            draft=draft,
            action="draft.rejected",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=Draft.Status.PENDING,
            to_state=Draft.Status.REJECTED,
            reason=reason,
        )
    draft.refresh_from_db()
    return draft


def draft_withdraw(*, tenant, draft_id, agent_token=None, actor_user=None) -> Draft:
    tenant = _active_tenant(tenant)
    with transaction.atomic():
        draft = _lock_draft(tenant, draft_id)
        _require_pending(draft)
        _, actor_fields = _author(tenant, draft.mailbox, agent_token, actor_user)
        Draft.objects.filter(pk=draft.pk).update(
            status=Draft.Status.WITHDRAWN, decided_at=Now(), updated_at=Now()
        )
        journal(
            tenant=tenant,
            draft=draft,
            action="draft.withdrawn",
            from_state=Draft.Status.PENDING,
            to_state=Draft.Status.WITHDRAWN,
            **actor_fields,
        )
    draft.refresh_from_db()
    return draft


def draft_expire_due(*, batch: int = 500) -> int:
    """Expire pending drafts past their review deadline (database clock). Safe on every cluster:
    rows another sweep holds are skipped, and the status guard makes a repeat a no-op."""
    expired = 0
    with transaction.atomic():
        due = list(
            Draft.objects.select_for_update(skip_locked=True)
            .filter(status=Draft.Status.PENDING, review_deadline__lte=Now())
            .order_by("review_deadline")
            .values_list("pk", "tenant_id")[:batch]
        )
        for draft_id, tenant_id in due:
            changed = Draft.objects.filter(pk=draft_id, status=Draft.Status.PENDING).update(
                status=Draft.Status.EXPIRED, decided_at=Now(), updated_at=Now()
            )
            if changed:
                expired += 1
                journal(
                    tenant=tenant_id,
                    draft=draft_id,
                    action="draft.expired",
                    actor_kind=IntentEvent.Actor.SWEEP,
                    from_state=Draft.Status.PENDING,
                    to_state=Draft.Status.EXPIRED,
                    reason="review deadline passed",
                )
    return expired


# --- intents (person-driven transitions) ---------------------------------------------------------


def _lock_intent(tenant, intent_id) -> SendIntent:
    return _lock_in_tenant(SendIntent, tenant, intent_id, "No such send.")


def _require_decider(tenant, actor, mailbox) -> None:
    membership = active_membership(tenant=tenant, user=actor)
    if not can_approve(membership=membership, mailbox=mailbox):
        raise errors.NoRight(message=f"You may not decide on sends from {mailbox.address}.")


def intent_cancel(*, tenant, intent_id, actor, reason="") -> SendIntent:
    """Cancel before anything was sent: only from queued (not yet claimed) or needs_attention."""
    tenant = _active_tenant(tenant)
    reason = _clean_reason(reason, required=False)
    with transaction.atomic():
        intent = _lock_intent(tenant, intent_id)
        _require_decider(tenant, actor, intent.mailbox)
        allowed = (SendIntent.State.QUEUED, SendIntent.State.NEEDS_ATTENTION)
        if intent.state not in allowed:
            raise errors.IntentError(
                "not_cancellable",
                f"A send that is {intent.get_state_display().lower()} cannot be cancelled.",
            )
        from_state = intent.state
        SendIntent.objects.filter(pk=intent.pk, state=from_state).update(
            state=SendIntent.State.CANCELLED,
            resolved_by=actor,
            resolution_note=reason,
            lease_token=None,
            lease_owner="",
            lease_expires_at=None,
            updated_at=Now(),
        )
        journal(
            tenant=tenant,
            draft=intent.draft_id,
            intent=intent,
            action="intent.cancelled",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=from_state,
            to_state=SendIntent.State.CANCELLED,
            reason=reason,
        )
    intent.refresh_from_db()
    return intent


def intent_resolve_accepted(
    *, tenant, intent_id, actor, provider_message_id, evidence
) -> SendIntent:
    """A person confirms, with evidence, that a needs-attention send did go out."""
    tenant = _active_tenant(tenant)
    provider_message_id = (provider_message_id or "").strip()
    if not provider_message_id:
        raise errors.InvalidInput(
            "message_id_required",
            "Give the provider message id that proves the send.",
            "provider_message_id",
        )
    if len(provider_message_id) > 998:
        raise errors.InvalidInput(
            "message_id_invalid", "The message id is too long.", "provider_message_id"
        )
    evidence = _clean_reason(evidence, required=True)
    with transaction.atomic():
        intent = _lock_intent(tenant, intent_id)
        _require_decider(tenant, actor, intent.mailbox)
        if intent.state != SendIntent.State.NEEDS_ATTENTION:
            raise errors.IntentError(
                "not_needs_attention", "Only a send that needs attention can be resolved by hand."
            )
        SendIntent.objects.filter(pk=intent.pk, state=SendIntent.State.NEEDS_ATTENTION).update(
            state=SendIntent.State.ACCEPTED,
            provider_message_id=provider_message_id,
            resolved_by=actor,
            resolution_note=evidence,
            updated_at=Now(),
        )
        journal(
            tenant=tenant,
            draft=intent.draft_id,
            intent=intent,
            action="intent.resolved_accepted",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=SendIntent.State.NEEDS_ATTENTION,
            to_state=SendIntent.State.ACCEPTED,
            reason=evidence,
            data={"provider_message_id": provider_message_id},
        )
        tenant_id = tenant.pk
        transaction.on_commit(lambda: apply_deferred_events([(tenant_id, provider_message_id)]))
    intent.refresh_from_db()
    return intent


def intent_hold(*, tenant, intent_id, reason) -> SendIntent:
    """Keep a queued send from being claimed (the customer wrote again after approval)."""
    reason = _clean_reason(reason, required=True)
    with transaction.atomic():
        intent = _lock_intent(tenant, intent_id)
        if intent.state != SendIntent.State.QUEUED:
            raise errors.IntentError("not_queued", "Only a queued send can be held.")
        SendIntent.objects.filter(pk=intent.pk, state=SendIntent.State.QUEUED).update(
            held_reason=reason[:200], updated_at=Now()
        )
        journal(
            tenant=tenant,
            draft=intent.draft_id,
            intent=intent,
            action="intent.held",
            actor_kind=IntentEvent.Actor.WEBHOOK,
            from_state=SendIntent.State.QUEUED,
            to_state=SendIntent.State.QUEUED,
            reason=reason,
        )
    intent.refresh_from_db()
    return intent


def intent_release(*, tenant, intent_id, actor) -> SendIntent:
    tenant = _active_tenant(tenant)
    with transaction.atomic():
        intent = _lock_intent(tenant, intent_id)
        _require_decider(tenant, actor, intent.mailbox)
        if intent.state != SendIntent.State.QUEUED or not intent.held_reason:
            raise errors.IntentError("not_held", "This send is not on hold.")
        SendIntent.objects.filter(pk=intent.pk, state=SendIntent.State.QUEUED).update(
            held_reason="", next_attempt_at=Now(), updated_at=Now()
        )
        journal(
            tenant=tenant,
            draft=intent.draft_id,
            intent=intent,
            action="intent.released",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=SendIntent.State.QUEUED,
            to_state=SendIntent.State.QUEUED,
            reason=intent.held_reason,
        )
        intent_pk = intent.pk
        transaction.on_commit(lambda: enqueue_execution(intent_pk))
    intent.refresh_from_db()
    return intent


def apply_deferred_events(messages: list[tuple[int, str]]) -> None:
    """Hand webhook events that beat our commit to the webhooks app (call after the commit that
    recorded these (tenant id, provider message id) pairs)."""
    from webhooks import services as webhook_services

    try:
        webhook_services.events_apply_deferred_many(messages)
    except Exception:
        # The sweep replays stored-but-unapplied events, so a failure here is not lost.
        log.exception("intents.intent.deferred_events_failed", extra={"count": len(messages)})


__all__ = [
    "REOPENABLE_STATES",
    "Entry",
    "apply_deferred_events",
    "draft_add_version",
    "draft_approve",
    "draft_create",
    "draft_expire_due",
    "draft_reject",
    "draft_reopen",
    "draft_withdraw",
    "enqueue_execution",
    "intent_cancel",
    "intent_hold",
    "intent_release",
    "intent_resolve_accepted",
    "journal",
    "journal_many",
]
