"""A broadcast: one message template sent to many recipients, each their own message, approved
once by a person over the template, the variables and the full recipient list (issue 19).
intents.models re-exports both models."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class Broadcast(models.Model):
    class State(models.TextChoices):
        PENDING_REVIEW = "pending_review", _("Pending review")
        APPROVED = "approved", _("Approved")
        FANNING_OUT = "fanning_out", _("Creating sends")
        SENDING = "sending", _("Sending")
        PAUSED = "paused", _("Paused")
        COMPLETED = "completed", _("Completed")
        CANCELLED = "cancelled", pgettext_lazy("broadcast state", "Cancelled")
        REJECTED = "rejected", pgettext_lazy("broadcast state", "Rejected")

    # Sends of these broadcasts may be claimed; every other state holds them back.
    SENDABLE = frozenset({"fanning_out", "sending"})
    FINISHED = frozenset({"completed", "cancelled", "rejected"})

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    mailbox = models.ForeignKey("mailboxes.Mailbox", on_delete=models.PROTECT, related_name="+")
    agent_token = models.ForeignKey(
        "tenants.AgentToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    name = models.CharField(max_length=200, blank=True)
    subject = models.CharField(max_length=998)
    text = models.TextField(blank=True)
    html = models.TextField(blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING_REVIEW)
    # Sends per second for this broadcast; null: settings.BROADCAST_RATE_PER_SECOND. Always capped
    # below the mailbox key's own rate (intents.sending.throttle), so replies keep headroom.
    rate_per_second = models.FloatField(null=True, blank=True)
    recipient_count = models.PositiveIntegerField(default=0)
    # sha256 over the recipients' leaf hashes in canonical order (intents.broadcast_hashing).
    recipients_digest = models.CharField(max_length=64, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    approved_by = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_hash = models.CharField(max_length=64, blank=True)
    # The undo window (Tenant.send_hold_seconds at approval, database clock): no send of the
    # broadcast is made before it ends, so an undo until then finds nothing sent. Null: approved
    # without one (the window was 0), or not approved.
    hold_until = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reject_reason = models.TextField(blank=True)
    # Fan-out progress: every recipient with position <= this has been handled (an intent made
    # or a skip recorded), in the same transaction that moved it.
    fanout_position = models.IntegerField(default=-1)
    # Retention (intents.retention): when text, html and every recipient's variables were
    # emptied, the tenant's retention after the broadcast finished. The subject template, the
    # addresses, the hashes and the journal stay: the audit record.
    body_purged_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    state__in=[
                        "pending_review",
                        "approved",
                        "fanning_out",
                        "sending",
                        "paused",
                        "completed",
                        "cancelled",
                        "rejected",
                    ]
                ),
                name="broadcast_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["pending_review", "rejected"])
                | (Q(approved_by__isnull=False) & ~Q(approved_hash="")),
                name="broadcast_approved_has_approval",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="broadcast_recent"),
            models.Index(
                fields=["state"],
                name="broadcast_fanning_out",
                condition=Q(state__in=["approved", "fanning_out", "sending"]),
            ),
        ]

    def __str__(self) -> str:
        return f"Broadcast {self.pk} ({self.state})"


class BroadcastRecipient(models.Model):
    """One address of a broadcast with its template variables; ``position`` is its place in the
    canonical order (sorted by address) that the approval hash covers."""

    class Skip(models.TextChoices):
        NONE = "", _("Not skipped")
        SUPPRESSED = "suppressed", _("Suppressed")
        NOT_ALLOWED = "not_allowed", _("Outside the recipient policy")

    broadcast = models.ForeignKey(Broadcast, on_delete=models.CASCADE, related_name="recipients")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    # The row of the upload it came from (1-based), for error reports and the page.
    source_row = models.PositiveIntegerField()
    address = models.EmailField(max_length=254)
    variables = models.JSONField(default=dict, blank=True)
    leaf_hash = models.CharField(max_length=64)
    skip_reason = models.CharField(max_length=16, choices=Skip.choices, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["broadcast", "position"], name="broadcastrecipient_unique_position"
            ),
            models.UniqueConstraint(
                fields=["broadcast", "address"], name="broadcastrecipient_unique_address"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.address} of broadcast {self.broadcast_id}"
