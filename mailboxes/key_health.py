"""Whether AgentMail accepts a mailbox's key: marked refused by the send worker on the first
refusal (``mailbox_key_refused``), cleared by an admin's "check again" (``mailbox_key_check``)
or by giving the mailbox a new key (``mailbox_key_replace``: a key deleted or leaked at AgentMail
never works again, so checking it again cannot help).

While a mailbox's key is refused the worker makes no call with it (intents.sending: the claim
skips the mailbox's sends, which wait queued or uncertain with their idempotency keys), so one
refused call costs one call, not one per queued send, and nothing is failed for what is the
key's fault. The refusal is a fact about one key: it is recorded only while the mailbox still
has the key that was refused, and a check clears it only for the key it checked.
"""

from __future__ import annotations

import logging
import uuid

from django.db import transaction
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from mailboxes import provider
from mailboxes.models import Mailbox
from mailboxes.provisioning import (
    ProvisioningError,
    audit,
    delete_unstored_inbox_keys,
    inbox_key_name,
    provisioning_lease,
)
from tenants.models import AuditEvent, Tenant
from tenants.services import require_admin

log = logging.getLogger("mailboxes.key_health")


def inbox_gone(mailbox: Mailbox) -> bool:
    """Whether AgentMail, asked with the organization key, answers 404 for the mailbox's inbox
    (a refused key's 404 may be the scope's; a timeout or 5xx is no answer: False)."""
    try:
        return not provider.inbox_exists(inbox_id=mailbox.inbox_id)
    except provider.ProviderError:
        return False


def inbox_gone_message(tenant: Tenant, mailbox: Mailbox) -> str:
    return _(
        "AgentMail no longer has the inbox %(address)s: it was deleted there, and no key will "
        "work for it. Its sends wait; none is sent or failed. Make the inbox again (the button "
        "on the mailbox page, or an operator: python manage.py agentmail_recover %(tenant)s "
        "--mailbox %(address)s)."
    ) % {"address": mailbox.address, "tenant": tenant.slug}


def mailbox_key_refused(*, mailbox_id: int, api_key_id: str, detail: str) -> bool:
    """Mark the mailbox's key refused by AgentMail (``detail``: the answer, no secret), with an
    audit row, unless it is marked already or the mailbox has another key by now. In the
    caller's transaction when there is one (the worker records the refused send in the same).
    True when this call marked it."""
    with transaction.atomic():
        tenant_id = (
            Mailbox.objects.select_for_update()
            .filter(pk=mailbox_id, key_refused_at__isnull=True, provider_api_key_id=api_key_id)
            .values_list("tenant_id", flat=True)
            .first()
        )
        if tenant_id is None:
            return False
        Mailbox.objects.filter(pk=mailbox_id).update(
            key_refused_at=Now(), key_refused_detail=detail[:300]
        )
        AuditEvent.objects.create(
            tenant_id=tenant_id,
            actor=None,
            action="mailbox.key_refused",
            object_type="mailbox",
            object_id=str(mailbox_id),
            data={"api_key_id": api_key_id, "detail": detail[:300]},
        )
        extra = {"mailbox_id": mailbox_id, "tenant_id": tenant_id, "api_key_id": api_key_id}
        transaction.on_commit(lambda: log.warning("mailboxes.mailbox.key_refused", extra=extra))
    return True


def mailbox_key_check(*, tenant: Tenant, mailbox_id: int, actor) -> Mailbox:
    """An admin's "check again": one harmless read with the mailbox's key (no transaction open);
    if AgentMail accepts it, the refusal is cleared (audited) and the mailbox's waiting sends are
    due again, each with its own idempotency key. Raises ProvisioningError, changing nothing,
    when AgentMail still refuses the key or cannot be asked."""
    with transaction.atomic():
        require_admin(tenant, actor)
    mailbox = Mailbox.objects.get(tenant=tenant, pk=mailbox_id)
    if not mailbox.key_refused:
        raise ProvisioningError(_("AgentMail has not refused this mailbox's key."))
    api_key_id = mailbox.provider_api_key_id
    answer = provider.check_key(api_key=mailbox.api_key(), inbox_id=mailbox.inbox_id)
    if not answer.ok:
        error = f"{answer.http_status or '-'} {answer.error_code}"
        # A list of the inbox's messages answers 404 only for the inbox itself.
        if provider.refuses_key(answer.http_status, answer.error_code, "inbox"):
            if inbox_gone(mailbox):
                raise ProvisioningError(inbox_gone_message(tenant, mailbox))
            raise ProvisioningError(
                _(
                    "AgentMail still refuses the key of %(address)s (%(error)s). Its sends keep "
                    "waiting; replace the key to give the mailbox a new one, or check again once "
                    "this one works."
                )
                % {"address": mailbox.address, "error": error}
            )
        raise ProvisioningError(
            _("AgentMail could not be asked (%(error)s); nothing changed. Try again shortly.")
            % {"error": error}
        )
    with transaction.atomic():
        require_admin(tenant, actor)
        cleared = Mailbox.objects.filter(
            pk=mailbox.pk, key_refused_at__isnull=False, provider_api_key_id=api_key_id
        ).update(key_refused_at=None, key_refused_detail="")
        if cleared:
            audit(
                tenant=tenant,
                actor=actor,
                action="mailbox.key_restored",
                obj=mailbox,
                data={"api_key_id": api_key_id},
            )
    if cleared:
        log.info(
            "mailboxes.mailbox.key_restored",
            extra={"mailbox_id": mailbox.pk, "tenant_id": tenant.pk, "api_key_id": api_key_id},
        )
    mailbox.refresh_from_db()
    return mailbox


