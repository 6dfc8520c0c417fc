"""The team's own rows about a draft: internal notes between reviewers and who has it open now.
Neither is ever sent nor hashed; intents.models re-exports both."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Length, Now
from django.db.models.lookups import GreaterThan, LessThanOrEqual
from django.utils.translation import gettext_lazy as _


class DraftNote(models.Model):
    """An internal note between reviewers on a draft: never sent, never hashed, not in the agent
    API. Append-only (no edit or delete): like the journal it is part of the review record; a
    wrong note is answered by a newer one."""

    MAX_LENGTH = 2_000

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    draft = models.ForeignKey("intents.Draft", on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey("tenants.User", on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    # The database's clock, as the journal's: notes and journal rows interleave in time order.
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(GreaterThan(Length("text"), 0))
                & Q(LessThanOrEqual(Length("text"), 2_000)),
                name="draftnote_text_length",
            ),
        ]
        indexes = [models.Index(fields=["draft", "created_at", "id"], name="draftnote_draft")]

    def __str__(self) -> str:
        return f"Note {self.pk} on draft {self.draft_id}"


class DraftPresence(models.Model):
    """Who has a draft open right now: one row per person and draft, refreshed by the page's
    heartbeat and considered gone PRESENCE_SECONDS after the last one. Ephemeral, so not
    journaled; the edit conflict check (base_version) stays the safety net."""

    class Mode(models.TextChoices):
        VIEWING = "viewing", _("Viewing")
        EDITING = "editing", _("Editing")

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    draft = models.ForeignKey("intents.Draft", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey("tenants.User", on_delete=models.CASCADE, related_name="+")
    mode = models.CharField(max_length=8, choices=Mode.choices)
    # Since when in this mode (the database clock): "Ana is editing since 14:02".
    started_at = models.DateTimeField(db_default=Now())
    seen_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["draft", "user"], name="draftpresence_one_per_person"),
            models.CheckConstraint(
                condition=Q(mode__in=["viewing", "editing"]), name="draftpresence_mode_valid"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "seen_at"], name="draftpresence_recent")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.mode} draft {self.draft_id}"
