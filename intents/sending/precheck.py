"""The worker's pre-call check and the attempt row.

``intent_begin_attempts`` re-checks everything the contract names for each intent of a claimed
batch (tenant and mailbox active, the approver's right, the tenant's four-eyes rule as it is now,
the approved content hash and recipients, suppressions and the recipient policy, ``not_after``
and the safe window) and, in the same transaction, commits their SendAttempt rows; only then is
the provider called. A failed check ends that intent (``blocked``/``expired``/``failed``) with
zero provider calls; the others go on.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from django.conf import settings
from django.db import connection, transaction
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Coalesce, Greatest, Now
from django.utils import translation
from django.utils.translation import gettext_noop

from intents import broadcast_content
from intents.blobs import BlobPurged, blob_store
from intents.hashing import version_hash
from intents.journal import journal
from intents.models import (
    Broadcast,
    DraftAttachment,
    DraftVersion,
    IntentEvent,
    SendAttempt,
    SendIntent,
)
from intents.policy import (
    active_memberships,
    approved_by_its_author,
    can_approve,
    normalize_address,
    recipient_problems,
    suppressed_addresses,
)
from intents.sending.lease import Claim, Prepared, safe_window, strict_now
from intents.sending.locked import hold_broadcasts, lock_leased, reread_stops
from intents.sending.record import finish_leased
from intents.sending.throttle import throttle_key
from mailboxes import provider
from webhooks.selectors import customer_wrote_after_read

log = logging.getLogger("intents.sending")

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

State = SendIntent.State
AttemptOutcome = SendAttempt.Outcome


class _LockedFacts(TypedDict):
    db_now: datetime
    next_attempt_number: int


if TYPE_CHECKING:
    # A row of _lock_leased: a SendIntent with the two annotations the check reads.
    Locked = WithAnnotations[SendIntent, _LockedFacts]


def _lock_leased(claims: list[Claim], *, live: bool = True) -> dict[int, Locked]:
    """The batch's leased rows, locked (in id order), with what the pre-call check reads, in one
    statement; keyed by intent id. A claim whose lease is no longer ours is simply absent.

    The related rows are read in the same statement as the lock, so they are as fresh as a
    separate query would be. ``db_now`` (statement_timestamp) and the next attempt number come
    along, saving two round trips per intent. Plain SQL (``intents.sending.locked``): the ORM's
    version of this read was the main thread's largest cost.
    """
    tokens = {claim.intent_id: claim.lease_token for claim in claims}
    return lock_leased(tokens, live=live)  # type: ignore[return-value]


@dataclass(frozen=True)
class CheckFacts:
    """What the pre-call check reads besides the locked rows, for a whole batch in two queries:
    active memberships by (tenant id, user id), the suppression entry covering each suppressed
    (tenant id, address) pair (``suppressed_addresses``)."""

    memberships: dict
    suppressed: dict
    # The approved versions' attachment rows (with their blobs), by version id.
    attachments: dict
    # The sends whose approver also wrote an earlier version since the draft's last approval
    # before theirs (``_wrote_before_approving``), of tenants with four-eyes on edit.
    wrote_before_approving: set
    # The replies whose customer wrote in the thread since a person last read it for them
    # (``_wrote_since_read``).
    wrote_since_read: set

    def files_of(self, intent: SendIntent) -> list[DraftAttachment]:
        return self.attachments.get(intent.draft_version_id, [])

    @classmethod
    def load(cls, intents: list[SendIntent]) -> CheckFacts:
        pairs = []
        for intent in intents:
            for raw in _addresses_of(intent):
                try:
                    pairs.append((intent.tenant_id, normalize_address(raw)))
                except ValueError:
                    continue  # reported as invalid by the check itself
        attachments: dict[int, list[DraftAttachment]] = {}
        rows = DraftAttachment.objects.filter(
            version_id__in=[i.draft_version_id for i in intents]
        ).select_related("blob")
        for row in rows.order_by("version_id", "position"):
            attachments.setdefault(row.version_id, []).append(row)
        return cls(
            memberships=active_memberships(
                (i.tenant_id, i.approver_id) for i in intents if i.approver_id is not None
            ),
            suppressed=suppressed_addresses(pairs),
            attachments=attachments,
            wrote_before_approving=_wrote_before_approving(intents),
            wrote_since_read=_wrote_since_read(intents),
        )


def _wrote_since_read(intents: list[SendIntent]) -> set[int]:
    """Of the batch's replies, the ids of those whose customer wrote in the thread after a
    person last read it for the send: its approval (``draft_approve`` refuses one whose page did
    not show every message since the draft) or a person's release of its hold (likewise).

    The customer's message holds only a queued send (``intents_hold_stale``); one that came
    while the send's call was in flight held nothing. A replay of an uncertain send is the first
    send when the original never reached AgentMail, and a send whose call certainly sent nothing
    (a 429, a refused connection) went back to the queue unheld: either way the reply went out
    answering what nobody had checked against the customer's new message. The first is looked up
    by its label instead (found: it went out before; nothing: a person decides), the second is
    held. One statement for the batch, none when it holds no reply."""
    asked = [intent.pk for intent in intents if intent.draft is not None and intent.draft.thread_id]
    if not asked:
        return set()
    released = (
        IntentEvent.objects.filter(
            intent=OuterRef("pk"),
            action="intent.released",
            actor_kind=IntentEvent.Actor.PERSON,
        )
        .order_by("-created_at")
        .values("created_at")[:1]
    )
    return set(
        SendIntent.objects.filter(pk__in=asked)
        .annotate(read_until=Greatest("approved_at", Coalesce(Subquery(released), "approved_at")))
        .filter(customer_wrote_after_read())
        .values_list("pk", flat=True)
    )


def _wrote_before_approving(intents: list[SendIntent]) -> set[int]:
    """Of the batch's draft sends whose tenant asks for a second approver on edit, the ids of
    those whose approver wrote (as a person) a version of the draft, up to the approved one,
    that no earlier approval of the draft by someone else (not cancelled) covers (one of that
    version or a later one, or of that very content: ``drafts_they_wrote_since_last_approval``):
    their own approval, given while the rule was off, is no second pair of eyes. ``draft_approve``
    refuses such an approval (``wrote_a_version_since_last_approval``), and it may have been given
    before the rule was turned on. A version the approver wrote themselves is asked without a
    query (``approved_by_its_author``). One statement for the batch, none when no send of it
    needs asking; its text does not depend on the batch size."""
    asked = [
        intent
        for intent in intents
        if intent.tenant.second_approver_on_edit
        and intent.draft_version is not None
        and intent.approver_id is not None
        and not _approved_own_version(intent)
    ]
    if not asked:
        return set()
    qn = connection.ops.quote_name
    versions, sends = qn(DraftVersion._meta.db_table), qn(SendIntent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT u.intent_id FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], "  # noqa: S608
            "%s::bigint[], %s::int[]) AS u(intent_id, tenant_id, draft_id, user_id, number) "
            f"WHERE EXISTS (SELECT 1 FROM {versions} v WHERE v.tenant_id = u.tenant_id "
            "AND v.draft_id = u.draft_id AND v.number <= u.number AND v.author_kind = %s "
            "AND v.author_user_id = u.user_id AND NOT EXISTS (SELECT 1 FROM "
            f"{sends} o JOIN {versions} ov ON ov.id = o.draft_version_id "
            "WHERE o.draft_id = u.draft_id AND o.id < u.intent_id AND o.state <> %s "
            "AND o.approver_id IS DISTINCT FROM u.user_id "
            "AND (ov.number >= v.number OR o.content_hash = v.content_hash)))",
            [
                [intent.pk for intent in asked],
                [intent.tenant_id for intent in asked],
                [intent.draft_id for intent in asked],
                [intent.approver_id for intent in asked],
                [intent.draft_version.number for intent in asked],  # type: ignore[union-attr]
                DraftVersion.Author.PERSON,
                State.CANCELLED,
            ],
        )
        return {row[0] for row in cursor.fetchall()}


def _approved_own_version(intent: SendIntent) -> bool:
    """Whether the send's approver wrote what they approved (a draft's version, or a
    broadcast), with the tenant's four-eyes rule on."""
    author_kind: str
    if intent.broadcast is not None:
        author_id = intent.broadcast.created_by_id
        author_kind = DraftVersion.Author.PERSON if author_id else DraftVersion.Author.AGENT
    else:
        version = intent.draft_version
        assert version is not None
        author_kind, author_id = version.author_kind, version.author_user_id
    return approved_by_its_author(
        tenant=intent.tenant,
        author_kind=author_kind,
        author_user_id=author_id,
        approver_id=intent.approver_id,
    )