def mailbox_key_replace(*, tenant: Tenant, mailbox_id: int, actor) -> Mailbox:
    """An admin's "Replace the key": under the mailbox's provisioning lease, AgentMail makes a
    new inbox-scoped key (organisation key, a name of its own), one transaction stores it sealed
    and clears a refusal (audited, key ids only), and after that commit every other key named for
    the mailbox is deleted at AgentMail: the replaced one and any a dead run left behind.

    A crash anywhere leaves the mailbox a stored key that worked when stored: before the commit
    the old one (the new key is a leftover the next replace deletes), after it the new one (the
    old key is the leftover). Sends prepared with the old key and refused after the delete are
    not the new key's refusal (``mailbox_key_refused`` compares key ids): they go out again with
    the new key, each with its own idempotency key. Raises ProvisioningError, changing nothing,
    when AgentMail cannot make the key; and, the new key stored, when it cannot delete the old."""
    with transaction.atomic():
        require_admin(tenant, actor)
    mailbox = Mailbox.objects.get(tenant=tenant, pk=mailbox_id)
    if not mailbox.inbox_id or not mailbox.api_key_sealed:
        raise ProvisioningError(
            _("%(address)s has no key to replace yet: retry its provisioning instead.")
            % {"address": mailbox.address}
        )
    with provisioning_lease(mailbox):
        mailbox.refresh_from_db()
        old_key_id = mailbox.provider_api_key_id
        name = f"{inbox_key_name(mailbox.pk)}-{uuid.uuid4().hex[:12]}"
        try:
            created = provider.create_inbox_key(inbox_id=mailbox.inbox_id, name=name)
        except provider.ProviderError as exc:
            if exc.status == 404 and inbox_gone(mailbox):
                raise ProvisioningError(inbox_gone_message(tenant, mailbox)) from None
            raise ProvisioningError(
                _("AgentMail made no new key for %(address)s (%(error)s); nothing changed.")
                % {"address": mailbox.address, "error": exc}
            ) from None
        stored = _store_replacement(tenant, mailbox, old_key_id, created, actor)
        deleted, cleanup_error = _delete_replaced(mailbox)
    if not stored:
        raise ProvisioningError(
            _("The key of %(address)s changed meanwhile; nothing was replaced.")
            % {"address": mailbox.address}
        )
    extra = {"mailbox_id": mailbox.pk, "tenant_id": tenant.pk, "api_key_id": created.api_key_id}
    log.info("mailboxes.mailbox.key_replaced", extra={**extra, "deleted_api_key_ids": deleted})
    if cleanup_error is not None:
        log.warning("mailboxes.mailbox.key_cleanup_failed", extra={**extra, "error": cleanup_error})
        raise ProvisioningError(
            _(
                "%(address)s sends with its new key, but AgentMail did not delete the old one "
                "(%(error)s): it may still work. Replace the key again to delete it."
            )
            % {"address": mailbox.address, "error": cleanup_error}
        )
    mailbox.refresh_from_db()
    return mailbox


def _store_replacement(
    tenant: Tenant, mailbox: Mailbox, old_key_id: str, created: provider.CreatedKey, actor
) -> bool:
    """Store the new key in place of ``old_key_id`` (only if the mailbox still has that one)."""
    with transaction.atomic():
        require_admin(tenant, actor)
        stored = Mailbox.objects.filter(pk=mailbox.pk, provider_api_key_id=old_key_id).update(
            api_key_sealed=mailbox.seal_api_key(created.api_key),
            provider_api_key_id=created.api_key_id,
            key_refused_at=None,
            key_refused_detail="",
        )
        if stored:
            audit(
                tenant=tenant,
                actor=actor,
                action="mailbox.key_replaced",
                obj=mailbox,
                data={"old_api_key_id": old_key_id, "api_key_id": created.api_key_id},
            )
    return bool(stored)


def _delete_replaced(mailbox: Mailbox) -> tuple[list[str], str | None]:
    """The keys deleted, or the AgentMail error that stopped the deleting (the new key is
    stored by then: the error is the caller's to report, not to undo)."""
    try:
        return delete_unstored_inbox_keys(mailbox_id=mailbox.pk, inbox_id=mailbox.inbox_id), None
    except provider.ProviderError as exc:
        return [], str(exc)
