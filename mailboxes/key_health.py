"""Whether AgentMail accepts a mailbox's key: marked refused by the send worker on the first
refusal (``mailbox_key_refused``), cleared by an admin's "check again" (``mailbox_key_check``).

While a mailbox's key is refused the worker makes no call with it (intents.sending: the claim
skips the mailbox's sends, which wait queued or uncertain with their idempotency keys), so one
refused call costs one call, not one per queued send, and nothing is failed for what is the
key's fault. The refusal is a fact about one key: it is recorded only while the mailbox still
has the key that was refused, and a check clears it only for the key it checked.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.functions import Now
from django.utils.translation import gettext as _

from mailboxes import provider
from mailboxes.models import Mailbox
from mailboxes.provisioning import ProvisioningError, audit
from tenants.models import AuditEvent, Tenant
from tenants.services import require_admin

log = logging.getLogger("mailboxes.key_health")


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
            raise ProvisioningError(
                _(
                    "AgentMail still refuses the key of %(address)s (%(error)s). Its sends keep "
                    "waiting; install a working key for the inbox, then check again."
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
