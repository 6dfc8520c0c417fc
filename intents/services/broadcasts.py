"""A broadcast's life as a person or an agent drives it: create (with its recipients), replace
the recipients, approve, reject (pause, resume and cancel are ``broadcast_controls``). The
fan-out into one send intent per recipient and the end of a broadcast are the worker's
(``broadcast_fanout``)."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models.functions import Now
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from common.text import control_in, unsafe_in_name
from config.clock import db_now
from intents import broadcast_content as content
from intents import broadcast_html, errors
from intents.journal import journal
from intents.models import (
    Broadcast,
    BroadcastRecipient,
    IntentEvent,
)
from intents.policy import (
    active_membership,
    broadcast_needs_another_approver,
    can_approve,
    own_address,
)
from intents.services.common import (
    active_tenant,
    clean_reason,
    lock_in_tenant,
    person_who_acted,
    require_active_mailbox,
    require_decider,
    require_standing,
    tenant_mailbox,
)
from intents.services.content import (
    MAX_BODY,
    MAX_SUBJECT,
    refuse_unseen_body,
    refuse_unseen_subject,
)
from mailboxes.headers import encoded_word_in, line_break_in
from mailboxes.models import Mailbox

log = logging.getLogger("intents.services")

State = Broadcast.State
MAX_NAME = 200
MAX_RATE = 1000.0


def _clean_template(subject, text, html) -> tuple[str, str, str, set[str], set[str], set[str]]:
    """(subject, text, html, every placeholder, those in the subject, those that begin a URL of
    the HTML), or the refusal."""
    if not isinstance(subject, str) or not subject.strip():
        raise errors.InvalidInput("subject_required", _("A subject is required."), "subject")
    refuse_unseen_subject(subject)
    if not isinstance(text, str | None) or not isinstance(html, str | None):
        raise errors.InvalidInput("body_invalid", _("The body must be text."), "text")
    subject = subject.strip()
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    html = (html or "").replace("\r\n", "\n").replace("\r", "\n")
    if len(subject) > MAX_SUBJECT:
        raise errors.InvalidInput(
            "subject_too_long",
            _("The subject is longer than %(n)s characters.") % {"n": MAX_SUBJECT},
            "subject",
        )
    if line_break := line_break_in(subject):
        message = _("The subject must be a single line; it holds %(what)s.") % {"what": line_break}
        raise errors.InvalidInput("subject_invalid", message, "subject")
    if control := control_in(subject):
        message = _("The subject cannot hold the control character %(what)s.") % {"what": control}
        raise errors.InvalidInput("subject_invalid", message, "subject")
    if word := encoded_word_in(subject):
        # As a draft's subject (intents.services.content): the mail client shows it decoded.
        message = _(
            "The subject cannot hold the encoded word %(word)s: a mail client shows it decoded, "
            "as other words than the ones approved. Write the text itself."
        ) % {"word": word}
        raise errors.InvalidInput("subject_invalid", message, "subject")
    if not text.strip() and not html.strip():
        raise errors.InvalidInput("body_required", _("A text or HTML body is required."), "text")
    refuse_unseen_body(text, html)
    for field, value in (("subject", subject), ("text", text), ("html", html)):
        if len(value) > MAX_BODY or "\x00" in value:
            raise errors.InvalidInput("body_invalid", _("The body must be text."), field)
    try:
        in_subject = content.placeholders("subject", subject)
        used = in_subject | content.placeholders("text", text) | content.placeholders("html", html)
        in_url = broadcast_html.url_placeholders(html)
    except content.TemplateInvalid as exc:
        raise errors.InvalidInput("template_invalid", exc.message, exc.field) from None
    if len(used) > content.MAX_VARIABLES:
        # No row may give more: such a template could never be filled, and checking every row
        # against 100,000 names took minutes and gigabytes in the web process.
        raise errors.InvalidInput(
            "template_invalid",
            _("The template uses %(n)s placeholders; at most %(most)s are allowed.")
            % {"n": len(used), "most": content.MAX_VARIABLES},
            "text",
        )
    return subject, text, html, used, in_subject, in_url


def _clean_rate(rate) -> float | None:
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= MAX_RATE:
        raise errors.InvalidInput(
            "rate_invalid",
            _("The rate must be a number of sends per second above 0 and at most %(n)s.")
            % {"n": int(MAX_RATE)},
            "rate_per_second",
        )
    return float(rate)


def _clean_name(name) -> str:
    """The team's name for the broadcast, which reviewers read in lists and on its page: refused,
    not cut or cleaned, when too long or when it holds what makes a name display as something
    else (``unsafe_in_name``: controls, a tab, bidirectional overrides), as a token's is."""
    name = name.strip() if isinstance(name, str) else ""
    if len(name) > MAX_NAME:
        raise errors.InvalidInput(
            "name_invalid",
            _("The name may be at most %(n)s characters long.") % {"n": MAX_NAME},
            "name",
        )
    if found := unsafe_in_name(name):
        raise errors.InvalidInput(
            "name_invalid",
            _("The name holds %(char)s, which makes it display as something else.")
            % {"char": found},
            "name",
        )
    return name


