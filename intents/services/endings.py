"""A pending draft's end without a send: rejected by a person, withdrawn by its agent, expired at
its review deadline."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from config.clock import db_now
from intents import errors
from intents.journal import journal
from intents.models import Draft, DraftVersion, IntentEvent
from intents.policy import active_membership, can_approve
from intents.services.common import (
    UNHELD,
    active_tenant,
    clean_reason,
    lock_draft,
    require_pending,
    require_standing,
    stale_refusal,
)
from intents.services.drafts import draft_author, no_draft

log = logging.getLogger("intents.services")


def _stale_rejection(draft: Draft, version) -> errors.StaleVersion:
    """The refusal of a rejection of a version that is not current. When the current version is
    a colleague's undo or reopen of the very version the page showed, that is what it says, with
    who and when, as draft_approve does: "the draft changed", over a diff that showed no
    difference, named nobody."""
    return stale_refusal(
        draft,
        version,
        changed=_(
            "The draft changed since you opened it: version %(n)s is current. "
            "Review it again before rejecting."
        ),
        undone=_(
            "%(who)s undid the approval of version %(seen)s at %(when)s: version %(n)s is the "
            "same text, back in review. Ask them why before rejecting it."
        ),
        reopened=_(
            "%(who)s put version %(seen)s back in review at %(when)s, after its send did not go "
            "out: version %(n)s is the same text. Read their reason in the journal, then "
            "reject version %(n)s if you still mean to."
        ),
    )


def draft_reject(*, tenant, draft_id, reason, actor, version=None) -> Draft:
    """Reject a pending draft. ``version``: the version the reviewer's page showed; a version
    added since (the agent's revision, a colleague's edit) refuses the rejection under the
    draft's lock, as it refuses an approval: the reason was written about another text, and the
    new one has not been read. The journal names the version rejected."""
    tenant = active_tenant(tenant)
    reason = clean_reason(reason, required=True)
    with transaction.atomic():
        draft = lock_draft(tenant, draft_id)
        require_standing(tenant, None)
        require_pending(draft)
        membership = active_membership(tenant=tenant, user=actor)
        if not can_approve(membership=membership, mailbox=draft.mailbox):
            raise errors.NoRight(
                message=_("You may not decide on drafts of %(address)s.")
                % {"address": draft.mailbox.address}
            )
        if version is not None and str(version) != str(draft.current_version):
            raise _stale_rejection(draft, version)
        rejected = DraftVersion.objects.get(draft=draft, number=draft.current_version)
        Draft.objects.filter(pk=draft.pk).update(
            status=Draft.Status.REJECTED,
            reject_reason=reason,
            **UNHELD,
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
            data={"version": rejected.number, "content_hash": rejected.content_hash},
        )
    draft.refresh_from_db()
    return draft


def draft_withdraw(*, tenant, draft_id, agent_token=None, actor_user=None) -> Draft:
    tenant = active_tenant(tenant)
    with transaction.atomic():
        draft = lock_draft(tenant, draft_id)
        # Before the draft's state, as ``draft_add_version`` does.
        require_standing(tenant, agent_token, mailbox_id=draft.mailbox_id, missing=no_draft())
        require_pending(draft)
        _fields, actor_fields = draft_author(tenant, draft.mailbox, agent_token, actor_user)
        Draft.objects.filter(pk=draft.pk).update(
            status=Draft.Status.WITHDRAWN, decided_at=Now(), updated_at=Now(), **UNHELD
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
    """Expire pending drafts past their review deadline or their send-by time (``not_after``:
    no approval could send them any more), on the database clock. Safe on every cluster: rows
    another sweep holds are skipped, and the status guard makes a repeat a no-op."""
    expired = 0
    with transaction.atomic():
        due = list(
            Draft.objects.select_for_update(skip_locked=True)
            .filter(status=Draft.Status.PENDING)
            .filter(Q(review_deadline__lte=Now()) | Q(not_after__lte=Now()))
            .values_list("pk", "tenant_id", "review_deadline")[:batch]
        )
        now = db_now()
        for draft_id, tenant_id, review_deadline in due:
            changed = Draft.objects.filter(pk=draft_id, status=Draft.Status.PENDING).update(
                status=Draft.Status.EXPIRED, decided_at=Now(), updated_at=Now(), **UNHELD
            )
            if changed:
                expired += 1
                by_deadline = review_deadline is not None and review_deadline <= now
                journal(
                    tenant=tenant_id,
                    draft=draft_id,
                    action="draft.expired",
                    actor_kind=IntentEvent.Actor.SWEEP,
                    from_state=Draft.Status.PENDING,
                    to_state=Draft.Status.EXPIRED,
                    reason=(
                        "review deadline passed"
                        if by_deadline
                        else "send-by time (not_after) passed"
                    ),
                    # For an agent to branch on (the draft.expired event's code).
                    data={"code": "review_deadline_passed" if by_deadline else "not_after_passed"},
                )
    return expired
