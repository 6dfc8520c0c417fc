"""A tenant's pod or a mailbox's inbox deleted at AgentMail, made again.

Nothing here acts on a 404 alone: AgentMail answers 404 for an object outside the key's scope
too (reference/agentmail-api.md §2.7), and a send's 404 may name a message. Each recovery first
asks AgentMail with the organization key, outside any transaction, whether the object is
there: only its 404 counts as gone; an answer that it exists refuses the recovery, and a
timeout or a 5xx refuses it too, changing nothing.

Then, in one transaction guarded by the ids that were found gone (a run beside it that got there
first changes nothing), the rows forget them and draw NEW client_ids: AgentMail answers a
client_id it has seen with the object it made, and may do so for a deleted one (the sandbox
does), so the old ids would bring back the gone pod or inbox. The sends waiting for the mailbox
stay held (its key refused) until the new key is stored; its uncertain ones go to a person
(``intents.sending.inbox_lost`` says why). Then ordinary provisioning (``mailbox_provision``)
makes the pod, the inboxes, their keys and the tenant's webhook again, each with its new
client_id, so a run that crashes anywhere is finished by running it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import cast

from django.db import transaction
from django.db.models import Case, F, Value, When
from django.db.models.functions import Coalesce, Now
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from mailboxes import provider
from mailboxes.models import Mailbox, new_inbox_client_id
from mailboxes.provisioning import ProvisioningError, audit, mailbox_provision, provisioning_lease
from mailboxes.signals import mailbox_inbox_lost, tenant_pod_lost
from tenants.models import Tenant, new_pod_client_id
from tenants.services import require_admin

log = logging.getLogger("mailboxes.recovery")

# What the mailbox's key refusal says while its inbox is made again (key_refused_detail).
INBOX_LOST_DETAIL = "AgentMail no longer has the inbox: it is being made again"


@dataclass
class Lost:
    """What AgentMail no longer has of a tenant: its pod (the id, or "" when it has it) and the
    mailboxes whose inboxes are gone."""

    pod_id: str = ""
    mailboxes: list[Mailbox] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.pod_id or self.mailboxes)


def _could_not_ask(exc: provider.ProviderError) -> ProvisioningError:
    return ProvisioningError(
        _(
            "AgentMail could not say whether it still has it (%(error)s): only its 404 counts as "
            "gone. Nothing changed; try again shortly."
        )
        % {"error": exc}
    )


def _exists(check, **ids) -> bool:
    try:
        return check(**ids)
    except provider.ProviderError as exc:
        raise _could_not_ask(exc) from None


def lost_at_agentmail(*, tenant: Tenant) -> Lost:
    """Ask AgentMail (organization key, no transaction open) for the tenant's pod and each of its
    mailboxes' inboxes. Raises ProvisioningError when it cannot be asked."""
    lost = Lost()
    pod_id = Tenant.objects.values_list("agentmail_pod_id", flat=True).get(pk=tenant.pk)
    if pod_id and not _exists(provider.pod_exists, pod_id=pod_id):
        lost.pod_id = pod_id
    for mailbox in Mailbox.objects.filter(tenant=tenant).exclude(inbox_id="").order_by("pk"):
        if not _exists(provider.inbox_exists, inbox_id=mailbox.inbox_id):
            lost.mailboxes.append(mailbox)
    return lost


def unfinished(*, tenant: Tenant) -> list[Mailbox]:
    """The tenant's mailboxes that forgot a lost inbox and have no new one yet (a recovery that
    stopped half way: running it again finishes them)."""
    return list(
        Mailbox.objects.filter(tenant=tenant, inbox_id="", key_refused_detail=INBOX_LOST_DETAIL)
        .exclude(key_refused_at=None)
        .order_by("pk")
    )


