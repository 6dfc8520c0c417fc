from __future__ import annotations

import secrets

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Upper
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from common.addresses import routes_onward
from mailboxes import crypto

# Where a Mailbox keeps its lower-cased allow-lists (``Mailbox._allowed_sets``).
_ALLOWED_SETS = "_allowed_sets_cache"


def new_inbox_client_id() -> str:
    """The ``client_id`` of a new mailbox's inbox at AgentMail (see ``Mailbox.client_id``)."""
    return f"cs-mailbox-{secrets.token_hex(16)}"


class Mailbox(models.Model):
    """A tenant's AgentMail inbox, with the inbox-scoped key used for every send from it."""

    class Status(models.TextChoices):
        # A context of their own: "Active" of a tenant is another word in Spanish (activa).
        PROVISIONING = "provisioning", pgettext_lazy("mailbox status", "Provisioning")
        ACTIVE = "active", pgettext_lazy("mailbox status", "Active")
        DISABLED = "disabled", pgettext_lazy("mailbox status", "Disabled")

    class PolicyMode(models.TextChoices):
        OPEN = "open", _("Any recipient")
        RESTRICTED = "restricted", _("Only allowed domains and addresses")

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="mailboxes")
    username = models.CharField(max_length=64)
    address = models.EmailField(unique=True)
    display_name = models.CharField(max_length=120, blank=True)
    # The display name AgentMail holds for the inbox, as it last reported it: what the inbox's
    # mail is sent as. It trails display_name while a rename is on its way there
    # (mailboxes.display_names).
    provider_display_name = models.CharField(max_length=120, blank=True, editable=False)
    # AgentMail's inbox id is the address; kept apart because the provider owns its format.
    inbox_id = models.CharField(max_length=254, blank=True)
    provider_api_key_id = models.CharField(max_length=100, blank=True)
    # The client_id the inbox is created with (read through client_id), drawn once per row: see
    # Tenant.agentmail_client_id, whose reasons and whose null (a row of the release before)
    # are this one's too. "cs-mailbox-<id>" handed a new mailbox another database's inbox.
    agentmail_client_id = models.CharField(
        max_length=100, null=True, blank=True, default=new_inbox_client_id, editable=False
    )
    api_key_sealed = models.TextField(blank=True, editable=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PROVISIONING)
    policy_mode = models.CharField(
        max_length=16, choices=PolicyMode.choices, default=PolicyMode.OPEN
    )
    allowed_domains = ArrayField(models.CharField(max_length=253), default=list, blank=True)
    allowed_addresses = ArrayField(models.EmailField(), default=list, blank=True)
    # Overrides the tenant's deadline target (Tenant.sla_minutes) for this mailbox; blank = the
    # tenant's.
    sla_minutes = models.PositiveIntegerField(null=True, blank=True)
    # New drafts are assigned round-robin among the members who may approve for this mailbox.
    auto_assign = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Who is provisioning this mailbox, until when (database clock): a row lease, not a session
    # advisory lock, so it holds behind PgBouncer's transaction mode and expires after a crash.
    provisioning_lease = models.UUIDField(null=True, blank=True, editable=False)
    provisioning_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    # The sync of a rename to AgentMail (mailboxes.display_names): the run that holds it, and
    # when the next run may start (database clock): the end of that run's lease, or of the
    # backoff after a failed run.
    display_name_sync_token = models.UUIDField(null=True, blank=True, editable=False)
    display_name_sync_not_before = models.DateTimeField(null=True, blank=True, editable=False)
    display_name_sync_failures = models.PositiveIntegerField(default=0, editable=False)
    # AgentMail refused this mailbox's key (401, or a 403/404 naming the key or inbox: revoked,
    # deleted, the inbox gone), when and how (mailboxes.key_health). While set, the worker
    # calls nothing with the key: the mailbox's sends wait, queued or uncertain, until an admin
    # shows the key works again. A state of the key beside ``status``, not one of its values:
    # the mailbox stays enabled, nothing about its sends is decided.
    key_refused_at = models.DateTimeField(null=True, blank=True, editable=False)
    key_refused_detail = models.CharField(max_length=300, blank=True, editable=False)
    # When this mailbox last forgot an inbox AgentMail had deleted (mailboxes.recovery): the
    # customer messages recorded before then were in that inbox, which AgentMail no longer has,
    # so a reply to one of them cannot be sent (its reply route answers 404).
    inbox_lost_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name_plural = "mailboxes"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "username"], name="mailbox_unique_username_per_tenant"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["provisioning", "active", "disabled"]),
                name="mailbox_status_valid",
            ),
            models.CheckConstraint(
                condition=~Q(status="active") | (~Q(inbox_id="") & ~Q(api_key_sealed="")),
                name="mailbox_active_has_inbox_and_key",
            ),
            models.CheckConstraint(
                condition=Q(sla_minutes__isnull=True) | Q(sla_minutes__gte=1),
                name="mailbox_sla_positive",
            ),
            models.CheckConstraint(
                condition=Q(display_name_sync_token__isnull=True)
                | Q(display_name_sync_not_before__isnull=False),
                name="mailbox_display_name_sync_lease_ends",
            ),
            models.UniqueConstraint(
                fields=["agentmail_client_id"], name="mailbox_unique_agentmail_client_id"
            ),
            # An event, a backfill and a reapply find their mailbox by tenant and inbox id, in
            # any case (webhooks.services.apply): one inbox, one row.
            models.UniqueConstraint(
                F("tenant"),
                Upper("inbox_id"),
                condition=~Q(inbox_id=""),
                name="mailbox_unique_inbox_per_tenant",
            ),
        ]

    def __str__(self) -> str:
        return self.address

    def save(self, *args, **kwargs) -> None:
        # A list changed in place keeps its identity; what is saved is what counts from now on.
        self.__dict__.pop(_ALLOWED_SETS, None)
        super().save(*args, **kwargs)

    def refresh_from_db(self, *args, **kwargs) -> None:
        self.__dict__.pop(_ALLOWED_SETS, None)
        super().refresh_from_db(*args, **kwargs)

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE

    @property
    def key_refused(self) -> bool:
        """Whether AgentMail refused this mailbox's key and no admin has shown it works since."""
        return self.key_refused_at is not None

    @property
    def display_name_pending(self) -> bool:
        """Whether AgentMail still sends this inbox's mail under another name than its own."""
        return bool(self.inbox_id) and self.display_name != self.provider_display_name

    @property
    def client_id(self) -> str:
        """The AgentMail client_id of the mailbox's inbox: a repeated create of this row returns
        the same inbox, any other row's create another, whatever its id."""
        return self.agentmail_client_id or f"cs-mailbox-{self.pk}"

    def _aad(self) -> str:
        return f"tenant:{self.tenant_id}:mailbox:{self.pk}:api_key"

    def seal_api_key(self, plaintext: str) -> str:
        return crypto.seal(plaintext, aad=self._aad())

    def api_key(self) -> str:
        """The plaintext inbox-scoped key, for one provider call. Never log or render it."""
        return crypto.unseal(self.api_key_sealed, aad=self._aad())

    def allows_recipient(self, address: str) -> bool:
        """The recipient policy for one valid address: an open mailbox writes to anyone, another
        only to its allowed addresses and domains (after the last "@"), compared lower-cased. An
        address whose local part names another destination ("a%elsewhere.org@partner.org",
        ``common.addresses.routes_onward``) is allowed only by name, never by its domain: a
        server of the allowed domain may pass it on. ``intents.policy.recipient_breaks_policy_sql``
        is the same rule in SQL."""
        if self.policy_mode == self.PolicyMode.OPEN:
            return True
        addresses, domains = self._allowed_sets()
        address = address.lower()
        if address in addresses:
            return True
        return address.rpartition("@")[2] in domains and not routes_onward(address)

    def allows_domain_of(self, address: str) -> bool:
        """Whether the domain of ``address`` is on the allow-list (whatever its local part)."""
        return address.lower().rpartition("@")[2] in self._allowed_sets()[1]

    def _allowed_sets(self) -> tuple[frozenset[str], frozenset[str]]:
        """The lower-cased allow-lists, built once per instance and list: a broadcast's page,
        its fan-out and the worker check thousands of recipients against one mailbox, and
        building them on every call cost recipients x allowed addresses (19 s for 10,000 of
        each). Built again when a list is replaced, or the row saved or reloaded."""
        cached = self.__dict__.get(_ALLOWED_SETS)
        if (
            cached is None
            or cached[0] is not self.allowed_addresses
            or cached[1] is not self.allowed_domains
        ):
            sets = (
                frozenset(a.lower() for a in self.allowed_addresses),
                frozenset(d.lower() for d in self.allowed_domains),
            )
            cached = (self.allowed_addresses, self.allowed_domains, sets)
            self.__dict__[_ALLOWED_SETS] = cached
        return cached[2]