def _clean_rows(
    recipients, recipients_csv, template: tuple, mailbox: Mailbox
) -> list[content.Recipient]:
    """The recipients given as a JSON list or a CSV text (``recipient_rows``), every row checked.
    ``template``: what ``_clean_template`` returned; ``mailbox``: the sending one."""
    subject, text, html, used, in_subject, in_url = template
    rows = recipient_rows(recipients, recipients_csv)
    try:
        return content.clean_recipients(
            rows,
            used=used,
            in_subject=in_subject,
            max_recipients=settings.BROADCAST_MAX_RECIPIENTS,
            subject=subject,
            body=(text, html),
            in_url=in_url,
            own=own_address(mailbox),
            limits=(
                content.Limit.of("subject", subject, most=MAX_SUBJECT),
                content.Limit.of("text", text, most=MAX_BODY),
                content.Limit.of("html", html, most=MAX_BODY, escape=True),
            ),
        )
    except content.RecipientsInvalid as exc:
        raise _rows_invalid(exc, recipients, recipients_csv) from None


def recipient_rows(recipients=None, recipients_csv=None) -> list[tuple[int, object, object]]:
    """(row, address, variables) triples from a JSON list (``[{"address", "variables"}]``) or a
    CSV text; BroadcastRowsInvalid when the shape itself is wrong."""
    try:
        if recipients_csv is not None and recipients is not None:
            # Reading one and dropping the other would store a list nobody sent as such.
            raise content.RecipientsInvalid(
                [
                    content.RowError(
                        0, "recipients", _("give recipients or recipients_csv, not both")
                    )
                ],
                1,
            )
        if recipients_csv is not None:
            if not isinstance(recipients_csv, str):
                raise content.RecipientsInvalid(
                    [content.RowError(0, "recipients_csv", _("must be CSV text"))], 1
                )
            return content.parse_csv(recipients_csv, most=settings.BROADCAST_MAX_RECIPIENTS)
        if not isinstance(recipients, list):
            raise content.RecipientsInvalid(
                [content.RowError(0, "recipients", _("must be a list of recipients"))], 1
            )
        rows: list[tuple[int, object, object]] = []
        unknown: list[content.RowError] = []
        for number, item in enumerate(recipients, start=1):
            if isinstance(item, str):
                rows.append((number, item, {}))
            elif isinstance(item, dict):
                unknown.extend(_unknown_fields(number, item))
                rows.append((number, item.get("address"), item.get("variables")))
            else:
                rows.append((number, None, None))
        if unknown:
            raise content.RecipientsInvalid(unknown, len(unknown))
        return rows
    except content.RecipientsInvalid as exc:
        raise _rows_invalid(exc, recipients, recipients_csv) from None