def _forget_inbox(*, tenant: Tenant, mailbox_id: int, inbox_id: str, actor) -> None:
    """Inside the caller's transaction: the mailbox forgets ``inbox_id`` and its key, draws a new
    client_id and, if it was active, is provisioning again (a disabled one stays disabled); its
    sends stay held behind the key refusal. Its sends are locked first (intents, then the
    mailbox: the worker's order). Raises ProvisioningError, which rolls the caller back, when a
    send is on its way or the mailbox no longer has ``inbox_id``."""
    address = Mailbox.objects.values_list("address", flat=True).get(tenant=tenant, pk=mailbox_id)
    answers = mailbox_inbox_lost.send(
        sender=Mailbox, tenant_id=tenant.pk, mailbox_id=mailbox_id, actor=actor
    )
    # Receivers answer dicts (intents.sending.inbox_lost); the stubs type answers as str.
    results = [cast(dict, answer) for _, answer in answers if answer]
    on_their_way = sum(answer.get("sending", 0) for answer in results)
    if on_their_way:
        raise ProvisioningError(
            ngettext(
                "%(count)d send of %(address)s is on its way to AgentMail; nothing changed. Try "
                "again once it is recorded (at most a send lease, a few minutes).",
                "%(count)d sends of %(address)s are on their way to AgentMail; nothing changed. "
                "Try again once they are recorded (at most a send lease, a few minutes).",
                on_their_way,
            )
            % {"count": on_their_way, "address": address}
        )
    mailbox = (
        Mailbox.objects.select_for_update()
        .filter(tenant=tenant, pk=mailbox_id, inbox_id=inbox_id)
        .first()
    )
    if mailbox is None:
        raise ProvisioningError(
            _("The inbox of %(address)s changed meanwhile; nothing changed.") % {"address": address}
        )
    old_client_id = mailbox.client_id
    new_client_id = new_inbox_client_id()
    Mailbox.objects.filter(pk=mailbox.pk).update(
        inbox_id="",
        api_key_sealed="",
        provider_api_key_id="",
        provider_display_name="",
        agentmail_client_id=new_client_id,
        status=Case(
            When(status=Mailbox.Status.ACTIVE, then=Value(Mailbox.Status.PROVISIONING)),
            default=F("status"),
        ),
        # The claim leaves a refused mailbox's sends alone: none is checked against a mailbox
        # that is not active (which would block it) until the new key is stored.
        key_refused_at=Coalesce(F("key_refused_at"), Now()),
        key_refused_detail=INBOX_LOST_DETAIL,
        inbox_lost_at=Now(),
    )
    needs_attention = [i for answer in results for i in answer.get("needs_attention", [])]
    audit(
        tenant=tenant,
        actor=actor,
        action="mailbox.inbox_lost",
        obj=mailbox,
        data={
            "inbox_id": inbox_id,
            "old_client_id": old_client_id,
            "client_id": new_client_id,
            "needs_attention": needs_attention,
        },
    )


def mailbox_inbox_forget(*, tenant: Tenant, mailbox_id: int, inbox_id: str, actor=None) -> None:
    """Forget the mailbox's inbox ``inbox_id``, which AgentMail answered 404 for (the caller
    asked): see ``_forget_inbox``."""
    with transaction.atomic():
        if actor is not None:
            require_admin(tenant, actor)
        _forget_inbox(tenant=tenant, mailbox_id=mailbox_id, inbox_id=inbox_id, actor=actor)


def tenant_pod_forget(*, tenant: Tenant, pod_id: str, inboxes: dict[int, str], actor=None) -> None:
    """Forget the tenant's pod ``pod_id`` and every inbox of its mailboxes (``inboxes``: mailbox
    id to the inbox id AgentMail answered 404 for), which lived in it: the tenant and every
    mailbox draw new client_ids, the tenant's webhook endpoint too (webhooks, through
    ``tenant_pod_lost``). Raises ProvisioningError, changing nothing, when the tenant holds
    another pod by now, a mailbox another inbox, or a send is on its way."""
    with transaction.atomic():
        if actor is not None:
            require_admin(tenant, actor)
        mailboxes = list(
            Mailbox.objects.filter(tenant=tenant).order_by("pk").values_list("pk", "inbox_id")
        )
        for mailbox_id, inbox_id in mailboxes:
            if inbox_id and inboxes.get(mailbox_id) != inbox_id:
                raise ProvisioningError(
                    _("AgentMail was not asked about an inbox of this tenant; nothing changed.")
                )
            if inbox_id:
                _forget_inbox(tenant=tenant, mailbox_id=mailbox_id, inbox_id=inbox_id, actor=actor)
            else:
                # Half provisioned: its client_id may have made an inbox in the gone pod.
                Mailbox.objects.filter(pk=mailbox_id, inbox_id="").update(
                    agentmail_client_id=new_inbox_client_id()
                )
        old_client_id = tenant.pod_client_id
        new_client_id = new_pod_client_id()
        if not Tenant.objects.filter(pk=tenant.pk, agentmail_pod_id=pod_id).update(
            agentmail_pod_id="", agentmail_client_id=new_client_id
        ):
            raise ProvisioningError(_("The tenant's pod changed meanwhile; nothing changed."))
        tenant_pod_lost.send(sender=Tenant, tenant_id=tenant.pk, actor=actor)
        audit(
            tenant=tenant,
            actor=actor,
            action="tenant.pod_lost",
            obj=tenant,
            data={"pod_id": pod_id, "old_client_id": old_client_id, "client_id": new_client_id},
        )
    tenant.refresh_from_db(fields=["agentmail_pod_id", "agentmail_client_id"])


