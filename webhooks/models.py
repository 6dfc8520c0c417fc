from __future__ import annotations

import secrets
import uuid

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from mailboxes import crypto
from mailboxes.provider.responses import MESSAGE_ID_MAX_BYTES


def new_webhook_client_id() -> str:
    """The ``client_id`` of a new endpoint's webhook at AgentMail (see ``client_id``)."""
    return f"cs-webhook-{secrets.token_hex(16)}"


class WebhookEndpoint(models.Model):
    """Our receiver for one tenant: the URL id selects the tenant and its signing secrets."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Not registered yet")
        ACTIVE = "active", pgettext_lazy("webhook endpoint", "Active")
        DISABLED = "disabled", pgettext_lazy("webhook endpoint", "Disabled")

    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    provider_webhook_id = models.CharField(max_length=100, blank=True)
    # The client_id the pod webhook is created with (read through client_id), drawn once per
    # row: see Tenant.agentmail_client_id, whose reasons and whose null (a row of the release
    # before) are this one's too. "cs-webhook-<tenant id>" handed a tenant that reused another
    # database's tenant id that tenant's webhook: its URL (another receiver) and its secret.
    # Not unique: rows of an older release share their tenant's id-derived one (two endpoints
    # of one tenant, before webhooks.registration took turns on the tenant).
    agentmail_client_id = models.CharField(
        max_length=100, null=True, blank=True, default=new_webhook_client_id, editable=False
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    last_event_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "active", "disabled"]),
                name="webhookendpoint_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"Webhook endpoint {self.public_id} ({self.tenant_id})"

    @property
    def client_id(self) -> str:
        """The AgentMail client_id of the endpoint's pod webhook: the same on every registration
        of this row, another for any other row, whatever its tenant's id."""
        return self.agentmail_client_id or f"cs-webhook-{self.tenant_id}"


class WebhookSecret(models.Model):
    """A signing secret of an endpoint, sealed at rest. Several are valid during a rotation."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="secrets")
    sealed = models.TextField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Secret {self.pk} of endpoint {self.endpoint_id}"

    def _aad(self) -> str:
        return f"tenant:{self.endpoint.tenant_id}:webhook_endpoint:{self.endpoint_id}:secret"

    def seal(self, plaintext: str) -> str:
        return crypto.seal(plaintext, aad=self._aad())

    def plaintext(self) -> str:
        return crypto.unseal(self.sealed, aad=self._aad())


class WebhookEvent(models.Model):
    """The ledger: one row per (endpoint, svix-id), whatever the number of deliveries."""

    class State(models.TextChoices):
        PENDING = "pending", _("Stored, not applied yet")
        DEFERRED = "deferred", _("Waiting for its message id to be recorded")
        APPLIED = "applied", _("Applied")
        IGNORED = "ignored", _("Ignored (unknown type or no effect)")
        REJECTED = "rejected", _("Rejected (not this tenant's inbox)")
        # Applying it raised WEBHOOK_APPLY_MAX_FAILURES times (a bug, data it cannot take): the
        # appliers and the sweep no longer take it. Only an operator moves it back to pending
        # (``manage.py webhooks_apply --retry-failed``), once the cause is fixed.
        FAILED = "failed", _("Could not be applied: an operator retries it")

    # The receiver's one INSERT writes an entry into every index: endpoint is covered by
    # webhookevent_unique_svix_id, tenant by webhookevent_tenant_recent, and message_id needs no
    # varchar_pattern_ops copy (never matched with LIKE).
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    svix_id = models.CharField(max_length=100)
    event_type = models.CharField(max_length=64)
    event_id = models.CharField(max_length=100, blank=True)
    inbox_id = models.CharField(max_length=254, blank=True)
    message_id = models.CharField(max_length=998, blank=True)
    occurred_at = models.DateTimeField(null=True, blank=True)
    received_at = models.DateTimeField(db_default=Now())
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    outcome = models.CharField(max_length=200, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    # Applies that raised (not lock timeouts, which are retried as they are): the take puts
    # events that failed more often behind the others, and at WEBHOOK_APPLY_MAX_FAILURES the
    # event is ``failed``. Oldest first alone, enough such events filled every batch for ever.
    apply_failures = models.PositiveSmallIntegerField(default=0, db_default=0)
    payload = models.JSONField(null=True, blank=True, help_text="Minimal; purged after retention")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "svix_id"], name="webhookevent_unique_svix_id"
            ),
        ]
        indexes = [
            # The applier's take reads it in order: fewest failures, then oldest.
            models.Index(
                fields=["state", "apply_failures", "received_at"],
                name="webhookevent_take",
                condition=Q(state__in=["pending", "deferred"]),
            ),
            # Events that could not be applied: few, and none the receiver's INSERT writes.
            models.Index(
                fields=["tenant"],
                name="webhookevent_failed",
                condition=Q(state="failed"),
            ),
            models.Index(fields=["tenant", "-received_at"], name="webhookevent_tenant_recent"),
            # The sweep looks for rejected events whose inbox a mailbox has recorded since
            # (services.reapply): few rows, and none the receiver's INSERT (pending) writes.
            models.Index(
                fields=["received_at"],
                name="webhookevent_rejected",
                condition=Q(state="rejected"),
            ),
            # Events are looked up by message only while they wait (deferred until the intent
            # records its message id, or pending for the backfill): applied events leave it.
            models.Index(
                fields=["tenant", "message_id"],
                name="webhookevent_waiting_message",
                condition=Q(state__in=["pending", "deferred"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.svix_id} ({self.state})"


class RecipientDelivery(models.Model):
    """Delivery state of one recipient of one accepted intent; only moves forward."""

    class State(models.TextChoices):
        SENT = "sent", _("Sent")
        DELIVERED = "delivered", _("Delivered")
        BOUNCED = "bounced", _("Bounced")
        COMPLAINED = "complained", _("Complained")
        REJECTED = "rejected", _("Rejected")

    # sent < delivered < {rejected, bounced, complained}. Events arrive in any order, so the three
    # outcomes need a total order too, or the final state would depend on arrival: a complaint
    # says the most about the recipient, a bounce about the address, a rejection only about us.
    RANK = {"sent": 1, "delivered": 2, "rejected": 3, "bounced": 4, "complained": 5}

    # Rows are read by intent (the unique constraint's leading column serves that); an index on
    # either key alone was two more entries per delivery event, on insert and on every update.
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    intent = models.ForeignKey(
        "intents.SendIntent", on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    address = models.EmailField()
    state = models.CharField(max_length=12, choices=State.choices)
    updated_at = models.DateTimeField(auto_now=True)
    last_event = models.ForeignKey(
        WebhookEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["intent", "address"], name="recipientdelivery_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.address}: {self.state}"


# The most UTF-8 bytes of a message id stored whole: it is indexed (the ledger's waiting index,
# the inbound unique key), and PostgreSQL refuses an index entry over about 2,700 bytes. A longer
# one is stored cut (``normalize.bounded_id``), so no reply can name it as recorded. The provider
# layer's own bound on what a send records (``usable_id``): one figure for both.
MESSAGE_ID_BYTES = MESSAGE_ID_MAX_BYTES


class InboundMessage(models.Model):
    """A customer's message into one of our mailboxes (from message.received), kept short."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    mailbox = models.ForeignKey(
        "mailboxes.Mailbox", on_delete=models.CASCADE, related_name="inbound"
    )
    thread_id = models.CharField(max_length=255, blank=True, db_index=True)
    message_id = models.CharField(max_length=998)
    sender = models.CharField(max_length=320)
    # One more than a sendable subject: a cut one stays too long to reply to
    # (normalize.SUBJECT_KEPT).
    subject = models.CharField(max_length=999, blank=True)
    # The subject held NUL or an unpaired surrogate, stored as U+FFFD: not the one a reply gets.
    subject_replaced = models.BooleanField(db_default=False)
    preview = models.CharField(max_length=500, blank=True)
    # Where its Reply-To asks replies to go, but its sender (normalize.reply_to_others): shown
    # to the reviewer beside the sender, since an agent may write there.
    reply_to = models.JSONField(default=list, blank=True, db_default=[])
    received_at = models.DateTimeField()
    # When we stored it (the database's clock): from then on a reviewer could see it. A message
    # written before a draft but recorded after it (a webhook delivered late) was seen by no one.
    recorded_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["mailbox", "message_id"], name="inboundmessage_unique"),
        ]

    def __str__(self) -> str:
        # No subject: this is the title of the operators' admin pages, which show no mail content.
        return f"{self.sender}: {self.message_id}"


