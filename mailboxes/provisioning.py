"""Connecting a tenant to AgentMail: one pod per tenant, an inbox and an inbox-scoped key per
mailbox, one pod webhook per tenant (``webhooks.registration``, on ``mailbox_provisioned``). With
that module, the only code that uses the organisation key.

Each step is safe to repeat after a crash at any point: creates carry the row's own
``client_id``, drawn once when the row was created (AgentMail answers a repeat with the original
object; one derived from the row's id alone was answered with another database's pod or inbox),
local rows are written with conditional updates, and a key created at the provider but never
stored locally (the process died in between) is found by its name and deleted before a new one
is made, so a mailbox ends with exactly one key. Network calls happen outside transactions; a
lease on the mailbox row (database clock) keeps two provisioners of the same mailbox from
interleaving.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Now
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from common.addresses import normalize_address, normalize_domain, shown_with_its_characters
from common.text import invisible_characters, unsafe_in_name
from mailboxes import provider
from mailboxes.display_names import display_name_sync_wake
from mailboxes.headers import encoded_word_in, line_break_in
from mailboxes.models import Mailbox
from mailboxes.signals import mailbox_provisioned
from tenants.models import AuditEvent, Tenant
from tenants.send_stops import Stopped, sends_in_flight_hold
from tenants.services import require_admin, require_tenant_open
from tenants.stale import fingerprint, refuse_if_changed

logger = logging.getLogger("mailboxes.provisioning")

USERNAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?$")


class ProvisioningError(Exception):
    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


def _clean_display_name(display_name: str) -> str:
    # The inbox's display name is the From header's phrase of every message it sends.
    display_name = display_name.strip()
    if line_break := line_break_in(display_name):
        raise ProvisioningError(
            _("The display name must be a single line; it holds %(character)s.")
            % {"character": line_break},
            field="display_name",
        )
    if unsafe := unsafe_in_name(display_name):
        raise ProvisioningError(
            _("The display name cannot hold the control character %(character)s.")
            % {"character": unsafe},
            field="display_name",
        )
    # What draws nothing (a zero-width space, a word joiner, tag characters) makes one name
    # look like another: "Pay\u200bPal Security". The draft's own check (common.text), so the
    # joiners that Persian words and emoji sequences are written with stay allowed.
    if invisible := invisible_characters(display_name):
        raise ProvisioningError(
            _(
                "The display name cannot hold characters nobody sees: %(characters)s. They make "
                "it look like another name; remove them."
            )
            % {"characters": invisible},
            field="display_name",
        )
    # A mail client decodes an RFC 2047 encoded word in the From phrase as it does in a subject
    # (intents.services.content): the customer would read a name the admin never typed.
    if word := encoded_word_in(display_name):
        raise ProvisioningError(
            _(
                "The display name cannot hold the encoded word %(word)s: a mail client shows it "
                "decoded, as another name. Write the name itself."
            )
            % {"word": word},
            field="display_name",
        )
    return display_name


# Longer than the provider calls of one provisioning run (each bounded by the read timeout).
PROVISIONING_LEASE = timedelta(minutes=2)


@contextmanager
def provisioning_lease(mailbox: Mailbox):
    """Hold the mailbox's provisioning lease (a conditional UPDATE on the database clock) for the
    block; refuse when another run holds an unexpired one. Session state such as an advisory lock
    would not survive PgBouncer's transaction mode (the unlock may reach another server session)."""
    token = uuid.uuid4()
    free = Q(provisioning_lease__isnull=True) | Q(provisioning_lease_until__lt=Now())
    taken = Mailbox.objects.filter(free, pk=mailbox.pk).update(
        provisioning_lease=token, provisioning_lease_until=Now() + PROVISIONING_LEASE
    )
    if not taken:
        raise ProvisioningError(
            _("Provisioning of this item is already running; try again shortly.")
        )
    try:
        yield
    finally:
        Mailbox.objects.filter(pk=mailbox.pk, provisioning_lease=token).update(
            provisioning_lease=None, provisioning_lease_until=None
        )