# The journal's reasons for a send whose approval the four-eyes rule refuses now: it was turned
# on after the approval (draft_approve refuses these while it is on).
APPROVED_OWN_VERSION = (
    "The approver wrote what they approved; this tenant now requires another person to approve it."
)
WROTE_EARLIER_VERSION = (
    "The approver wrote a version of this draft since it was last approved; this tenant now "
    "requires another person to approve it."
)
# Why a reply is held for a person: the customer wrote again in its thread after a person last
# read it for the send (the webhook applier's hold of a queued send, and this check's of a send
# retried after a call that certainly sent nothing). Stored in English (no reader's language
# applies when a machine writes it); marked for the catalogues so that the outbox pages show it
# in the reader's language.
HOLD_REASON = gettext_noop(
    "customer wrote again in this thread after the draft was written; re-confirm"
)
# The reason (and last error) of a send whose mailbox was deactivated, with its address.
MAILBOX_INACTIVE = "%(address)s is not active."
# The reason (and last error) of a send whose attachment's stored bytes changed, with its name.
ATTACHMENT_CHANGED = (
    "The stored bytes of attachment %(name)s no longer have the SHA-256 that was approved; "
    "nothing was sent."
)


def _addresses_of(intent: SendIntent) -> list[str]:
    if intent.draft_version is not None:
        return intent.draft_version.all_recipients
    return list(intent.recipients.get("to", []))


