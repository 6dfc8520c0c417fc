"""Outbound agent events: where a tenant wants them (``AgentEventEndpoint``), what happened
(``AgentEvent``, the outbox row written in the transaction of the state change that caused it)
and one delivery of it to one endpoint (``AgentEventDelivery``). intents.models re-exports them.

The event types are a published contract (README "Agent events"): add, never rename.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from common.crypto import SecretUnreadable, seal, unseal
from common.egress import url_shown


class EventType(models.TextChoices):
    DRAFT_APPROVED = "draft.approved", _("A draft was approved")
    DRAFT_EDITED = "draft.edited", _("A person saved a new version of a draft")
    DRAFT_REJECTED = "draft.rejected", _("A draft was rejected")
    DRAFT_EXPIRED = "draft.expired", _("A draft expired without a decision")
    DRAFT_WITHDRAWN = "draft.withdrawn", _("The agent withdrew a draft")
    SEND_ACCEPTED = "send.accepted", _("AgentMail accepted a send")
    SEND_DELIVERED = "send.delivered", _("A send was delivered")
    SEND_BOUNCED = "send.bounced", _("A send bounced")
    SEND_COMPLAINED = "send.complained", _("A recipient complained")
    SEND_NEEDS_ATTENTION = "send.needs_attention", _("A send needs a person")
    SEND_FAILED = "send.failed", _("A send failed")
    SEND_BLOCKED = "send.blocked", _("A send was blocked before the call")
    DRAFT_REOPENED = "draft.reopened", _("An approved draft went back into review")
    SEND_CANCELLED = "send.cancelled", _("A person cancelled a send")
    SEND_EXPIRED = "send.expired", _("A send passed its send-by time unsent")


# The disabled reason of an endpoint whose receiver answered 410 Gone (intents.events.delivery).
GONE_REASON = "HTTP 410"


class AgentEventEndpoint(models.Model):
    """A URL a tenant admin registered for agent events. The signing secret (``whsec_…``) is
    sealed at rest and shown once; after a rotation the previous one also signs until
    ``previous_secret_expires_at``, so a receiver can switch without losing a delivery."""

    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="agent_event_endpoints"
    )
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    event_types = ArrayField(models.CharField(max_length=32, choices=EventType.choices))
    # Only events of drafts of this mailbox; null: every mailbox of the tenant.
    mailbox = models.ForeignKey(
        "mailboxes.Mailbox", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    secret_sealed = models.TextField()
    previous_secret_sealed = models.TextField(blank=True)
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    # Why it is disabled: a person's words, or (disabled_automatically) the last error of the
    # delivery whose every attempt failed; the page says which in the reader's language.
    disabled_reason = models.CharField(max_length=500, blank=True)
    disabled_automatically = models.BooleanField(default=False)
    disabled_at = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(enabled=True) | ~Q(disabled_reason=""),
                name="agentevent_endpoint_disabled_has_reason",
            ),
        ]
        indexes = [models.Index(fields=["tenant", "enabled"], name="agentevent_endpoint_tenant")]

    def __str__(self) -> str:
        return f"Agent event endpoint {self.pk} ({self.url})"

    @property
    def url_shown(self) -> str:
        """The URL with its host's xn-- form beside an IDN host (``common.egress.url_shown``),
        wherever a page shows it."""
        return url_shown(self.url)

    @property
    def disabled_as_gone(self) -> bool:
        """Disabled because the receiver answered 410 Gone, not after a day of failures."""
        return self.disabled_automatically and self.disabled_reason == GONE_REASON

    def _aad(self, which: str) -> str:
        # Bound to the row, as a mailbox's key and a webhook's secret are: sealed for the tenant
        # alone, one endpoint's secret copied onto another of the same tenant opened there.
        if self.pk is None:
            raise ValueError("an endpoint's secret is sealed once the endpoint has its id")
        return f"tenant:{self.tenant_id}:agent_event_endpoint:{self.pk}:{which}"

    def _legacy_aad(self) -> str:
        # How the release before intents 0033 sealed a secret: for the tenant alone. Still read,
        # so that a secret sealed by a process of that release (or before reencrypt_secrets ran)
        # opens; reencrypt_secrets seals each such one for its row (``sealed_for_tenant_only``).
        return f"agent_event_endpoint:{self.tenant_id}:secret"

    def seal_secret(self, plaintext: str) -> str:
        return seal(plaintext, aad=self._aad("secret"))

    def _unseal_secret(self, sealed: str) -> str:
        try:
            return unseal(sealed, aad=self._aad("secret"))
        except SecretUnreadable:
            return unseal(sealed, aad=self._legacy_aad())

    def sealed_for_tenant_only(self, sealed: str) -> bool:
        """Whether ``sealed`` opens only the release before's way (not for this row)."""
        try:
            unseal(sealed, aad=self._aad("secret"))
        except SecretUnreadable:
            try:
                unseal(sealed, aad=self._legacy_aad())
            except SecretUnreadable:
                return False
            return True
        return False

    def reseal_secret(self, sealed: str) -> str:
        """``sealed`` (one of this endpoint's secrets) sealed again under the ring's first key,
        for this row."""
        return self.seal_secret(self._unseal_secret(sealed))

    def previous_secret_still_signs(self, now=None) -> bool:
        """Whether the secret a rotation replaced still signs (its grace has not run out)."""
        now = now or timezone.now()
        return bool(
            self.previous_secret_sealed
            and self.previous_secret_expires_at
            and self.previous_secret_expires_at > now
        )

    def secrets(self, now) -> list[str]:
        """The secrets that sign a delivery now: the current one, and the previous one during
        its grace period (Standard Webhooks allows several signatures in one header)."""
        current = [self._unseal_secret(self.secret_sealed)]
        if self.previous_secret_still_signs(now):
            current.append(self._unseal_secret(self.previous_secret_sealed))
        return current