def _rows_invalid(
    exc: content.RecipientsInvalid, recipients, recipients_csv
) -> errors.BroadcastRowsInvalid:
    return errors.BroadcastRowsInvalid(
        _("%(n)s recipient rows are invalid; nothing was saved.") % {"n": exc.total},
        rows=exc.errors,
        total=exc.total,
        # Both given is refused naming `recipients`; a CSV alone is named as the CSV it is.
        source="recipients_csv"
        if recipients_csv is not None and recipients is None
        else "recipients",
    )


RECIPIENT_FIELDS = frozenset({"address", "variables"})


def _unknown_fields(row: int, item: dict) -> list[content.RowError]:
    """A recipient object's fields besides its address and variables: refused, as every other
    field the API does not know is. Dropped, a recipient's "cc", or its variables under a
    misspelt name, were left out of the broadcast without a word."""
    return [
        content.RowError(
            row,
            name if content.is_variable_name(name) else "fields",
            _("%(name)s is not a field of a recipient (address, variables)")
            % {"name": repr(str(name)[:40])},
        )
        for name in item
        if name not in RECIPIENT_FIELDS
    ]


_DELETE_RECIPIENTS = "DELETE FROM {table} WHERE broadcast_id = %s"


def _delete_recipients(broadcast: Broadcast) -> None:
    """Every recipient row of the broadcast, in one statement. The ORM's ``delete()`` goes
    through its collector, because a send PROTECTs its recipient: it loaded every row and
    deleted them a hundred at a time, 100 statements for 10,000 recipients under the
    broadcast's lock. A broadcast still pending review has no sends, and the database's foreign
    key refuses the statement if a send names one of the rows all the same."""
    sql = _DELETE_RECIPIENTS.format(
        table=connection.ops.quote_name(BroadcastRecipient._meta.db_table)
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [broadcast.pk])


def _store_recipients(
    broadcast: Broadcast, recipients: list[content.Recipient], *, replace: bool
) -> None:
    """Store the broadcast's recipients (canonical order: by address) and its hashes;
    ``replace``: in place of those it holds."""
    ordered = sorted(recipients, key=lambda r: r.address)
    leaves = [content.leaf_hash(r.address, r.variables) for r in ordered]
    if replace:
        _delete_recipients(broadcast)
    BroadcastRecipient.objects.bulk_create(
        [
            BroadcastRecipient(
                broadcast=broadcast,
                tenant_id=broadcast.tenant_id,
                position=position,
                source_row=r.row,
                address=r.address,
                variables=r.variables,
                leaf_hash=leaf,
            )
            for position, (r, leaf) in enumerate(zip(ordered, leaves, strict=True))
        ],
        batch_size=2000,
    )
    broadcast.recipient_count = len(ordered)
    broadcast.recipients_digest = content.recipients_digest(leaves)
    broadcast.content_hash = content.broadcast_hash(
        mailbox_id=broadcast.mailbox_id,
        subject=broadcast.subject,
        text=broadcast.text,
        html=broadcast.html,
        digest=broadcast.recipients_digest,
        count=broadcast.recipient_count,
    )