def _broadcast_problem(intent: SendIntent) -> tuple[str, str] | None:
    """A broadcast send's link to its approval: the broadcast approved by the intent's approver
    with the hash of its stored template and recipient digest, the recipient row unchanged since
    (its leaf hash), and the rendered message exactly the one the intent was made for."""
    broadcast, recipient = intent.broadcast, intent.broadcast_recipient
    assert broadcast is not None and recipient is not None
    if broadcast.state == Broadcast.State.CANCELLED:
        return "broadcast_cancelled", "The broadcast was cancelled."
    if broadcast.state not in (*Broadcast.SENDABLE, Broadcast.State.PAUSED):
        return "broadcast_not_approved", "The broadcast is not approved for sending."
    if (
        broadcast.tenant_id != intent.tenant_id
        or recipient.broadcast_id != broadcast.pk
        or broadcast.approved_by_id != intent.approver_id
        or broadcast.mailbox_id != intent.mailbox_id
    ):
        return "hash_mismatch", "The send does not belong to its broadcast's approval."
    approved = broadcast_content.broadcast_hash(
        mailbox_id=broadcast.mailbox_id,
        subject=broadcast.subject,
        text=broadcast.text,
        html=broadcast.html,
        digest=broadcast.recipients_digest,
        count=broadcast.recipient_count,
    )
    if not broadcast.approved_hash or approved != broadcast.approved_hash:
        return "hash_mismatch", "The broadcast no longer matches what was approved."
    if broadcast_content.leaf_hash(recipient.address, recipient.variables) != recipient.leaf_hash:
        return "hash_mismatch", "The recipient's row changed after approval."
    rendered = broadcast_content.recipient_message_hash(
        mailbox_id=broadcast.mailbox_id,
        address=recipient.address,
        subject=broadcast.subject,
        text=broadcast.text,
        html=broadcast.html,
        variables=recipient.variables,
    )
    if rendered != intent.content_hash:
        return "hash_mismatch", "The rendered message differs from the approved one."
    if intent.recipients != {"to": [recipient.address], "cc": [], "bcc": []}:
        return "recipients_changed", "The recipients differ from those approved."
    return None