def audit(*, tenant, actor, action: str, obj, data: dict | None = None) -> None:
    AuditEvent.objects.create(
        tenant=tenant,
        actor=actor,
        action=action,
        object_type=type(obj).__name__.lower(),
        object_id=str(obj.pk),
        data=data or {},
    )


def refused(exc: provider.ProviderError) -> ProvisioningError:
    return ProvisioningError(_("AgentMail refused the request: %(error)s") % {"error": exc})


def pod_gone_or_refused(
    tenant: Tenant, pod_id: str, exc: provider.ProviderError
) -> ProvisioningError:
    """The error for AgentMail's 404 on a call in the tenant's pod: asked again (a GET of the
    pod), a pod it no longer has is said in words with the way back; any other answer is the
    refusal as it came."""
    try:
        gone = not provider.pod_exists(pod_id=pod_id)
    except provider.ProviderError:
        gone = False
    if not gone:
        return refused(exc)
    return ProvisioningError(
        _(
            "AgentMail no longer has the pod %(pod)s of this tenant: it was deleted there, with "
            "the inboxes in it. Nothing changed here. An operator can make it again: python "
            "manage.py agentmail_recover %(tenant)s"
        )
        % {"pod": pod_id, "tenant": tenant.slug}
    )


def tenant_connect(*, tenant: Tenant, actor=None) -> str:
    """The tenant's pod id, creating the pod on first use (client_id: ``Tenant.pod_client_id``)."""
    tenant.refresh_from_db(fields=["agentmail_pod_id", "agentmail_client_id"])
    if tenant.agentmail_pod_id:
        return tenant.agentmail_pod_id
    try:
        pod_id = provider.create_pod(
            client_id=tenant.pod_client_id, name=f"countersign-{tenant.slug}"
        )
    except provider.ProviderError as exc:
        raise refused(exc) from None
    with transaction.atomic():
        updated = Tenant.objects.filter(pk=tenant.pk, agentmail_pod_id="").update(
            agentmail_pod_id=pod_id
        )
        if updated:
            audit(
                tenant=tenant,
                actor=actor,
                action="tenant.connected",
                obj=tenant,
                data={"pod_id": pod_id},
            )
    tenant.refresh_from_db(fields=["agentmail_pod_id"])
    return tenant.agentmail_pod_id


def mailbox_create(
    *,
    tenant: Tenant,
    username: str,
    display_name: str = "",
    actor=None,
    policy_mode: str = Mailbox.PolicyMode.OPEN,
    allowed_domains: list[str] | None = None,
    allowed_addresses: list[str] | None = None,
) -> Mailbox:
    """Create the local mailbox row, then provision it at AgentMail. ``actor`` None: a command
    of the operators' (the demo, the harnesses)."""
    display_name = _clean_display_name(display_name)
    allowed_domains, allowed_addresses = _clean_allow_lists(
        allowed_domains or [], allowed_addresses or []
    )
    username = username.strip().lower()
    if not USERNAME_RE.match(username):
        raise ProvisioningError(
            _(
                "Use 1-64 lower-case letters, digits, dots, dashes or underscores, starting and "
                "ending with a letter or digit."
            ),
            field="username",
        )
    address = f"{username}@{settings.AGENTMAIL_INBOX_DOMAIN}"
    existing = Mailbox.objects.filter(tenant=tenant, username=username).first()
    if existing is None:
        try:
            with transaction.atomic():
                if actor is not None:
                    require_admin(tenant, actor)
                existing = Mailbox.objects.create(
                    tenant=tenant,
                    username=username,
                    address=address,
                    display_name=display_name,
                    policy_mode=policy_mode,
                    allowed_domains=allowed_domains,
                    allowed_addresses=allowed_addresses,
                )
                audit(
                    tenant=tenant,
                    actor=actor,
                    action="mailbox.created",
                    obj=existing,
                    data={"address": address},
                )
        except IntegrityError:
            raise ProvisioningError(
                _("The address %(address)s is already taken.") % {"address": address},
                field="username",
            ) from None
    elif existing.status != Mailbox.Status.PROVISIONING:
        # A disabled one too: provisioning leaves it disabled, and "connected and ready to send"
        # was said of a mailbox that sends nothing.
        raise ProvisioningError(
            _("This tenant already has the mailbox %(address)s.") % {"address": address},
            field="username",
        )
    return mailbox_provision(mailbox=existing, actor=actor)