def mailbox_inbox_recover(*, tenant: Tenant, mailbox_id: int, actor=None) -> Mailbox:
    """Make the mailbox's inbox again when AgentMail no longer has it: confirm its 404, forget
    it (``mailbox_inbox_forget``), provision. A mailbox that forgot its inbox already (a run
    that stopped half way) is provisioned. Raises ProvisioningError, changing nothing, when
    AgentMail still has the inbox or cannot be asked; ``actor`` None: an operator's command."""
    if actor is not None:
        with transaction.atomic():
            require_admin(tenant, actor)
    mailbox = Mailbox.objects.get(tenant=tenant, pk=mailbox_id)
    tenant.refresh_from_db(fields=["agentmail_pod_id", "slug"])
    if tenant.agentmail_pod_id and not _exists(provider.pod_exists, pod_id=tenant.agentmail_pod_id):
        raise ProvisioningError(
            _(
                "AgentMail no longer has the pod %(pod)s of this tenant, nor any inbox in it: "
                "make the pod again, with every inbox (python manage.py agentmail_recover "
                "%(tenant)s). Nothing changed."
            )
            % {"pod": tenant.agentmail_pod_id, "tenant": tenant.slug}
        )
    if mailbox.inbox_id:
        with provisioning_lease(mailbox):
            inbox_id = Mailbox.objects.values_list("inbox_id", flat=True).get(pk=mailbox.pk)
            if inbox_id:
                if _exists(provider.inbox_exists, inbox_id=inbox_id):
                    raise ProvisioningError(
                        _(
                            "AgentMail still has the inbox %(address)s: there is nothing to "
                            "make again, and nothing changed."
                        )
                        % {"address": inbox_id}
                    )
                mailbox_inbox_forget(
                    tenant=tenant, mailbox_id=mailbox.pk, inbox_id=inbox_id, actor=actor
                )
    elif not mailbox.key_refused:
        raise ProvisioningError(
            _("%(address)s has no inbox to make again: retry its provisioning instead.")
            % {"address": mailbox.address}
        )
    mailbox.refresh_from_db()
    recovered = mailbox_provision(mailbox=mailbox, actor=actor)
    log.info(
        "mailboxes.mailbox.inbox_recovered",
        extra={"mailbox_id": mailbox.pk, "tenant_id": tenant.pk, "inbox_id": recovered.inbox_id},
    )
    return recovered


def tenant_pod_recover(*, tenant: Tenant, actor=None) -> list[Mailbox]:
    """Make the tenant's pod again when AgentMail no longer has it, with every mailbox's inbox
    (AgentMail deletes no pod that holds inboxes): confirm the 404 of the pod and of each
    inbox, forget them (``tenant_pod_forget``), then provision every mailbox, which makes the new
    pod, the inboxes, keys and the tenant's webhook. A tenant that forgot its pod already (a
    run that stopped half way) is provisioned. Raises ProvisioningError, changing nothing, when
    AgentMail still has the pod or one of the inboxes, or cannot be asked."""
    if actor is not None:
        with transaction.atomic():
            require_admin(tenant, actor)
    tenant.refresh_from_db(fields=["agentmail_pod_id", "agentmail_client_id"])
    if tenant.agentmail_pod_id:
        lost = lost_at_agentmail(tenant=tenant)
        if not lost.pod_id:
            raise ProvisioningError(
                _(
                    "AgentMail still has the pod %(pod)s of %(tenant)s: there is nothing to make "
                    "again, and nothing changed."
                )
                % {"pod": tenant.agentmail_pod_id, "tenant": tenant.slug}
            )
        inboxes = {m.pk: m.inbox_id for m in lost.mailboxes}
        still_there = Mailbox.objects.filter(tenant=tenant).exclude(inbox_id="")
        still_there = still_there.exclude(pk__in=inboxes)
        if still_there.exists():
            raise ProvisioningError(
                _(
                    "AgentMail no longer has the pod of %(tenant)s but still has the inbox "
                    "%(address)s; nothing changed."
                )
                % {"tenant": tenant.slug, "address": still_there.order_by("pk")[0].address}
            )
        tenant_pod_forget(tenant=tenant, pod_id=lost.pod_id, inboxes=inboxes, actor=actor)
    recovered = [
        mailbox_provision(mailbox=mailbox, actor=actor)
        for mailbox in Mailbox.objects.filter(tenant=tenant).order_by("pk")
    ]
    tenant.refresh_from_db(fields=["agentmail_pod_id"])
    log.info(
        "mailboxes.tenant.pod_recovered",
        extra={"tenant_id": tenant.pk, "pod_id": tenant.agentmail_pod_id},
    )
    return recovered