def broadcast_create(
    *,
    tenant,
    mailbox,
    subject,
    text="",
    html="",
    recipients=None,
    recipients_csv=None,
    name="",
    rate_per_second=None,
    agent_token=None,
    actor_user=None,
) -> Broadcast:
    """A broadcast pending review, with all its recipients, after validating every row; any bad
    row refuses the whole upload (BroadcastRowsInvalid lists them) and nothing is written."""
    tenant = active_tenant(tenant)
    mailbox = tenant_mailbox(tenant, mailbox)
    if actor_user is not None:
        # A person posts only from a mailbox they may decide for (an agent: its token's scope).
        require_decider(tenant, actor_user, mailbox)
    if not mailbox.is_active:
        raise errors.MailboxInactive(
            message=_("%(address)s is not active.") % {"address": mailbox.address}
        )
    template = _clean_template(subject, text, html)
    subject, text, html = template[:3]
    rate = _clean_rate(rate_per_second)
    name = _clean_name(name)
    cleaned = _clean_rows(recipients, recipients_csv, template, mailbox)
    with transaction.atomic():
        require_standing(
            tenant,
            agent_token,
            mailbox_id=mailbox.pk,
            missing=errors.NotFound("mailbox_not_found", _("No such mailbox."), field="mailbox"),
        )
        require_active_mailbox(mailbox)
        if actor_user is not None:
            # Again in the writing transaction: the check above ran before the upload was read
            # (seconds for a long list), and an admin who took the right away meanwhile (a
            # deactivation, a demotion, the mailbox's right removed) did not stop the post.
            require_decider(tenant, actor_user, mailbox)
        broadcast = Broadcast.objects.create(
            tenant=tenant,
            mailbox=mailbox,
            agent_token=agent_token,
            created_by=actor_user,
            name=name,
            subject=subject,
            text=text,
            html=html,
            rate_per_second=rate,
        )
        _store_recipients(broadcast, cleaned, replace=False)
        broadcast.save(update_fields=["recipient_count", "recipients_digest", "content_hash"])
        journal(
            tenant=tenant,
            broadcast=broadcast,
            action="broadcast.created",
            actor_kind=IntentEvent.Actor.AGENT if agent_token else IntentEvent.Actor.PERSON,
            actor_user=actor_user,
            actor_token=agent_token,
            to_state=State.PENDING_REVIEW,
            data={"recipients": broadcast.recipient_count, "content_hash": broadcast.content_hash},
        )
    log.info(
        "intents.broadcast.created",
        extra={"tenant_id": tenant.pk, "broadcast_id": broadcast.pk},
    )
    return broadcast


def lock_broadcast(tenant, broadcast_id) -> Broadcast:
    return lock_in_tenant(Broadcast, tenant, broadcast_id, _("No such broadcast."))


def broadcast_replace_recipients(
    *, tenant, broadcast_id, recipients=None, recipients_csv=None, agent_token=None, actor_user=None
) -> Broadcast:
    """New recipients for a broadcast still pending review (its hash changes, so an approval
    form opened before no longer matches). Refused once approved: what each customer receives
    is fixed at approval."""
    tenant = active_tenant(tenant)
    with transaction.atomic():
        broadcast = lock_broadcast(tenant, broadcast_id)
        require_standing(
            tenant,
            agent_token,
            mailbox_id=broadcast.mailbox_id,
            missing=errors.NotFound("not_found", _("No such broadcast.")),
        )
        require_broadcast_state(broadcast, {State.PENDING_REVIEW}, to_person=agent_token is None)
        if agent_token is not None and broadcast.created_by_id is not None:
            # A person's broadcast stays theirs: the page names no author and four-eyes takes
            # the person for the author of every row, so a list an agent swapped in was
            # approved by a colleague as the person's.
            raise errors.NoRight(
                "broadcast_posted_by_person",
                _(
                    "A person posted this broadcast: an agent may replace the recipients only "
                    "of a broadcast an agent posted."
                ),
            )
        template = _clean_template(broadcast.subject, broadcast.text, broadcast.html)
        cleaned = _clean_rows(recipients, recipients_csv, template, broadcast.mailbox)
        before = broadcast.content_hash
        _store_recipients(broadcast, cleaned, replace=True)
        broadcast.save(
            update_fields=["recipient_count", "recipients_digest", "content_hash", "updated_at"]
        )
        journal(
            tenant=tenant,
            broadcast=broadcast,
            action="broadcast.recipients_replaced",
            actor_kind=IntentEvent.Actor.AGENT if agent_token else IntentEvent.Actor.PERSON,
            actor_user=actor_user,
            actor_token=agent_token,
            from_state=State.PENDING_REVIEW,
            to_state=State.PENDING_REVIEW,
            data={
                "recipients": broadcast.recipient_count,
                "content_hash": broadcast.content_hash,
                "previous_hash": before,
            },
        )
    return broadcast