def mailbox_provision(*, mailbox: Mailbox, actor=None) -> Mailbox:
    """Bring a mailbox to `active`: inbox, inbox-scoped key, then ``mailbox_provisioned`` (webhooks
    registers the tenant webhook). Safe to repeat. ``actor`` None: a command of the operators'."""
    tenant = mailbox.tenant
    if actor is not None:
        # Before the first call to AgentMail: the role was checked when the request started, and
        # an admin demoted or deactivated since must not bring a mailbox into service.
        with transaction.atomic():
            require_admin(tenant, actor)
    pod_id = tenant_connect(tenant=tenant, actor=actor)
    with provisioning_lease(mailbox):
        mailbox.refresh_from_db()
        try:
            inbox = provider.create_inbox(
                pod_id=pod_id,
                username=mailbox.username,
                domain=mailbox.address.rpartition("@")[2],
                display_name=mailbox.display_name,
                client_id=mailbox.client_id,
            )
        except provider.ProviderError as exc:
            if exc.status == 404:
                raise pod_gone_or_refused(tenant, pod_id, exc) from None
            raise refused(exc) from None
        Mailbox.objects.filter(pk=mailbox.pk, inbox_id="").update(inbox_id=inbox.inbox_id)
        # What AgentMail reports, not what was asked: a repeated create answers with the inbox
        # as first created, under its first name if the mailbox was renamed since.
        Mailbox.objects.filter(pk=mailbox.pk).update(provider_display_name=inbox.display_name)
        if not mailbox.api_key_sealed:
            _install_inbox_key(mailbox=mailbox, inbox_id=inbox.inbox_id, actor=actor)
    mailbox_provisioned.send(sender=Mailbox, tenant=tenant, mailbox=mailbox, actor=actor)
    mailbox.refresh_from_db()
    if mailbox.display_name_pending:
        display_name_sync_wake(mailbox.pk)
    return mailbox


def inbox_key_name(mailbox_id: int) -> str:
    """The name of the key provisioning creates for the mailbox; a replacement key's name
    (mailboxes.key_health) is this, a dash and a suffix of its own."""
    return f"countersign-mailbox-{mailbox_id}"


def inbox_key_is_ours(name: str, mailbox_id: int) -> bool:
    # Not a bare prefix match: "countersign-mailbox-1" begins "countersign-mailbox-12" too.
    key_name = inbox_key_name(mailbox_id)
    return name == key_name or name.startswith(f"{key_name}-")


def delete_unstored_inbox_keys(*, mailbox_id: int, inbox_id: str) -> list[str]:
    """Delete at AgentMail every key of the inbox named for the mailbox except the one the
    mailbox stores now: a key created by a run that died between the provider call and our
    commit (its secret is lost) and a key that was replaced. Returns the deleted key ids; raises
    ProviderError. Call it under the mailbox's provisioning lease, after the commit that stored
    the key, so the key read here is the one kept."""
    stored = Mailbox.objects.values_list("provider_api_key_id", flat=True).get(pk=mailbox_id)
    deleted = []
    for api_key_id, name in provider.list_inbox_keys(inbox_id=inbox_id):
        if api_key_id != stored and inbox_key_is_ours(name, mailbox_id):
            provider.delete_inbox_key(inbox_id=inbox_id, api_key_id=api_key_id)
            deleted.append(api_key_id)
    return deleted


