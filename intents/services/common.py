"""What every intents service shares: the tenant and row guards, reasons, waking a worker."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC

from django.db import connection
from django.utils.translation import gettext as _

from common.text import unsafe_in_text
from intents import errors
from intents.models import Draft, IntentEvent, SendIntent
from intents.policy import active_membership, can_approve
from mailboxes.models import Mailbox
from tenants.models import Tenant
from tenants.templatetags.zones import zoned
from tenants.tokens import token_standing

log = logging.getLogger("intents.services")

MAX_REASON = 2_000
# What a draft leaving pending drops (its holder and claim), in the UPDATE that moves it.
UNHELD: dict = {"assignee": None, "assigned_how": "", "claim_expires_at": None}


def enqueue_execution(intent_id: int, *, held: bool = False) -> None:
    """Wake a worker for this intent (``held``: once its undo window ends). Losing this is
    harmless: the sweep finds every due intent."""
    try:
        from django_q.tasks import async_task

        task = "intents.tasks.execute_intent_after_hold" if held else "intents.tasks.execute_intent"
        async_task(task, intent_id, task_name=f"intent-{intent_id}")
    except Exception:
        log.exception("intents.intent.enqueue_failed", extra={"intent_id": intent_id})


def active_tenant(tenant) -> Tenant:
    current = Tenant.objects.filter(pk=tenant.pk).first()
    if current is None:
        raise errors.NotFound("not_found", _("No such tenant."))
    if not current.is_active:
        raise errors.TenantInactive(message=_("This tenant is suspended; nothing can be changed."))
    return current


def require_live_token(
    agent_token, *, mailbox_id: int | None, missing: errors.NotFound | None
) -> None:
    """Refuse an agent's write when its token was revoked or expired (401 ``token_revoked``) or
    its tenant suspended (403 ``tenant_inactive``) since the request was authenticated or the
    tenant was read, and, given ``mailbox_id``, when the token's mailbox restriction no longer
    reaches that mailbox (``missing``: the 404 a missing row gets, so a restricted token learns
    nothing of others). Every agent write calls it inside its transaction, with the row it
    writes locked, before writing and before judging that row's state; from then on a
    revocation or a suspension waits for the write (``tenants.tokens.token_standing``). The
    request's token object is of its start: its ``all_mailboxes`` held after a restriction
    committed since. None: a person acts."""
    if agent_token is None:
        return
    if mailbox_id is None or missing is None:
        raise RuntimeError("an agent's write names the mailbox it writes to, and its 404")
    standing = token_standing(agent_token.pk, mailbox_id=mailbox_id)
    if not standing.live:
        raise errors.TokenRevoked(message=_("This agent token has been revoked or has expired."))
    if not standing.tenant_active:
        raise errors.TenantInactive(message=_("This tenant is suspended; nothing can be changed."))
    if not standing.reaches:
        raise missing


def require_standing(
    tenant, agent_token, *, mailbox_id: int | None = None, missing: errors.NotFound | None = None
) -> None:
    """``require_live_token`` for an agent's write (``mailbox_id`` and ``missing``: see there);
    for a person's, the tenant read again, FOR KEY SHARE, in the writing transaction:
    ``active_tenant`` read it before, and a suspension committed while the write waited (for a
    draft's lock, or for the suspension's own row lock at the journal row's foreign key) let a
    person's write into the suspended tenant, answered as done. From this read on a suspension
    (FOR UPDATE, ``tenants.onboarding``) waits for the write; KEY SHARE is the lock the write's
    rows take on the tenant anyway."""
    if agent_token is not None:
        require_live_token(agent_token, mailbox_id=mailbox_id, missing=missing)
        return
    if key_share(Tenant, tenant.pk, "status") != Tenant.Status.ACTIVE:
        raise errors.TenantInactive(message=_("This tenant is suspended; nothing can be changed."))


def require_active_mailbox(mailbox, *, field: str | None = None) -> None:
    """The mailbox's status read again, FOR KEY SHARE, in the writing transaction. Read before
    it (or in a statement that then waited for a row lock, whose snapshot predates the wait), a
    disable committed meanwhile let a draft or a broadcast into the disabled mailbox, or a
    broadcast be approved there. A disable in flight (FOR UPDATE,
    ``mailboxes.provisioning.mailbox_set_status``) is now waited for and seen; a later one waits
    for the write. KEY SHARE is the lock the write's own rows take on the mailbox anyway."""
    if key_share(Mailbox, mailbox.pk, "status") != Mailbox.Status.ACTIVE:
        raise errors.MailboxInactive(
            message=_("%(address)s is not active.") % {"address": mailbox.address}, field=field
        )


_KEY_SHARE = "SELECT {column} FROM {table} WHERE id = %s FOR KEY SHARE"


def key_share(model, pk: int, column: str):
    """``column`` of one row, read FOR KEY SHARE in the caller's transaction (None: no such
    row); the ORM has no KEY SHARE lock."""
    if not connection.in_atomic_block:
        raise RuntimeError("key_share must run inside the writing transaction")
    sql = _KEY_SHARE.format(
        column=connection.ops.quote_name(column),
        table=connection.ops.quote_name(model._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [pk])
        row = cursor.fetchone()
    return None if row is None else row[0]


def tenant_mailbox(tenant, mailbox) -> Mailbox:
    mailbox_id = getattr(mailbox, "pk", mailbox)
    try:
        mailbox_id = int(mailbox_id)
    except (TypeError, ValueError):
        raise errors.NotFound("mailbox_not_found", _("No such mailbox."), field="mailbox") from None
    found = Mailbox.objects.filter(tenant=tenant, pk=mailbox_id).first()
    if found is None:
        raise errors.NotFound("mailbox_not_found", _("No such mailbox."), field="mailbox")
    return found


def lock_in_tenant(model, tenant, pk, missing: str, *, no_key: bool = False):
    """Lock one row of the tenant; another tenant's id and a missing or malformed one give the
    same NotFound. ``no_key``: FOR NO KEY UPDATE, which a transaction whose new rows name this
    one (a KEY SHARE lock, taken as it commits) does not wait for."""
    try:
        pk = int(pk)
    except (TypeError, ValueError):
        raise errors.NotFound("not_found", missing) from None
    row = (
        model.objects.select_for_update(of=("self",), no_key=no_key)
        .select_related("mailbox")
        .filter(tenant=tenant, pk=pk)
        .first()
    )
    if row is None:
        raise errors.NotFound("not_found", missing)
    return row


def lock_draft(tenant, draft_id, *, no_key: bool = False) -> Draft:
    return lock_in_tenant(Draft, tenant, draft_id, "No such draft.", no_key=no_key)


def require_pending(draft: Draft) -> None:
    if draft.status != Draft.Status.PENDING:
        raise not_pending(draft)


def not_pending(draft: Draft) -> errors.NotPending:
    """The refusal for a draft that left review, naming what happened: its status, the version
    decided and when (UTC, ISO 8601: the agent API says it as it is). Who decided rides along for
    the staff pages, which say it in their reader's words and zone; an agent is not told names."""
    status = draft.get_status_display().lower()
    if not draft.decided_at:
        return errors.NotPending(
            message=_("This draft is already %(status)s.") % {"status": status}
        )
    when = draft.decided_at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    values = {"status": status, "version": draft.current_version, "when": when}
    if draft.status == Draft.Status.APPROVED:
        message = (
            _("This draft is already approved: version %(version)s was approved at %(when)s.")
            % values
        )
    elif draft.status == Draft.Status.REJECTED:
        message = (
            _("This draft is already rejected: version %(version)s was rejected at %(when)s.")
            % values
        )
    else:
        message = _("This draft is already %(status)s (since %(when)s).") % values
    return errors.NotPending(
        message=message,
        state=draft.status,
        version=draft.current_version,
        decided_at=draft.decided_at,
        decided_by=draft.decided_by,
    )


def copied_back_into_review(draft: Draft, base_version) -> IntentEvent | None:
    """The journal row (an undone approval, a reopen) whose copy of ``base_version`` is the
    draft's current version; None when the current version is anyone's new text. The copy is
    what an undo and a reopen must make (one send per version), not an edit: an author or an
    approver told that the draft changed looks for changes that are not there."""
    return (
        IntentEvent.objects.filter(
            draft=draft,
            action__in=("draft.approval_undone", "draft.reopened"),
            data__version=draft.current_version,
            data__copied_from_version=base_version,
        )
        .select_related("actor_user")
        .order_by("-id")
        .first()
    )


def stale_refusal(
    draft: Draft, seen, *, changed: str, undone: str, reopened: str, may_be_copy: bool = True
) -> errors.StaleVersion:
    """The refusal of a decision (draft_approve, draft_reject) on version ``seen``, no longer
    current. When the current version is a colleague's undo or reopen of it
    (``copied_back_into_review``), ``undone`` or ``reopened`` says so with who and when ("the draft
    changed", over a diff that showed no difference, named nobody); else ``changed``. Each
    message takes %(n)s (the current version); the two others %(who)s, %(seen)s and %(when)s.
    ``may_be_copy``: False when the caller knows the current text differs from what it saw."""
    seen = str(seen)
    copy = (
        copied_back_into_review(draft, int(seen))
        if may_be_copy and seen.isascii() and seen.isdigit()
        else None
    )
    if copy is None:
        return errors.StaleVersion(message=changed % {"n": draft.current_version})
    message = undone if copy.action == "draft.approval_undone" else reopened
    values = {
        "who": copy.actor_user.display_name if copy.actor_user else _("Someone"),
        "seen": seen,
        "n": draft.current_version,
        "when": zoned(copy.created_at, "j M, H:i"),
    }
    return errors.StaleVersion("approval_taken_back", message % values)


def person_who_acted(*, actions: Iterable[str], intent=None, broadcast=None) -> dict | None:
    """Who (their display name) and when (in the reader's zone, as ``stale_refusal`` says it)
    the latest of ``actions`` was journaled by a person on ``intent`` or ``broadcast``, and
    which action it was; None when no person did. What a refusal of a decision that lost a race
    names: the colleague who decided first, not only the state they left."""
    rows = IntentEvent.objects.filter(
        action__in=list(actions), actor_kind=IntentEvent.Actor.PERSON, actor_user__isnull=False
    )
    if intent is not None:
        rows = rows.filter(intent_id=getattr(intent, "pk", intent))
    if broadcast is not None:
        rows = rows.filter(broadcast_id=getattr(broadcast, "pk", broadcast))
    row = rows.select_related("actor_user").order_by("-id").first()
    if row is None or row.actor_user is None:
        return None
    return {
        "action": row.action,
        "to_state": row.to_state,
        "who": row.actor_user.display_name,
        "when": zoned(row.created_at, "j M, H:i"),
    }


def require_nothing_sent(draft: Draft) -> None:
    """Refuse when a send of the draft was accepted (call with the draft locked): a reopened
    draft whose earlier send a person then proved sent (``intent_resolve_accepted``) is pending
    again, but its reply went out and no approval of it can send anything more."""
    if SendIntent.objects.filter(draft=draft, state=SendIntent.State.ACCEPTED).exists():
        raise errors.NotPending(
            "already_sent", _("An earlier send of this draft was accepted: it went out.")
        )


def clean_reason(reason, *, required: bool) -> str:
    reason = (reason or "") if isinstance(reason, str | None) else ""
    # LF line endings: a browser posts a reason box's line breaks as CRLF, while the box's
    # maxlength (MAX_REASON) counts each as one character (as clean_note does).
    reason = reason.replace("\r\n", "\n").replace("\r", "\n").strip()
    if required and not reason:
        raise errors.InvalidInput("reason_required", _("Please give a reason."), "reason")
    if len(reason) > MAX_REASON:
        raise errors.InvalidInput(
            "reason_too_long",
            _("The reason is longer than %(n)s characters.") % {"n": MAX_REASON},
            "reason",
        )
    # Callers past a form (a view reading POST, the agent API) get no NUL check from Django, and
    # PostgreSQL refuses both of these in text.
    if "\x00" in reason:
        raise errors.InvalidInput(
            "reason_unstorable", _("A reason cannot hold NUL characters."), "reason"
        )
    if not reason.isascii():
        try:
            reason.encode("utf-8")
        except UnicodeEncodeError:
            raise errors.InvalidInput(
                "reason_unstorable",
                _("A reason cannot hold unpaired UTF-16 surrogates."),
                "reason",
            ) from None
    # Others read it (the journal, the agent reads a reject reason): a control character or a
    # bidirectional control makes it show as other words (common.text.unsafe_in_text).
    if found := unsafe_in_text(reason):
        raise errors.InvalidInput(
            "reason_invalid",
            _("A reason cannot hold the control character %(character)s.") % {"character": found},
            "reason",
        )
    return reason


def lock_intent(tenant, intent_id) -> SendIntent:
    return lock_in_tenant(SendIntent, tenant, intent_id, "No such send.")


def lock_draft_of_intent(tenant, intent_id) -> None:
    """Lock the draft of a reply's send (none for a broadcast's), before the send itself: the
    order ``draft_reopen`` and ``intent_undo`` lock in. FOR NO KEY UPDATE: an approval of the
    draft (FOR UPDATE) and this wait for each other; a worker whose journal row names the draft
    (a KEY SHARE lock) waits for neither."""
    try:
        pk = int(intent_id)
    except (TypeError, ValueError):
        return  # lock_intent answers NotFound
    draft_id = (
        SendIntent.objects.filter(tenant=tenant, pk=pk).values_list("draft_id", flat=True).first()
    )
    if draft_id is not None:
        list(
            Draft.objects.select_for_update(no_key=True)
            .filter(tenant=tenant, pk=draft_id)
            .values_list("pk", flat=True)
        )


def require_decider(tenant, actor, mailbox) -> None:
    membership = active_membership(tenant=tenant, user=actor)
    if not can_approve(membership=membership, mailbox=mailbox):
        raise errors.NoRight(
            message=_("You may not decide on sends from %(address)s.")
            % {"address": mailbox.address}
        )