def policy_problem(intent: SendIntent, facts: CheckFacts) -> tuple[str, str] | None:
    """(code, reason) for the first contract check that fails, or None.

    Expects ``intent`` from ``_lock_leased``: its tenant, mailbox, draft and version were read in
    the locking statement, the tenant's and mailbox's status and the mailbox's recipient policy
    again after it (``reread_stops``: a change that stops sends may have committed while the
    lock waited). ``facts`` are the membership and suppressions read in the same transaction
    (``CheckFacts.load`` of the whole batch), also after the lock.
    """
    tenant = intent.tenant
    if not tenant.is_active:
        return "tenant_inactive", "The tenant is suspended."
    mailbox = intent.mailbox
    if mailbox.tenant_id != intent.tenant_id:
        return "mailbox_foreign", "The mailbox does not belong to the intent's tenant."
    if not mailbox.is_active:
        return "mailbox_inactive", MAILBOX_INACTIVE % {"address": mailbox.address}
    membership = facts.memberships.get((intent.tenant_id, intent.approver_id))
    if not can_approve(membership=membership, mailbox=mailbox):
        return (
            "approver_no_right",
            "The approver no longer has the right to send from this mailbox.",
        )
    if _approved_own_version(intent):
        return "second_approver_required", APPROVED_OWN_VERSION
    if intent.pk in facts.wrote_before_approving:
        return "second_approver_required", WROTE_EARLIER_VERSION
    if intent.broadcast_id is not None:
        problem = _broadcast_problem(intent)
        if problem:
            return problem
        return _recipient_problem(intent, _addresses_of(intent), facts)
    version = intent.draft_version
    assert version is not None
    if version.draft_id != intent.draft_id or version.tenant_id != intent.tenant_id:
        return "hash_mismatch", "The approved version does not belong to this draft."
    if version.body_purged_at is not None:
        return "body_purged", "The approved body was purged by retention."
    # Same draft row as the one locked with the intent (checked above): no reload for the hash.
    assert intent.draft is not None
    version.draft = intent.draft
    recomputed = version_hash(version, facts.files_of(intent))
    if intent.content_hash != version.content_hash or intent.content_hash != recomputed:
        return "hash_mismatch", "The stored content no longer matches what was approved."
    if intent.recipients != version.recipients:
        return "recipients_changed", "The recipients differ from those approved."
    return _recipient_problem(intent, version.all_recipients, facts)


def _recipient_problem(
    intent: SendIntent, addresses: list[str], facts: CheckFacts
) -> tuple[str, str] | None:
    problems = recipient_problems(
        tenant=intent.tenant,
        mailbox=intent.mailbox,
        addresses=addresses,
        suppressed={a: s for (t, a), s in facts.suppressed.items() if t == intent.tenant_id},
    )
    if problems:
        return problems[0].error_code, problems[0].message
    return None


def intent_begin_attempts(claims: list[Claim]) -> dict[int, Prepared | None]:
    """Re-check a claimed batch, then commit its attempt rows, in one transaction.

    Per intent exactly what one at a time would do: the locked rows, memberships and
    suppressions are read in this transaction, an intent that fails a check ends here with zero
    provider calls, and every other gets its attempt row. Nothing is sent before the commit.
    Returns, per claimed intent id, what to call, or None when nothing may be sent (and nothing
    was): blocked, failed, or no longer ours.
    """
    prepared: dict[int, Prepared | None] = {claim.intent_id: None for claim in claims}
    with transaction.atomic():
        locked = _lock_leased(claims)
        hold_broadcasts(list(locked.values()))
        reread_stops(list(locked.values()))
        facts = CheckFacts.load(list(locked.values()))
        started: list[tuple[Locked, Claim, str]] = []
        files: dict[int, tuple[provider.OutgoingAttachment, ...]] = {}
        # In the source language, whatever language is active (a worker's LANGUAGE_CODE, a task
        # run in a reader's thread): the checks' reasons are stored, and each reader's page gives
        # them in their words through their msgids (intents.reason_words). Once per batch.
        with translation.override("en"):
            for claim in claims:
                intent = locked.get(claim.intent_id)
                if intent is None:
                    continue
                kind = _attempt_kind(
                    intent,
                    claim,
                    policy_problem(intent, facts),
                    wrote_since_read=intent.pk in facts.wrote_since_read,
                )
                if kind is not None and kind != SendAttempt.Kind.LOOKUP:
                    kind, files[intent.pk] = _approved_files(intent, claim, kind, facts)
                if kind is None:
                    continue
                started.append((intent, claim, kind))
        attempt_ids = _insert_attempts(started)
        api_keys: dict[int, str] = {}  # opened once per mailbox of the batch
        for intent, _, kind in started:
            mailbox = intent.mailbox
            if mailbox.pk not in api_keys:
                api_keys[mailbox.pk] = mailbox.api_key()
            prepared[intent.pk] = _prepared(
                intent, attempt_ids[intent.pk], kind, api_keys[mailbox.pk], files.get(intent.pk, ())
            )
    return prepared