def _install_inbox_key(*, mailbox: Mailbox, inbox_id: str, actor) -> None:
    try:
        delete_unstored_inbox_keys(mailbox_id=mailbox.pk, inbox_id=inbox_id)
        created = provider.create_inbox_key(inbox_id=inbox_id, name=inbox_key_name(mailbox.pk))
    except provider.ProviderError as exc:
        raise refused(exc) from None
    with transaction.atomic():
        if actor is not None:
            # The key made meanwhile stays unstored; the next run deletes it at AgentMail.
            require_admin(mailbox.tenant, actor)
        updated = Mailbox.objects.filter(pk=mailbox.pk, api_key_sealed="").update(
            api_key_sealed=mailbox.seal_api_key(created.api_key),
            provider_api_key_id=created.api_key_id,
            # A disabled mailbox whose lost inbox is made again (mailboxes.recovery) stays
            # disabled: a new inbox is no admin's decision to send from it again.
            status=Case(
                When(status=Mailbox.Status.PROVISIONING, then=Value(Mailbox.Status.ACTIVE)),
                default=F("status"),
            ),
            # A refusal was of a key this mailbox no longer has (its inbox's, gone).
            key_refused_at=None,
            key_refused_detail="",
        )
        if updated:
            audit(
                tenant=mailbox.tenant,
                actor=actor,
                action="mailbox.key_installed",
                obj=mailbox,
                data={"api_key_id": created.api_key_id},
            )
    logger.info(
        "mailboxes.mailbox.provisioned",
        extra={"mailbox_id": mailbox.pk, "tenant_id": mailbox.tenant_id},
    )


@transaction.atomic
def mailbox_set_status(*, tenant: Tenant, mailbox_id: int, status: str, actor) -> Stopped[Mailbox]:
    if status not in (Mailbox.Status.ACTIVE, Mailbox.Status.DISABLED):
        raise ProvisioningError(_("A mailbox can only be enabled or disabled."))
    require_admin(tenant, actor, open_checked_after_sends=True)
    data: dict[str, int] = {}
    if status == Mailbox.Status.DISABLED:
        # Before the mailbox's row (see tenants.send_stops): the record path holds a send while
        # it locks its mailbox.
        data["sends_in_flight"] = sends_in_flight_hold(tenant_id=tenant.pk, mailbox_id=mailbox_id)
    require_tenant_open(tenant)
    mailbox = Mailbox.objects.select_for_update().get(tenant=tenant, pk=mailbox_id)
    if mailbox.status == Mailbox.Status.PROVISIONING:
        raise ProvisioningError(
            _("This mailbox is still being provisioned; retry provisioning first.")
        )
    if status == Mailbox.Status.ACTIVE and not (mailbox.inbox_id and mailbox.api_key_sealed):
        # A disabled mailbox whose lost inbox is being made again (mailboxes.recovery).
        raise ProvisioningError(
            _("This mailbox has no inbox at AgentMail yet; make its inbox again first.")
        )
    if mailbox.status != status:
        previous = mailbox.status
        mailbox.status = status
        mailbox.save(update_fields=["status"])
        audit(
            tenant=tenant,
            actor=actor,
            action=f"mailbox.{'enabled' if status == 'active' else 'disabled'}",
            obj=mailbox,
            data={"from": previous, **data},
        )
    return Stopped(mailbox, data.get("sends_in_flight", 0))


# What the stale-save refusal names (tenants.stale), by field, in the form's order.
POLICY_LABELS = {
    "display_name": gettext_lazy("the display name"),
    "policy_mode": gettext_lazy("the policy mode"),
    "allowed_domains": gettext_lazy("the allowed domains"),
    "allowed_addresses": gettext_lazy("the allowed addresses"),
}
# Every approval and every send's pre-call check build a set of these lists
# (Mailbox.allows_recipient) and the audit row of each change holds both before and after: a
# list without a bound made every one of them as slow and as large as anyone cared to paste.
# A thousand is far beyond a hand-kept allow-list; a longer one is a directory, not a policy.
MAX_ALLOWED_ENTRIES = 1000
# The column's length (Mailbox.allowed_addresses, an EmailField): PostgreSQL cuts a longer
# element of the array to it without a word, leaving an address nobody typed.
MAX_ADDRESS_LENGTH = 254


