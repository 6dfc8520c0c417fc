"""Approving a draft: the send intent is born here (reopening one whose send did not go out
is ``reopen``)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Now
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from config.clock import db_now
from intents import errors
from intents.journal import journal
from intents.models import Draft, DraftVersion, IntentEvent, SendIntent
from intents.policy import (
    ANSWERED_MESSAGE_GONE_REASON,
    EARLIER_VERSION_REASON,
    SECOND_APPROVER_REASON,
    active_membership,
    answered_author_left_out,
    answered_message_gone,
    can_approve,
    domains_named,
    files_of_others,
    lookalike_recipients,
    mixed_thread_domains,
    needs_another_approver,
    sender_address,
    strangers_to_thread,
)
from intents.selectors.drafts import (
    drafts_answering_its_message_sent,
    html_unchanged_while_text_changed,
    wrote_a_version_since_last_approval,
)
from intents.selectors.intents import intents_that_may_have_gone_out
from intents.services.approval_content import (
    ContentVerdict,
    content_verdict,
    named_content_verdict,
)
from intents.services.common import (
    UNHELD,
    active_tenant,
    enqueue_execution,
    lock_draft,
    require_nothing_sent,
    require_pending,
    stale_refusal,
)
from intents.services.content import refuse_recipient_problems
from tenants.models import Membership
from tenants.send_stops import send_births_wait
from tenants.templatetags.zones import zoned
from webhooks.selectors import customer_messages_after_draft, inbound_message, thread_senders

log = logging.getLogger("intents.services")


def draft_approve(
    *,
    tenant,
    draft_id,
    version,
    content_hash,
    actor,
    unseen: bool = False,
    messages_seen: Collection[int] = (),
) -> SendIntent:
    """Approve exactly the version and hash the approver saw, creating the send intent.

    The draft row lock serialises concurrent approvals; the OneToOne on draft_version is the
    database's backstop. The idempotency key is born here and never changes.

    ``messages_seen``: the ids of the customer's messages the approver's page showed. A message
    written in the thread after the draft and not among them refuses the approval: a send
    approved a moment earlier would have been held for it (``intents_hold_stale``), and one
    approved a moment later must not go out answering what nobody read.

    ``unseen``: approved from a list (the queue's bulk approval), whose rows show neither the
    draft page's warnings nor its whole content: what only the page shows refuses it
    (``_require_what_only_the_page_shows``). Every approval of a reply serialises on the message
    it answers (``_lock_answered_message``), so two approved at once see each other. What the
    version's own content refuses is read before the transaction, of the version named, and
    applied in it only to a current version of that hash (``approval_content``): those checks
    take a second per megabyte, and nothing is locked while they run.
    """
    checked = (
        named_content_verdict(
            tenant=tenant, draft_id=draft_id, version=version, content_hash=content_hash
        )
        if unseen
        else None
    )
    with transaction.atomic():
        # Before reading the tenant, the mailbox and the approver's right: a change that stops
        # sends and is running now is waited for and read after, and one that starts now waits
        # for this send and holds it (tenants.send_stops).
        send_births_wait(tenant_id=tenant.pk)
        tenant = active_tenant(tenant)
        draft = lock_draft(tenant, draft_id)
        require_pending(draft)
        current = DraftVersion.objects.get(draft=draft, number=draft.current_version)
        if str(version) != str(current.number) or content_hash != current.content_hash:
            raise _stale(draft, current, version, content_hash)
        membership = _require_approver(tenant, draft, current, actor)
        now = db_now()
        _require_sendable(tenant, draft, current, now)
        _require_answered_message_kept(tenant, draft)
        _lock_answered_message(draft)
        _require_customer_messages_seen(tenant, draft, messages_seen, from_list=unseen)
        if unseen:
            _require_what_only_the_page_shows(tenant, draft, current, checked)
        intent = _create_intent(tenant, draft, current, actor, now)
        _record_approval(tenant, draft, current, intent, membership, from_list=unseen)
        held = intent.hold_until is not None
        transaction.on_commit(lambda: enqueue_execution(intent.pk, held=held))
    log.info(
        "intents.draft.approved",
        extra={"tenant_id": tenant.pk, "draft_id": draft.pk, "intent_id": intent.pk},
    )
    return intent


def _require_what_only_the_page_shows(
    tenant, draft: Draft, current: DraftVersion, checked: ContentVerdict | None
) -> None:
    """The refusals of an approval from a list (the queue's bulk approval), whose rows show
    neither the draft page's warnings nor its whole content.

    A draft with an earlier send that may have gone out is then refused: only its page says so, and
    a new send could reach the customer twice. So is a draft with a recipient that holds letters
    outside ASCII (``lookalike_recipients``): a list shows it as the plain address it looks like;
    only the page names its letters. And so is a draft with a recipient who wrote nothing in its
    thread (``strangers_to_thread``): a list row shows a subject and one address, not that Ana's
    conversation (her subject, her forwarded files) would go to Ben; the page says "Not a
    participant of this thread". Nor is a participant enough (``_require_one_conversation``): Ben
    can join Ana's thread by answering her message, so a reply that leaves out the author of the
    message it answers, a thread whose messages come from more than one organisation, and a file
    forwarded to someone other than its sender are left for the page too. So is HTML whose own CSS
    shows it otherwise to some readers (``reader_looks``: a phone's width, dark mode): only the
    page names them and shows the phone's look. So is HTML with a link whose text names another
    address than it leads to, or that runs or carries something (``misleading_links``): only the
    page lists where each link leads. So is a subject or body with characters nobody sees
    (``invisible_in_content``: a right-to-left override, a zero-width space): only the page names
    them. So is a subject or body that names a domain that may read as another
    (``lookalike_hosts_in_content``: "https://b\u0430nk.example/pay" with a Cyrillic a, which a
    mail client makes a link of): only the page names its letters. So is a draft whose text changed
    while its HTML stayed as it was (``_require_html_with_its_text``): most mail clients show the
    HTML, and only the page shows both. So is a reply to a customer message that another approved
    draft's reply answered, or may still (``_require_only_reply_to_its_message``): the page names
    it.

    ``checked``: the verdict on the version's own content (its looks, links, invisible characters
    and domains: ``approval_content``), read before the transaction; it applies only to content
    of the current version's hash, which the caller's stale check made the named one. Read here
    only when the version the approver named was not the current one of a pending draft then.
    """
    _require_plain_recipients(current)
    senders = thread_senders(tenant=tenant, mailbox=draft.mailbox_id, thread_id=draft.thread_id)
    _require_thread_participants(current, senders)
    _require_one_conversation(tenant, draft, current, senders)
    _require_only_reply_to_its_message(tenant, draft)
    if checked is None or checked.content_hash != current.content_hash:
        checked = content_verdict(current)
    if checked.refusal is not None:
        raise checked.refusal
    _require_html_with_its_text(tenant, draft)
    _require_no_unproven_send(tenant, draft)


def _stale(draft: Draft, current: DraftVersion, version, content_hash) -> errors.StaleVersion:
    """The refusal of an approval of a version that is not current. When the current version is
    a colleague's undo or reopen of the very version the approver saw, that is what it says, with
    who and when: "the draft changed", over a diff that showed no difference, named nobody, and
    a second click sent what the colleague had just taken back."""
    return stale_refusal(
        draft,
        version,
        may_be_copy=content_hash == current.content_hash,
        changed=_(
            "The draft changed since you opened it: version %(n)s is current. "
            "Review it again before approving."
        ),
        undone=_(
            "%(who)s undid the approval of version %(seen)s at %(when)s: version %(n)s is the "
            "same text, back in review. Ask them why before approving it again."
        ),
        reopened=_(
            "%(who)s put version %(seen)s back in review at %(when)s, after its send did not go "
            "out: version %(n)s is the same text. Read their reason in the journal, then "
            "approve version %(n)s if it still fits."
        ),
    )


def _require_approver(tenant, draft: Draft, current: DraftVersion, actor) -> Membership:
    """The actor may approve sends from this (active) mailbox, and is not the only person who
    saw an edit that policy wants a second pair of eyes on. Returns the membership that allows
    it."""
    membership = active_membership(tenant=tenant, user=actor)
    if not can_approve(membership=membership, mailbox=draft.mailbox):
        raise errors.NoRight(
            message=_("You may not approve sends from %(address)s.")
            % {"address": draft.mailbox.address}
        )
    assert membership is not None  # can_approve refuses None
    if not draft.mailbox.is_active:
        raise errors.MailboxInactive(
            message=_("%(address)s is not active.") % {"address": draft.mailbox.address}
        )
    if needs_another_approver(
        tenant=tenant,
        author_kind=current.author_kind,
        author_user_id=current.author_user_id,
        user=actor,
    ):
        raise errors.SecondApproverRequired(message=str(SECOND_APPROVER_REASON))
    if tenant.second_approver_on_edit and wrote_a_version_since_last_approval(draft, actor):
        raise errors.SecondApproverRequired(message=str(EARLIER_VERSION_REASON))
    return membership


def _require_sendable(tenant, draft: Draft, current: DraftVersion, now) -> None:
    """Nothing of this draft went out yet, its deadlines have not passed, and every recipient is
    still allowed (the policy or the suppression list may have changed since it was written)."""
    # A reopened draft whose earlier send was later proven sent (marked accepted with
    # evidence): approving it would send the reply twice.
    require_nothing_sent(draft)
    if draft.review_deadline is not None and draft.review_deadline <= now:
        raise errors.NotPending("review_expired", _("The review deadline of this draft passed."))
    if draft.not_after is not None and draft.not_after <= now:
        raise errors.NotPending("not_after_passed", _("This draft may no longer be sent."))
    hold = tenant.send_hold_seconds
    if draft.not_after is not None and hold and now + timedelta(seconds=hold) >= draft.not_after:
        # The send is not due before its undo window ends and dead after not_after: approved,
        # it could only expire.
        raise errors.NotPending(
            "not_after_within_undo",
            ngettext(
                "This draft must be sent by %(not_after)s, but the undo window of "
                "%(seconds)d second would hold it until after that: it could never go out.",
                "This draft must be sent by %(not_after)s, but the undo window of "
                "%(seconds)d seconds would hold it until after that: it could never go out.",
                hold,
            )
            % {"not_after": zoned(draft.not_after, "j M Y, H:i:s"), "seconds": hold},
        )
    for field, addresses in current.recipients.items():
        refuse_recipient_problems(tenant, draft.mailbox, field, addresses)


def _require_answered_message_kept(tenant, draft: Draft) -> None:
    """A reply's answered message is still at AgentMail: not one of an inbox of the mailbox that
    was deleted there and made again (``answered_message_gone``), which its reply route would
    answer with 404, failing the send the person approved."""
    if not draft.in_reply_to or draft.mailbox.inbox_lost_at is None:
        return
    answered = inbound_message(
        tenant=tenant, mailbox=draft.mailbox_id, message_id=draft.in_reply_to
    )
    if answered_message_gone(draft.mailbox, answered):
        raise errors.AnsweredMessageGone(message=str(ANSWERED_MESSAGE_GONE_REASON))


def _require_customer_messages_seen(
    tenant, draft: Draft, seen: Collection[int], *, from_list: bool
) -> None:
    """Refuse when the customer wrote in the thread after the draft, in a message the approver
    was not shown. Under the draft's lock: the webhook applier locks the thread's pending drafts
    before it holds their queued sends, so a message stored at the same moment is either seen
    here or finds this send to hold."""
    newer = customer_messages_after_draft(tenant=tenant, draft=draft)
    unread = [pk for pk in newer if pk not in seen]
    if not unread:
        return
    if from_list:
        message = _(
            "The customer wrote again after this draft was written: open the draft, read the "
            "new message and approve it there if the reply still fits."
        )
    else:
        message = ngettext(
            "The customer wrote again since this page was loaded: read the new message below, "
            "then approve again if the reply still fits.",
            "The customer wrote again since this page was loaded: read the %(count)d new "
            "messages below, then approve again if the reply still fits.",
            len(unread),
        ) % {"count": len(unread)}
    raise errors.CustomerWroteAgain(message=message)


def _require_plain_recipients(current: DraftVersion) -> None:
    lookalikes = lookalike_recipients(current.all_recipients)
    if not lookalikes:
        return
    named = "; ".join(f"{address} ({letters})" for address, letters in lookalikes.items())
    raise errors.LookalikeRecipient(
        message=ngettext(
            "The recipient %(addresses)s holds letters outside ASCII and can look exactly like "
            "another address: open the draft, which names each letter, and approve it there.",
            "The recipients %(addresses)s hold letters outside ASCII and can look exactly like "
            "other addresses: open the draft, which names each letter, and approve it there.",
            len(lookalikes),
        )
        % {"addresses": named}
    )


def _require_thread_participants(current: DraftVersion, senders: list[str]) -> None:
    strangers = strangers_to_thread(current.all_recipients, senders)
    if not strangers:
        return
    raise errors.RecipientNotOnThread(
        message=ngettext(
            "The recipient %(addresses)s wrote none of the customer messages of this draft's "
            "thread: open the draft, check whose conversation it carries, and approve it there.",
            "The recipients %(addresses)s wrote none of the customer messages of this draft's "
            "thread: open the draft, check whose conversation it carries, and approve it there.",
            len(strangers),
        )
        % {"addresses": ", ".join(strangers)}
    )


def _require_one_conversation(
    tenant, draft: Draft, current: DraftVersion, senders: list[str]
) -> None:
    """The rules of the draft page's thread warnings (intents.policy), asked of a list's
    approval: the reply goes to the author of the message it answers, its thread holds one
    organisation's messages, and every forwarded file goes back to whoever sent it."""
    recipients = current.all_recipients
    answered = inbound_message(
        tenant=tenant, mailbox=draft.mailbox_id, message_id=draft.in_reply_to
    )
    if answered is not None and answered_author_left_out(recipients, answered.sender):
        raise errors.AnsweredAuthorLeftOut(
            message=_(
                "This reply does not go to %(author)s, who wrote the message it answers: open "
                "the draft, check whose conversation it carries, and approve it there."
            )
            % {"author": sender_address(answered.sender)}
        )
    if domains := mixed_thread_domains(senders):
        raise errors.ThreadOfSeveralOrganisations(
            message=_(
                "This draft's thread holds messages from %(domains)s: open the draft, check "
                "whose conversation the reply carries, and approve it there."
            )
            % {"domains": domains_named(domains)}
        )
    files = [(f.filename, f.source_sender) for f in current.attachments.all()]
    if others := files_of_others(files, recipients):
        raise errors.ForwardedFileOfOther(
            message=ngettext(
                "The file %(files)s was forwarded from a message of someone this reply does not "
                "go to: open the draft, which names its source, and approve it there.",
                "The files %(files)s were forwarded from messages of people this reply does not "
                "go to: open the draft, which names their sources, and approve it there.",
                len(others),
            )
            % {"files": ", ".join(f"{name} ({author})" for name, author in others)}
        )


def _lock_answered_message(draft: Draft) -> None:
    """Serialise, until commit, the approvals of replies to the message ``draft`` answers: two
    replies to it approved at the same moment from two lists each saw the other unapproved
    (``_require_only_reply_to_its_message``), and both went out. Taken under the draft's lock
    and nowhere else, so it waits for no lock held by a waiter for it."""
    if not draft.in_reply_to:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [f"countersign:answer:{draft.mailbox_id}:{draft.in_reply_to}"],
        )


def _require_only_reply_to_its_message(tenant, draft: Draft) -> None:
    """No other approved draft's reply to the customer's message this one answers went out or
    may still: a list's row does not say that the message was answered already, so a second
    answer to one message is for the draft's page, which names the other."""
    others = drafts_answering_its_message_sent(tenant=tenant, draft=draft)
    if not others:
        return
    raise errors.AnsweredByAnotherDraft(
        message=ngettext(
            "Draft %(drafts)s, another reply to the same message, was approved: open the "
            "draft, check that the customer should get both, and approve it there.",
            "Drafts %(drafts)s, other replies to the same message, were approved: open the "
            "draft, check that the customer should get all of them, and approve it there.",
            len(others),
        )
        % {"drafts": ", ".join(f"#{pk}" for pk in others)}
    )


def _require_html_with_its_text(tenant, draft: Draft) -> None:
    since = html_unchanged_while_text_changed(tenant=tenant, draft_id=draft.pk)
    if since is None:
        return
    raise errors.HtmlUnchanged(
        message=_(
            "The text of this draft changed since version %(n)s and its HTML did not, and most "
            "mail clients show the HTML: open the draft, read both, and approve it there."
        )
        % {"n": since}
    )


def _require_no_unproven_send(tenant, draft: Draft) -> None:
    earlier = SendIntent.objects.filter(draft=draft).values_list("pk", flat=True)
    if intents_that_may_have_gone_out(tenant=tenant, intent_ids=list(earlier)):
        raise errors.NotPending(
            "earlier_send_unproven",
            _(
                "An earlier send of this draft may have gone out: open the draft, check what "
                "AgentMail delivered, and approve it there."
            ),
        )


def _create_intent(tenant, draft: Draft, current: DraftVersion, actor, now) -> SendIntent:
    # The undo window: not due before it ends (next_attempt_at, which the claim, the sweep's
    # wake-ups and seconds_until_next_due all read), and the claim checks hold_until itself.
    hold = tenant.send_hold_seconds
    hold_until = now + timedelta(seconds=hold) if hold else None
    try:
        with transaction.atomic():
            return SendIntent.objects.create(
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
                next_attempt_at=hold_until or now,
                hold_until=hold_until,
                not_after=draft.not_after,
            )
    except IntegrityError:
        raise errors.NotPending(message=_("This version is already approved.")) from None


def _record_approval(
    tenant,
    draft: Draft,
    current: DraftVersion,
    intent: SendIntent,
    membership: Membership,
    *,
    from_list: bool,
) -> None:
    """The draft approved, and the journal's record of what and under which right: the append-only
    row keeps the recipients and the approver's address, role and mailbox right as they were
    when they approved, which a later edit of the account or the membership cannot change, and
    which outlives the body's retention purge beside the hash; and whether it was approved from
    the queue's list (``from_list``), whose rows show less than the draft's page."""
    actor = membership.user
    Draft.objects.filter(pk=draft.pk).update(
        status=Draft.Status.APPROVED,
        decided_by=actor,
        decided_at=intent.approved_at,
        updated_at=Now(),
        **UNHELD,
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
        data={
            "version": current.number,
            "content_hash": current.content_hash,
            "recipients": current.recipients,
            "email": actor.email,
            "role": membership.role,
            "all_mailboxes": membership.approve_all_mailboxes,
            "from_list": from_list,
        },
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