class AgentEvent(models.Model):
    """One event, written in the transaction of its cause (``intents.events.outbox``); its
    ``public_id`` is the ``webhook-id`` of every delivery and resend of it."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    public_id = models.CharField(max_length=40, unique=True)
    type = models.CharField(max_length=32, choices=EventType.choices)
    draft = models.ForeignKey(
        "intents.Draft", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    intent = models.ForeignKey(
        "intents.SendIntent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # The journal row it was derived from (the cause, for audit; not a foreign key: the journal
    # is append-only and never joined from here on a hot path).
    journal_id = models.BigIntegerField(null=True, blank=True)
    payload = models.JSONField()
    created_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"{self.type} {self.public_id}"


class AgentEventDelivery(models.Model):
    """One event to one endpoint. The worker takes each endpoint's oldest unfinished delivery,
    one at a time, so an endpoint sees its events in the order they were written."""

    class Status(models.TextChoices):
        PENDING = "pending", pgettext_lazy("delivery status", "Pending")
        SENDING = "sending", pgettext_lazy("delivery status", "Sending")
        DELIVERED = "delivered", pgettext_lazy("delivery status", "Delivered")
        FAILED = "failed", pgettext_lazy("delivery status", "Failed")

    UNFINISHED = ("pending", "sending")

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    endpoint = models.ForeignKey(
        AgentEventEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.ForeignKey(AgentEvent, on_delete=models.CASCADE, related_name="deliveries")
    # A person's resend is a new delivery of the same event (same webhook-id), queued last.
    resend_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(db_default=Now())
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "sending", "delivered", "failed"]),
                name="agentevent_delivery_status_valid",
            ),
            models.CheckConstraint(
                condition=~Q(status="sending")
                | (Q(lease_token__isnull=False) & Q(lease_expires_at__isnull=False)),
                name="agentevent_delivery_sending_has_lease",
            ),
        ]
        indexes = [
            # The worker: each endpoint's oldest unfinished delivery.
            models.Index(
                fields=["endpoint", "id"],
                name="agentevent_delivery_head",
                condition=Q(status__in=["pending", "sending"]),
            ),
            # The admin page: an endpoint's recent deliveries.
            models.Index(fields=["endpoint", "-id"], name="agentevent_delivery_recent"),
        ]

    def __str__(self) -> str:
        return f"Delivery {self.pk} of {self.event_id} to {self.endpoint_id}: {self.status}"