def _clean_allow_lists(domains: list[str], addresses: list[str]) -> tuple[list[str], list[str]]:
    for entries, field in ((domains, "allowed_domains"), (addresses, "allowed_addresses")):
        if len(entries) > MAX_ALLOWED_ENTRIES:
            raise ProvisioningError(
                _("At most %(most)d entries; this list has %(count)d.")
                % {"most": MAX_ALLOWED_ENTRIES, "count": len(entries)},
                field=field,
            )
    too_long = [a for a in addresses if len(a) > MAX_ADDRESS_LENGTH]
    if too_long:
        raise ProvisioningError(
            _("Longer than the %(most)d characters an address may have: %(names)s")
            % {"most": MAX_ADDRESS_LENGTH, "names": ", ".join(too_long[:3])},
            field="allowed_addresses",
        )
    # Stored in the form recipients are compared in (common.addresses): an IDN domain or an
    # address kept as typed, in Unicode or in another case, never matched a recipient.
    return (
        _normalized(domains, normalize_domain, _("Not domain names: %(names)s"), "allowed_domains"),
        _normalized(
            addresses, normalize_address, _("Not email addresses: %(names)s"), "allowed_addresses"
        ),
    )


def _normalized(entries: list[str], normalize, message: str, field: str) -> list[str]:
    """Each entry in its normal form, each once, in the order given; ProvisioningError naming
    the first few that have none."""
    out: dict[str, None] = {}
    bad: list[str] = []
    for entry in entries:
        try:
            out.setdefault(normalize(entry), None)
        except ValueError:
            bad.append(shown_with_its_characters(str(entry)))
    if bad:
        raise ProvisioningError(message % {"names": ", ".join(bad[:5])}, field=field)
    return list(out)


def _policy(mailbox: Mailbox) -> dict:
    return {
        "display_name": mailbox.display_name,
        "policy_mode": mailbox.policy_mode,
        "allowed_domains": list(mailbox.allowed_domains),
        "allowed_addresses": list(mailbox.allowed_addresses),
    }


def _recipient_rules(policy: dict) -> dict:
    """The part of a policy that decides who may be written to (all but the display name)."""
    return {key: value for key, value in policy.items() if key != "display_name"}


def policy_fingerprint(mailbox: Mailbox) -> str:
    """What a recipient policy form is based on: its ``based_on`` for
    ``mailbox_update_policy``."""
    return fingerprint(_policy(mailbox))


