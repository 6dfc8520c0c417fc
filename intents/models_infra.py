"""Rows that serve the machinery rather than the domain: the agent API's Idempotency-Key store
and rate windows, and the provider throttle shared by every worker. intents.models re-exports
them."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class ApiIdempotencyKey(models.Model):
    """The agent API's Idempotency-Key record (IETF draft), scoped per tenant."""

    class State(models.TextChoices):
        IN_FLIGHT = "in_flight", _("In flight")
        COMPLETED = "completed", _("Completed")

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    # Of the request without its token: a key is the tenant's, so a rotated token's retry is the
    # same request (agent_api.idempotency).
    fingerprint = models.CharField(max_length=64)
    # The token whose request the row holds: another token gets its answer only if it may see it.
    # Null on rows written before this was kept. Tokens are revoked, never deleted (a tenant's
    # deletion aside), so the column needs no index for SET_NULL.
    token = models.ForeignKey(
        "tenants.AgentToken",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=255)
    state = models.CharField(max_length=12, choices=State.choices, default=State.IN_FLIGHT)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.BinaryField(null=True, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "key"], name="apiidempotencykey_unique_per_tenant"
            ),
        ]
        indexes = [models.Index(fields=["created_at"], name="apiidem_created")]

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"


class ApiRateWindow(models.Model):
    """How many agent API and MCP requests a token made in one minute. Counted with one atomic
    upsert per request (``agent_api.auth.check_request_rate``), so concurrent requests
    cannot overwrite each other's counts; windows past are purged by the sweep."""

    # Indexed by the unique constraint, whose leading column it is.
    token = models.ForeignKey(
        "tenants.AgentToken", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    window_start = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["token", "window_start"], name="apiratewindow_unique_per_token"
            ),
        ]
        indexes = [models.Index(fields=["window_start"], name="apiratewindow_start")]

    def __str__(self) -> str:
        return f"token {self.token_id} at {self.window_start:%H:%M}: {self.count}"


class ProviderThrottle(models.Model):
    """Shared per-AgentMail-key token bucket and circuit breaker, kept in the database so every
    worker process on every host sees the same budget."""

    class Circuit(models.TextChoices):
        CLOSED = "closed", _("Closed")
        OPEN = "open", _("Open")
        HALF_OPEN = "half_open", _("Half open (one probe)")

    key_ref = models.CharField(
        max_length=100, unique=True, help_text="Provider key id or mailbox ref"
    )
    tokens = models.FloatField(default=0)
    refilled_at = models.DateTimeField()
    circuit = models.CharField(max_length=10, choices=Circuit.choices, default=Circuit.CLOSED)
    consecutive_failures = models.PositiveIntegerField(default=0)
    opened_until = models.DateTimeField(null=True, blank=True)
    probe_token = models.UUIDField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key_ref}: {self.circuit}"

    @staticmethod
    def broadcast_key(broadcast_id: int) -> str:
        """The key_ref of a broadcast's own pacing bucket (beside its mailbox key's)."""
        return f"broadcast:{broadcast_id}"

    @classmethod
    def drop_broadcast_bucket(cls, broadcast_id: int) -> None:
        """A broadcast that ended (completed or cancelled) sends nothing more: its bucket row
        goes, in the transition that ends it."""
        cls.objects.filter(key_ref=cls.broadcast_key(broadcast_id)).delete()