class InboundBackfillMark(models.Model):
    """How far the backfill has listed a mailbox's inbox. ``covered_until``: every message up to
    then (our clock: the backfill delay's horizon of the last listing that ended) was seen; the
    next listing starts the lookup's clock margin (15 min) before it. It starts from here, not
    from the newest message recorded: a message whose webhook was lost stays behind a newer one
    that arrived, and listing from the newer one never saw it.

    ``resume_at``: AgentMail's own time of the last message a listing cut short by its budget got
    through; the next one starts right there when that is later. Without it, an inbox with more
    messages in those 15 minutes than a run lists (a broadcast's sends count) never got further.

    ``turn_at``: when a run last began asking about this mailbox (the database clock). Runs take
    the mailboxes turned to longest ago first: in tenant order, a run cut short by its budget or
    its time was cut short before the same tenants every time.
    """

    mailbox = models.OneToOneField(
        "mailboxes.Mailbox", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    covered_until = models.DateTimeField()
    resume_at = models.DateTimeField(null=True, blank=True)
    turn_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"mailbox {self.mailbox_id} listed until {self.covered_until.isoformat()}"


class BackfillLease(models.Model):
    """The backfill run asking AgentMail about a tenant's mailboxes (``holder``), until when
    (``held_until``, database clock). The schedule's run and an operator's command at the same
    moment each spent the whole per-key budget, and AgentMail's rate limits are per key: the run
    that finds the tenant held skips it. A row lease, not a session advisory lock, so it holds
    behind PgBouncer's transaction mode (DEPLOYMENT.md) and lapses after a crash."""

    tenant = models.OneToOneField(
        "tenants.Tenant", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    holder = models.UUIDField()
    held_until = models.DateTimeField()

    def __str__(self) -> str:
        return f"tenant {self.tenant_id} held until {self.held_until.isoformat()}"