@transaction.atomic
def mailbox_update_policy(
    *,
    tenant: Tenant,
    mailbox_id: int,
    policy_mode: str,
    allowed_domains: list[str],
    allowed_addresses: list[str],
    display_name: str,
    actor,
    based_on: str | None = None,
) -> Stopped[Mailbox]:
    """``based_on``: the fingerprint (``policy_fingerprint``) of the policy the admin's page
    showed; a save based on a policy that changed since is refused (tenants.stale.StaleSave).
    A new display name is brought to AgentMail after the commit (mailboxes.display_names).

    A new recipient policy stops the sends it no longer allows, as disabling the mailbox stops
    them all: the change holds the mailbox's sends on their way (tenants.send_stops) and counts
    those already past their pre-call check, which go out under the policy they were checked
    against; every later check reads the new one. A rename alone holds nothing."""
    display_name = _clean_display_name(display_name)
    allowed_domains, allowed_addresses = _clean_allow_lists(allowed_domains, allowed_addresses)
    require_admin(tenant, actor, open_checked_after_sends=True)
    wanted = {
        "policy_mode": policy_mode,
        "allowed_domains": allowed_domains,
        "allowed_addresses": allowed_addresses,
    }
    data: dict[str, int] = {}
    unlocked = Mailbox.objects.filter(tenant=tenant, pk=mailbox_id).first()
    if unlocked is not None and _recipient_rules(_policy(unlocked)) != wanted:
        # Before the mailbox's row (see tenants.send_stops). Read unlocked to decide; a policy
        # that changes again before the lock below holds nothing it would not have held.
        data["sends_in_flight"] = sends_in_flight_hold(tenant_id=tenant.pk, mailbox_id=mailbox_id)
    require_tenant_open(tenant)
    mailbox = Mailbox.objects.select_for_update().get(tenant=tenant, pk=mailbox_id)
    before = _policy(mailbox)
    refuse_if_changed(based_on=based_on, current=before, labels=POLICY_LABELS)
    renamed = display_name != mailbox.display_name
    mailbox.policy_mode = policy_mode
    mailbox.allowed_domains = allowed_domains
    mailbox.allowed_addresses = allowed_addresses
    mailbox.display_name = display_name
    fields = ["policy_mode", "allowed_domains", "allowed_addresses", "display_name"]
    if renamed and mailbox.display_name_sync_token is None:
        # A new name is due at once, whatever the backoff of an older one. A run in flight
        # keeps its lease: it finds the new name when it records, and sends it next.
        mailbox.display_name_sync_not_before = None
        mailbox.display_name_sync_failures = 0
        fields += ["display_name_sync_not_before", "display_name_sync_failures"]
    mailbox.save(update_fields=fields)
    after = {
        "policy_mode": policy_mode,
        "allowed_domains": allowed_domains,
        "allowed_addresses": allowed_addresses,
        "display_name": display_name,
    }
    audit(
        tenant=tenant,
        actor=actor,
        action="mailbox.policy_changed",
        obj=mailbox,
        data={"before": before, "after": after, **data},
    )
    if renamed:
        transaction.on_commit(lambda: display_name_sync_wake(mailbox.pk))
    return Stopped(mailbox, data.get("sends_in_flight", 0))


MAX_SLA_MINUTES = 60 * 24 * 14
ASSIGNMENT_LABELS = {
    "sla_minutes": gettext_lazy("the mailbox's target time"),
    "auto_assign": gettext_lazy("automatic assignment"),
}


def _assignment(mailbox: Mailbox) -> dict:
    return {"sla_minutes": mailbox.sla_minutes, "auto_assign": mailbox.auto_assign}


def assignment_fingerprint(mailbox: Mailbox) -> str:
    """What a deadline-and-assignment form is based on: its ``based_on`` for
    ``mailbox_update_assignment``."""
    return fingerprint(_assignment(mailbox))


@transaction.atomic
def mailbox_update_assignment(
    *,
    tenant: Tenant,
    mailbox_id: int,
    sla_minutes: int | None,
    auto_assign: bool,
    actor,
    based_on: str | None = None,
) -> Mailbox:
    """The mailbox's own deadline target (None: the tenant's) and automatic assignment.
    ``based_on``: the fingerprint (``assignment_fingerprint``) of the settings the admin's page
    showed; a save based on settings that changed since is refused (tenants.stale.StaleSave)."""
    if sla_minutes is not None and not 1 <= sla_minutes <= MAX_SLA_MINUTES:
        raise ProvisioningError(
            _("The target must be between 1 and %(most)d minutes (14 days).")
            % {"most": MAX_SLA_MINUTES},
            field="sla_minutes",
        )
    require_admin(tenant, actor)
    mailbox = Mailbox.objects.select_for_update().get(tenant=tenant, pk=mailbox_id)
    before = _assignment(mailbox)
    refuse_if_changed(based_on=based_on, current=before, labels=ASSIGNMENT_LABELS)
    after = {"sla_minutes": sla_minutes, "auto_assign": auto_assign}
    if before == after:
        return mailbox
    mailbox.sla_minutes = sla_minutes
    mailbox.auto_assign = auto_assign
    mailbox.save(update_fields=["sla_minutes", "auto_assign"])
    audit(
        tenant=tenant,
        actor=actor,
        action="mailbox.assignment_changed",
        obj=mailbox,
        data={"before": before, "after": after},
    )
    return mailbox
