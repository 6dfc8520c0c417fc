"""The addresses a tenant must not send to; one service writes them
(intents.services.suppressions), intents.models re-exports the model."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Suppression(models.Model):
    """An address this tenant must not send to (bounced, complained, rejected, or added by hand)."""

    class Reason(models.TextChoices):
        BOUNCED = "bounced", _("Bounced")
        COMPLAINED = "complained", _("Complained")
        REJECTED = "rejected", _("Rejected by provider")
        MANUAL = "manual", _("Added by a person")

    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="suppressions"
    )
    address = models.EmailField()
    reason = models.CharField(max_length=16, choices=Reason.choices)
    source = models.CharField(max_length=100, blank=True, help_text="Webhook event id or person")
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "address"], name="suppression_unique_address"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.address} ({self.reason})"