def _insert_attempts(started: list[tuple[Locked, Claim, str]]) -> dict[int, int]:
    """The batch's attempt rows (outcome pending, started on the database clock), in one
    statement whose text does not depend on the batch size; returns attempt ids by intent id."""
    if not started:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {SendAttempt._meta.db_table} (intent_id, tenant_id, number, kind, "  # noqa: S608
            "worker, lease_token, started_at, outcome, error_code, error_detail, "
            "provider_message_id) SELECT i, t, n, k, w, l, s, %s, '', '', '' FROM unnest("
            "%s::bigint[], %s::bigint[], %s::int[], %s::text[], %s::text[], %s::uuid[], "
            "%s::timestamptz[]) AS u(i, t, n, k, w, l, s) RETURNING intent_id, id",
            [
                AttemptOutcome.PENDING,
                [intent.pk for intent, _, _ in started],
                [intent.tenant_id for intent, _, _ in started],
                [intent.next_attempt_number for intent, _, _ in started],
                [kind for _, _, kind in started],
                [claim.worker[:100] for _, claim, _ in started],
                [claim.lease_token for _, claim, _ in started],
                [intent.db_now for intent, _, _ in started],
            ],
        )
        return dict(cursor.fetchall())


def intent_begin_attempt(claim: Claim) -> Prepared | None:
    """Re-check one claim, then commit its attempt row (``intent_begin_attempts`` of one)."""
    return intent_begin_attempts([claim])[claim.intent_id]


def _attempt_kind(
    intent: Locked, claim: Claim, problem: tuple[str, str] | None, wrote_since_read: bool = False
) -> str | None:
    """The kind of attempt this leased intent may make now, or None after ending it here.
    ``wrote_since_read``: the customer wrote in the reply's thread since a person last read it
    for this send (``_wrote_since_read``)."""
    strict = strict_now(intent.db_now)
    window_passed = (
        intent.first_attempt_at is not None and strict - intent.first_attempt_at > safe_window()
    )
    not_after_passed = intent.not_after is not None and intent.not_after <= strict
    if intent.broadcast is not None and intent.broadcast.state == Broadcast.State.PAUSED:
        # Paused after the claim: no call at all, not even a reconciliation's replay (which is
        # the first send if the original never reached the provider) or lookup.
        _release_unsent(
            intent, claim, reason=PAUSED_REASON, data={"broadcast": intent.broadcast_id}
        )
        return None
    if intent.mailbox.key_refused:
        # AgentMail refused the mailbox's key after this claim (another call of the batch,
        # another worker): no call with it, whatever the kind; the send waits as it was.
        _release_unsent(
            intent, claim, reason=KEY_REFUSED_REASON, data={"mailbox": intent.mailbox_id}
        )
        return None
    if intent.state == State.UNCERTAIN:
        # A replay may perform the first send, so it needs every check a send needs (and what
        # holds a queued one: the customer wrote again since a person read the thread); a label
        # lookup only reads, and is the only way left once the key may have expired.
        exhausted = intent.attempts > settings.SEND_MAX_ATTEMPTS
        if problem or not_after_passed or window_passed or exhausted or wrote_since_read:
            return SendAttempt.Kind.LOOKUP
        return SendAttempt.Kind.REPLAY
    if not_after_passed:
        # The claim skips these (the sweep expires them from queued); this closes the gap
        # between claim and call, as a policy stop.
        finish_leased(
            intent,
            claim,
            to_state=State.BLOCKED,
            action="intent.blocked",
            reason="not_after passed before sending",
            code="not_after_passed",
        )
        return None
    if problem:
        finish_leased(
            intent,
            claim,
            to_state=State.BLOCKED,
            action="intent.blocked",
            reason=problem[1],
            code=problem[0],
        )
        log.info("intents.intent.blocked", extra={"intent_id": intent.pk, "code": problem[0]})
        return None
    if window_passed:
        # Every earlier attempt was certainly not processed (else it would be uncertain).
        finish_leased(
            intent,
            claim,
            to_state=State.FAILED,
            action="intent.failed",
            reason="Gave up: the safe retry window passed.",
            code="max_age",
        )
        return None
    if wrote_since_read:
        _release_unsent(intent, claim, reason=HOLD_REASON, data={}, hold=True)
        return None
    return SendAttempt.Kind.SEND