def require_broadcast_state(
    broadcast: Broadcast, allowed: set[str], *, to_person: bool = True
) -> None:
    """Refused unless the broadcast is in one of ``allowed``. To a person (``to_person``), the
    refusal names the colleague whose decision moved it last and when: the second of two
    cancellations was told only "This broadcast is cancelled."; an agent is not told names."""
    if broadcast.state in allowed:
        return
    state = broadcast.get_state_display().lower()
    first = person_who_acted(broadcast=broadcast, actions=_DECIDED) if to_person else None
    if first is None:
        raise errors.NotPending(
            "broadcast_state", _("This broadcast is %(state)s.") % {"state": state}
        )
    message = str(_DECIDED[first["action"]]) % first
    if first["to_state"] != broadcast.state:
        now = _("It is %(state)s now.") % {"state": state}
        message = f"{message} {now}"
    raise errors.NotPending("broadcast_state", message)


# A person's decisions on a broadcast, as a refusal that lost to one says it.
_DECIDED = {
    "broadcast.approved": gettext_lazy("%(who)s approved this broadcast at %(when)s."),
    "broadcast.rejected": gettext_lazy("%(who)s rejected this broadcast at %(when)s."),
    "broadcast.paused": gettext_lazy("%(who)s paused this broadcast at %(when)s."),
    "broadcast.resumed": gettext_lazy("%(who)s resumed this broadcast at %(when)s."),
    "broadcast.cancelled": gettext_lazy("%(who)s cancelled this broadcast at %(when)s."),
    "broadcast.approval_undone": gettext_lazy(
        "%(who)s undid the approval of this broadcast at %(when)s."
    ),
}


def require_broadcast_approver(tenant, broadcast: Broadcast, actor) -> dict:
    """Refused unless ``actor`` may approve for the broadcast's mailbox; the right that allows
    it, as the approval's journal row keeps it (``draft_approve`` keeps the same)."""
    membership = active_membership(tenant=tenant, user=actor)
    if not can_approve(membership=membership, mailbox=broadcast.mailbox):
        raise errors.NoRight(
            message=_("You may not approve sends from %(address)s.")
            % {"address": broadcast.mailbox.address}
        )
    assert membership is not None  # can_approve refuses None
    return {
        "email": membership.user.email,
        "role": membership.role,
        "all_mailboxes": membership.approve_all_mailboxes,
    }


def recomputed_hash(broadcast: Broadcast) -> str:
    """The broadcast's hash from its stored template and every stored recipient row (leaves
    recomputed from the rows, not read from them)."""
    rows = BroadcastRecipient.objects.filter(broadcast=broadcast).order_by("position")
    leaves = [
        content.leaf_hash(address, variables)
        for address, variables in rows.values_list("address", "variables").iterator(2000)
    ]
    return content.broadcast_hash(
        mailbox_id=broadcast.mailbox_id,
        subject=broadcast.subject,
        text=broadcast.text,
        html=broadcast.html,
        digest=content.recipients_digest(leaves),
        count=len(leaves),
    )