def _approved_files(
    intent: Locked, claim: Claim, kind: str, facts: CheckFacts
) -> tuple[str | None, tuple[provider.OutgoingAttachment, ...]]:
    """(kind, the approved version's files) for a send or replay: exactly the bytes whose
    SHA-256 the approver's hash covers. A blob whose bytes no longer have that digest (storage
    corruption, a hand edit) ends a send as failed, journaled, with zero provider calls; a replay
    turns into a label lookup (repeating the request with other bytes could send them)."""
    out = []
    store = blob_store()
    for row in facts.files_of(intent):
        try:
            data = store.read(row.blob)
        except BlobPurged:  # never for a version that may send (retention keeps those)
            data = b""
        if hashlib.sha256(data).hexdigest() != row.sha256 or row.blob.sha256 != row.sha256:
            log.error(
                "intents.intent.attachment_digest_mismatch",
                extra={"intent_id": intent.pk, "attachment_id": row.pk},
            )
            if kind == SendAttempt.Kind.REPLAY:
                return SendAttempt.Kind.LOOKUP, ()
            finish_leased(
                intent,
                claim,
                to_state=State.FAILED,
                action="intent.failed",
                reason=ATTACHMENT_CHANGED % {"name": repr(row.filename)},
                code="attachment_digest_mismatch",
                data={"attachment_id": row.pk, "sha256": row.sha256},
            )
            return None, ()
        out.append(provider.OutgoingAttachment(row.filename, row.content_type, data))
    return kind, tuple(out)


PAUSED_REASON = "The broadcast was paused before the call."
KEY_REFUSED_REASON = "AgentMail refused the mailbox's key before the call."


def _release_unsent(
    intent: Locked, claim: Claim, *, reason: str, data: dict, hold: bool = False
) -> None:
    """Its broadcast was paused, or its mailbox's key refused, after the claim: the lease is
    given up with no call made and no attempt counted (the claim's count is undone), so the wait
    does not use up the send's attempts. A send goes back to the queue; a reconciliation stays
    uncertain, due again once the broadcast is resumed or the key works again. ``hold``: a send
    goes back held for a person, with ``reason`` (``intent_release`` lets it go again)."""
    to_state = State.QUEUED if intent.state == State.SENDING else State.UNCERTAIN
    changed = SendIntent.objects.filter(
        pk=intent.pk, lease_token=claim.lease_token, state=intent.state
    ).update(
        state=to_state,
        lease_token=None,
        lease_owner="",
        lease_expires_at=None,
        attempts=max(0, intent.attempts - 1),
        first_attempt_at=intent.first_attempt_at if intent.next_attempt_number > 1 else None,
        **({"held_reason": reason[:200]} if hold else {}),
        updated_at=Now(),
    )
    if changed:
        journal(
            tenant=intent.tenant_id,
            intent=intent.pk,
            action="intent.held" if hold else "intent.released",
            actor_kind=IntentEvent.Actor.WORKER,
            actor_label=claim.worker,
            from_state=intent.state,
            to_state=to_state,
            reason=reason,
            data=data,
        )


def _broadcast_request(intent: SendIntent) -> provider.SendRequest:
    broadcast, recipient = intent.broadcast, intent.broadcast_recipient
    assert broadcast is not None and recipient is not None
    subject, text, html = broadcast_content.rendered_message(
        subject=broadcast.subject,
        text=broadcast.text,
        html=broadcast.html,
        variables=recipient.variables,
    )
    return provider.SendRequest(
        inbox_id=intent.mailbox.inbox_id,
        to=[recipient.address],
        cc=[],
        bcc=[],
        subject=subject,
        text=text,
        html=html,
        labels=[intent.label, f"cs-broadcast-{broadcast.pk}"],
        idempotency_key=intent.idempotency_key,
    )


def _prepared(
    intent: SendIntent,
    attempt_id: int,
    kind: str,
    api_key: str,
    files: tuple[provider.OutgoingAttachment, ...] = (),
) -> Prepared:
    version = intent.draft_version
    request = None
    if kind != SendAttempt.Kind.LOOKUP and intent.broadcast_id is not None:
        request = _broadcast_request(intent)
    elif kind != SendAttempt.Kind.LOOKUP:
        assert version is not None and intent.draft is not None
        request = provider.SendRequest(
            inbox_id=intent.mailbox.inbox_id,
            to=list(version.to),
            cc=list(version.cc),
            bcc=list(version.bcc),
            subject=version.subject,
            text=version.text,
            html=version.html,
            labels=[intent.label],
            idempotency_key=intent.idempotency_key,
            reply_to_message_id=intent.draft.in_reply_to,
            attachments=files,
        )
    return Prepared(
        attempt_id=attempt_id,
        kind=kind,
        api_key=api_key,
        request=request,
        inbox_id=intent.mailbox.inbox_id,
        label=intent.label,
        key_ref=throttle_key(intent.mailbox),
        tenant_id=intent.tenant_id,
        first_attempt_at=intent.first_attempt_at,
        mailbox_id=intent.mailbox_id,
        api_key_id=intent.mailbox.provider_api_key_id,
    )