def broadcast_approve(*, tenant, broadcast_id, content_hash, actor) -> Broadcast:
    """Approve exactly the broadcast the approver saw (its hash), once. The fan-out into one send
    per recipient starts after the commit, or when the tenant's undo window ends (``hold_until``;
    ``broadcast_undo`` takes the approval back until then)."""
    tenant = active_tenant(tenant)
    with transaction.atomic():
        broadcast = lock_broadcast(tenant, broadcast_id)
        require_standing(tenant, None)
        require_broadcast_state(broadcast, {State.PENDING_REVIEW})
        right = require_broadcast_approver(tenant, broadcast, actor)
        require_active_mailbox(broadcast.mailbox)
        if broadcast_needs_another_approver(tenant=tenant, broadcast=broadcast, user=actor):
            raise errors.SecondApproverRequired(
                message=_("Someone other than its author must approve this broadcast.")
            )
        if content_hash != broadcast.content_hash or content_hash != recomputed_hash(broadcast):
            raise errors.StaleVersion(
                message=_(
                    "The broadcast changed since you opened it. Review it again before approving."
                )
            )
        now = db_now()
        # The tenant's undo window, fixed here: a later change of the setting does not move it.
        # The fan-out makes no send before it ends (broadcast_fan_out_page).
        hold = tenant.send_hold_seconds
        hold_until = now + timedelta(seconds=hold) if hold else None
        Broadcast.objects.filter(pk=broadcast.pk, state=State.PENDING_REVIEW).update(
            state=State.APPROVED,
            approved_by=actor,
            approved_at=now,
            approved_hash=content_hash,
            hold_until=hold_until,
            decided_by=actor,
            updated_at=Now(),
        )
        journal(
            tenant=tenant,
            broadcast=broadcast,
            action="broadcast.approved",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=State.PENDING_REVIEW,
            to_state=State.APPROVED,
            data={
                "content_hash": content_hash,
                "recipients": broadcast.recipient_count,
                **({"hold_until": hold_until.isoformat()} if hold_until else {}),
                **right,
            },
        )
        transaction.on_commit(lambda: enqueue_fan_out(broadcast.pk))
    log.info(
        "intents.broadcast.approved", extra={"tenant_id": tenant.pk, "broadcast_id": broadcast.pk}
    )
    broadcast.refresh_from_db()
    return broadcast


def enqueue_fan_out(broadcast_id: int) -> None:
    """Wake a worker for the fan-out. Losing this is harmless: the sweep resumes it."""
    try:
        from django_q.tasks import async_task

        async_task(
            "intents.tasks.fan_out_broadcast",
            broadcast_id,
            task_name=f"broadcast-{broadcast_id}",
        )
    except Exception:
        log.exception("intents.broadcast.enqueue_failed", extra={"broadcast_id": broadcast_id})


def broadcast_reject(
    *, tenant, broadcast_id, actor, reason, content_hash: str | None = None
) -> Broadcast:
    """``content_hash``: the content the person's page showed (None: no page asked, a command
    or a test). A rejection from a page opened before the recipients were replaced is refused:
    it would reject a list nobody read, and the agent would read the reason as said of it."""
    tenant = active_tenant(tenant)
    reason = clean_reason(reason, required=True)
    with transaction.atomic():
        broadcast = lock_broadcast(tenant, broadcast_id)
        require_standing(tenant, None)
        require_broadcast_state(broadcast, {State.PENDING_REVIEW})
        require_broadcast_approver(tenant, broadcast, actor)
        if content_hash is not None and content_hash != broadcast.content_hash:
            raise errors.StaleVersion(
                message=_(
                    "The broadcast changed since you opened it. Review it again before "
                    "rejecting; nothing was rejected."
                )
            )
        Broadcast.objects.filter(pk=broadcast.pk, state=State.PENDING_REVIEW).update(
            state=State.REJECTED, decided_by=actor, reject_reason=reason, updated_at=Now()
        )
        journal(
            tenant=tenant,
            broadcast=broadcast,
            action="broadcast.rejected",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=actor,
            from_state=State.PENDING_REVIEW,
            to_state=State.REJECTED,
            reason=reason,
            # The list and template the reason was written about, as a draft's rejection names
            # its version: an agent may have replaced the list several times before.
            data={"content_hash": broadcast.content_hash},
        )
    broadcast.refresh_from_db()
    return broadcast
