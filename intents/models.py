from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class Draft(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", _("Pending review")
        APPROVED = "approved", _("Approved")
        REJECTED = "rejected", _("Rejected")
        EXPIRED = "expired", _("Expired")
        WITHDRAWN = "withdrawn", _("Withdrawn")

    class AssignedHow(models.TextChoices):
        TAKEN = "taken", _("Taken")
        HANDED = "handed", _("Handed over")
        AUTO = "auto", _("Assigned automatically")
        ESCALATED = "escalated", pgettext_lazy("assigned how", "Escalated")

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="drafts")
    mailbox = models.ForeignKey(
        "mailboxes.Mailbox", on_delete=models.PROTECT, related_name="drafts"
    )
    agent_token = models.ForeignKey(
        "tenants.AgentToken",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="drafts",
    )
    created_by = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    thread_id = models.CharField(max_length=255, blank=True)
    in_reply_to = models.CharField(
        max_length=998, blank=True, help_text="Provider message id replied to"
    )
    # What produced the draft: model name, prompt version, sources the agent used.
    provenance = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    priority = models.SmallIntegerField(default=0)
    current_version = models.PositiveIntegerField(default=1)
    review_deadline = models.DateTimeField(null=True, blank=True)
    not_after = models.DateTimeField(null=True, blank=True, help_text="Do not send after this time")
    decided_by = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reject_reason = models.TextField(blank=True)
    # Ownership: who holds the draft (coordination, not a lock: any approver may still decide).
    # A claim taken by hand lapses at claim_expires_at unless renewed; an assignment (handed,
    # automatic, escalation) has no expiry. Cleared when the draft leaves pending.
    assignee = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    assigned_how = models.CharField(max_length=12, choices=AssignedHow.choices, blank=True)
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    # Deadlines (SLA), fixed at creation from the customer's message and the target then in force.
    sla_due_at = models.DateTimeField(null=True, blank=True)
    sla_warn_at = models.DateTimeField(null=True, blank=True)
    sla_warned_at = models.DateTimeField(null=True, blank=True)
    sla_breached_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    # Whom the round-robins last picked (automatic assignment per mailbox, escalation to a role
    # per tenant): the next pick is the member after them. Kept after the draft leaves pending.
    auto_assigned_to = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    escalated_to = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who held it when it breached (for the health panel), kept after it leaves pending.
    sla_breach_holder = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The database's clock, as the customer's messages' recorded_at: which messages are newer
    # than the draft (intents_hold_stale, draft_approve) must not depend on a web host's clock.
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(auto_now=True)

    if TYPE_CHECKING:
        # Not columns: review.pages marks each queue row with what the viewer may do.
        can_decide: bool
        approve_blocked: bool
        # Blocked (four-eyes on edit) for a version of theirs before the current one.
        wrote_earlier_version: bool
        more_recipients: int
        # Recipients with letters outside ASCII, each with them named (bulk approve leaves it).
        lookalikes: dict[str, str]
        # Its thread's organisations when several, and the answered message's author when the
        # reply leaves them out (intents.policy; bulk approve leaves it out): the domains as a
        # sentence names them (domains_named), "" when one.
        thread_domains: str
        author_left_out: str
        # Who its HTML shows otherwise to, named (a phone's width, dark mode:
        # intents.html_styles.reader_looks; bulk approve leaves it out).
        reader_looks: str
        # The version since which its HTML stood while the text changed (intents.selectors.
        # drafts.html_unchanged_since; bulk approve leaves it out), None if not so.
        html_unchanged_since: int | None
        # A link of its HTML leads elsewhere than it shows (intents.html_links; bulk approve
        # leaves it out).
        misleading_links: bool
        # Its subject or a body holds characters nobody sees (intents.policy.
        # invisible_in_content; bulk approve leaves it out).
        invisible_characters: bool
        # Its subject or a body names a domain that may read as another (intents.policy.
        # lookalike_hosts_in_content; bulk approve leaves it out).
        lookalike_hosts: bool
        # intents.selectors.queue: the current version as the queue lists it (not a saved row).
        current: DraftVersion
        # review.pages.queue: who else has it open right now.
        present: list[DraftPresence]
        # review.pages.queue: another approved draft's reply to the same message went out or
        # may still (intents.selectors.drafts.drafts_answered_elsewhere; bulk approve leaves it).
        answered_elsewhere: bool
        # intents.selectors.drafts.other_replies_to_its_message: its latest send, or None.
        latest_intent: SendIntent | None

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "approved", "rejected", "expired", "withdrawn"]),
                name="draft_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(status="pending") | Q(assignee__isnull=True),
                name="draft_only_pending_held",
            ),
            # A new message starts a thread of its own at AgentMail; only a reply joins one.
            models.CheckConstraint(
                condition=Q(thread_id="") | ~Q(in_reply_to=""),
                name="draft_thread_only_for_replies",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "status", "created_at", "id"], name="draft_queue"),
            models.Index(fields=["status", "review_deadline"], name="draft_deadline"),
            # "Mine": a holder's pending drafts, oldest first.
            models.Index(
                fields=["tenant", "assignee", "created_at", "id"],
                name="draft_held",
                condition=Q(status="pending", assignee__isnull=False),
            ),
            # "Unassigned", oldest first.
            models.Index(
                fields=["tenant", "created_at", "id"],
                name="draft_unheld",
                condition=Q(status="pending", assignee__isnull=True),
            ),
            # The queue sorted by time left.
            models.Index(
                fields=["tenant", "sla_due_at", "id"],
                name="draft_sla_due",
                condition=Q(status="pending"),
            ),
            # The sweep expires pending drafts whose send-by time passed (draft_expire_due).
            models.Index(
                fields=["not_after"],
                name="draft_pending_not_after",
                condition=Q(status="pending", not_after__isnull=False),
            ),
            # A customer's new message locks its thread's pending drafts (intents_hold_stale).
            models.Index(
                fields=["mailbox", "thread_id"],
                name="draft_pending_thread",
                condition=Q(status="pending"),
            ),
            # The other replies to a draft's message (other_replies_to_its_message): a second
            # answer to one customer message is named on the page and left out of bulk approval.
            models.Index(
                fields=["mailbox", "in_reply_to"],
                name="draft_answering",
                condition=Q(status__in=["pending", "approved"]) & ~Q(in_reply_to=""),
            ),
            # "Escalated", oldest first.
            models.Index(
                fields=["tenant", "created_at", "id"],
                name="draft_escalated",
                condition=Q(status="pending", escalated_at__isnull=False),
            ),
            # The health panel: breaches of the last days.
            models.Index(
                fields=["tenant", "sla_due_at"],
                name="draft_sla_history",
                condition=Q(sla_due_at__isnull=False),
            ),
            # The round-robins' last pick.
            models.Index(
                fields=["mailbox", "-id"],
                name="draft_auto_assigned",
                condition=Q(auto_assigned_to__isnull=False),
            ),
            models.Index(
                fields=["tenant", "-escalated_at", "-id"],
                name="draft_escalations",
                condition=Q(escalated_to__isnull=False),
            ),
            # Reviewer analytics: the drafts decided in a period (intents.selectors.analytics).
            models.Index(
                fields=["tenant", "decided_at"],
                name="draft_decided",
                condition=Q(decided_at__isnull=False),
            ),
            # The sweep: claims that lapse.
            models.Index(
                fields=["claim_expires_at"],
                name="draft_claim_lapse",
                condition=Q(status="pending", claim_expires_at__isnull=False),
            ),
            # The sweep: drafts entering their warning window or past their target.
            models.Index(
                fields=["sla_warn_at"],
                name="draft_sla_warn_due",
                condition=Q(status="pending", sla_warned_at__isnull=True),
            ),
            models.Index(
                fields=["sla_due_at"],
                name="draft_sla_breach_due",
                condition=Q(status="pending", sla_breached_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"Draft {self.pk} ({self.status})"


class DraftVersion(models.Model):
    """One immutable revision of a draft. Approval names a version and its content hash."""

    class Author(models.TextChoices):
        AGENT = "agent", _("Agent")
        PERSON = "person", _("Person")

    draft = models.ForeignKey(Draft, on_delete=models.CASCADE, related_name="versions")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    number = models.PositiveIntegerField()
    to = ArrayField(models.EmailField(), default=list)
    cc = ArrayField(models.EmailField(), default=list, blank=True)
    bcc = ArrayField(models.EmailField(), default=list, blank=True)
    subject = models.CharField(max_length=998)
    text = models.TextField(blank=True)
    html = models.TextField(blank=True)
    author_kind = models.CharField(max_length=8, choices=Author.choices)
    author_user = models.ForeignKey(
        "tenants.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_token = models.ForeignKey(
        "tenants.AgentToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # "N:" + sha256 hex for hash schemes after 1 (intents/hashing.py).
    content_hash = models.CharField(max_length=72)
    # Set by the retention purge: the body is gone, the hash and metadata stay.
    body_purged_at = models.DateTimeField(null=True, blank=True)
    # Set by the retention purge on a person's version that changed the agent's version before
    # it: that change's size (``intents.changes.version_change``), which the reviewer analytics
    # report and cannot measure again from the emptied bodies. Null: unchanged, no agent's
    # version before it, or not purged.
    purged_edit_size = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["draft", "number"], name="draftversion_unique_number"),
            models.CheckConstraint(
                condition=Q(author_kind__in=["agent", "person"]), name="draftversion_author_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"Draft {self.draft_id} v{self.number}"

    @property
    def recipients(self) -> dict[str, list[str]]:
        return {"to": list(self.to), "cc": list(self.cc), "bcc": list(self.bcc)}

    @property
    def all_recipients(self) -> list[str]:
        return [*self.to, *self.cc, *self.bcc]


class SendIntent(models.Model):
    """The durable decision to send one approved draft version, exactly once."""

    class State(models.TextChoices):
        QUEUED = "queued", pgettext_lazy("send state", "Queued")
        SENDING = "sending", _("Sending")
        UNCERTAIN = "uncertain", _("Outcome uncertain")
        ACCEPTED = "accepted", _("Accepted by AgentMail")
        NEEDS_ATTENTION = "needs_attention", _("Needs attention")
        FAILED = "failed", _("Failed")
        BLOCKED = "blocked", _("Blocked")
        EXPIRED = "expired", _("Expired")
        CANCELLED = "cancelled", _("Cancelled")

    TERMINAL = frozenset({"accepted", "failed", "blocked", "expired", "cancelled"})
    # No worker acts on these again: a broadcast whose every send is one of them is done.
    SETTLED = TERMINAL | {"needs_attention"}

    # Indexes: every claim, pre-check and record rewrites the row, and as ``state`` is indexed no
    # such update is HOT: each writes an entry into every index of the table. So no index here
    # repeats the leading column of another (tenant: intent_tenant_state; broadcast:
    # intent_broadcast_state), none is a ``varchar_pattern_ops`` copy (no LIKE on these columns),
    # and the columns that stay empty for most of a row's life are indexed only where set.
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="intents", db_index=False
    )
    mailbox = models.ForeignKey(
        "mailboxes.Mailbox", on_delete=models.PROTECT, related_name="intents"
    )
    # A reply names its draft and version; a broadcast's send names the broadcast and the
    # recipient instead (exactly one of the two, see the constraint).
    draft = models.ForeignKey(
        Draft, null=True, blank=True, on_delete=models.CASCADE, related_name="intents"
    )
    draft_version = models.OneToOneField(
        DraftVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="intent"
    )
    broadcast = models.ForeignKey(
        "intents.Broadcast",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="intents",
        db_index=False,
    )
    # One send per recipient of a broadcast, however often the fan-out runs: the partial
    # constraint intent_unique_broadcast_recipient, not a OneToOneField, whose unique index
    # would hold a NULL entry for every reply, written again on each of its updates.
    broadcast_recipient = models.ForeignKey(
        "intents.BroadcastRecipient",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="intents",
        db_index=False,
    )
    approver = models.ForeignKey("tenants.User", on_delete=models.PROTECT, related_name="+")
    approved_at = models.DateTimeField()
    # "N:" + sha256 hex for hash schemes after 1 (intents/hashing.py).
    content_hash = models.CharField(max_length=72)
    recipients = models.JSONField(help_text="{'to': [...], 'cc': [...], 'bcc': [...]} as approved")
    # Unique (the constraint intent_unique_idempotency_key): one key per intent, for life.
    idempotency_key = models.CharField(max_length=128, editable=False)
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    priority = models.SmallIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    # The undo window (Tenant.send_hold_seconds, database clock): no worker claims the intent
    # before it, and intent_undo works only while it lies ahead. Null: approved without a hold.
    hold_until = models.DateTimeField(null=True, blank=True)
    lease_token = models.UUIDField(null=True, blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    first_attempt_at = models.DateTimeField(null=True, blank=True)
    not_after = models.DateTimeField(null=True, blank=True)
    # Set when the customer wrote again in the thread after approval: a person must re-confirm.
    held_reason = models.CharField(max_length=200, blank=True)
    provider_message_id = models.CharField(max_length=998, blank=True)
    provider_thread_id = models.CharField(max_length=255, blank=True)
    last_error_code = models.CharField(max_length=64, blank=True)
    last_error_detail = models.TextField(blank=True)
    resolved_by = models.ForeignKey(
        "tenants.User",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    resolution_note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    if TYPE_CHECKING:
        # Not columns: review.pages.attention marks each row with what the viewer may do.
        can_decide: bool
        can_reopen: bool
        may_have_gone_out: bool
        # review.pages.outbox_marks: seconds left to undo it, for the viewer (0: no undo).
        undo_seconds: int

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_key"], name="intent_unique_idempotency_key"
            ),
            models.UniqueConstraint(
                fields=["broadcast_recipient"],
                name="intent_unique_broadcast_recipient",
                condition=Q(broadcast_recipient__isnull=False),
            ),
            models.CheckConstraint(
                condition=Q(
                    state__in=[
                        "queued",
                        "sending",
                        "uncertain",
                        "accepted",
                        "needs_attention",
                        "failed",
                        "blocked",
                        "expired",
                        "cancelled",
                    ]
                ),
                name="intent_state_valid",
            ),
            models.CheckConstraint(
                condition=~Q(state="sending")
                | (Q(lease_token__isnull=False) & Q(lease_expires_at__isnull=False)),
                name="intent_sending_has_lease",
            ),
            models.CheckConstraint(
                condition=~Q(state="accepted") | ~Q(provider_message_id=""),
                name="intent_accepted_has_message_id",
            ),
            # The claim query reads next_attempt_at (its index); a hold must never be earlier.
            models.CheckConstraint(
                condition=Q(hold_until__isnull=True) | Q(next_attempt_at__gte=F("hold_until")),
                name="intent_not_due_inside_hold",
            ),
            models.CheckConstraint(
                condition=(
                    Q(draft__isnull=False, draft_version__isnull=False)
                    & Q(broadcast__isnull=True, broadcast_recipient__isnull=True)
                )
                | (
                    Q(draft__isnull=True, draft_version__isnull=True)
                    & Q(broadcast__isnull=False, broadcast_recipient__isnull=False)
                ),
                name="intent_reply_or_broadcast",
            ),
        ]
        indexes = [
            # The claim query: due queued intents, highest priority then oldest first.
            models.Index(
                fields=["-priority", "next_attempt_at", "id"],
                name="intent_due",
                condition=Q(state="queued"),
            ),
            models.Index(fields=["state", "lease_expires_at"], name="intent_lease"),
            models.Index(fields=["tenant", "state", "-updated_at"], name="intent_tenant_state"),
            models.Index(
                fields=["broadcast", "state"],
                name="intent_broadcast_state",
                condition=Q(broadcast__isnull=False),
            ),
            # Webhook events find their intent by the provider's message id, set on acceptance.
            models.Index(
                fields=["provider_message_id"],
                name="intent_provider_message",
                condition=~Q(provider_message_id=""),
            ),
            models.Index(
                fields=["resolved_by"],
                name="intent_resolved_by",
                condition=Q(resolved_by__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"Intent {self.pk} ({self.state})"

    @property
    def label(self) -> str:
        """Every send carries this label, so a lookup by label can prove a send happened."""
        return f"cs-intent-{self.pk}"


class SendAttempt(models.Model):
    """One provider call, committed before the call is made.

    Its table's pages are filled to 40 % (migration 0032), so that closing a batch's rows is a
    HOT update: keep the columns the close writes out of every index."""

    class Kind(models.TextChoices):
        SEND = "send", _("Send")
        REPLAY = "replay", _("Reconcile by replaying with the same key")
        LOOKUP = "lookup", _("Reconcile by label lookup")

    class Outcome(models.TextChoices):
        PENDING = "pending", _("In flight")
        ACCEPTED = "accepted", pgettext_lazy("attempt outcome", "Accepted")
        RETRY = "retry", _("Retry later")
        UNCERTAIN = "uncertain", _("Uncertain")
        PERMANENT = "permanent", _("Permanent failure")
        NOT_FOUND = "not_found", _("Not found")
        FENCED = "fenced", _("Lease lost; result not applied")

    # Lookups by intent use sendattempt_unique_number (intent, number).
    intent = models.ForeignKey(
        SendIntent, on_delete=models.CASCADE, related_name="attempts_log", db_index=False
    )
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    number = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.SEND)
    worker = models.CharField(max_length=100)
    lease_token = models.UUIDField(null=True, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=12, choices=Outcome.choices, default=Outcome.PENDING)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_detail = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    provider_message_id = models.CharField(max_length=998, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["intent", "number"], name="sendattempt_unique_number"),
        ]

    def __str__(self) -> str:
        return f"Attempt {self.number} of intent {self.intent_id}: {self.outcome}"


class IntentEvent(models.Model):
    """Append-only journal of every draft and intent transition (a trigger refuses UPDATE/DELETE)."""

    class Actor(models.TextChoices):
        PERSON = "person", _("Person")
        AGENT = "agent", _("Agent")
        WORKER = "worker", _("Worker")
        SWEEP = "sweep", _("Sweep")
        WEBHOOK = "webhook", _("Webhook")

    # Appended several times per send: tenant is covered by intentevent_tenant_recent, and the
    # columns most rows leave empty are indexed only where set.
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    draft = models.ForeignKey(
        Draft, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    intent = models.ForeignKey(
        SendIntent, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    broadcast = models.ForeignKey(
        "intents.Broadcast",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
    )
    actor_kind = models.CharField(max_length=8, choices=Actor.choices)
    actor_user = models.ForeignKey(
        "tenants.User",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    actor_token = models.ForeignKey(
        "tenants.AgentToken",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    # Who acted, in words, as written then: a non-person actor's label (a worker id, a webhook's
    # svix id, "fan-out"), or a person's address when they acted (intents.journal fills it), so
    # the journal still names them as they were after their address changes. 254: an address.
    actor_label = models.CharField(max_length=254, blank=True)
    action = models.CharField(max_length=64)
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20, blank=True)
    reason = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    # The database's clock, not the writing process's: a worker with a skewed clock must not
    # reorder the evidence.
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="intentevent_tenant_recent"),
            models.Index(
                fields=["broadcast"],
                name="intentevent_broadcast",
                condition=Q(broadcast__isnull=False),
            ),
            models.Index(
                fields=["actor_user"],
                name="intentevent_actor_user",
                condition=Q(actor_user__isnull=False),
            ),
            models.Index(
                fields=["actor_token"],
                name="intentevent_actor_token",
                condition=Q(actor_token__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.from_state}->{self.to_state}"


# Re-exported: intents.models is where Django and the code look for the app's models.
from intents.models_attachments import (  # noqa: E402
    AttachmentBlob,
    AttachmentCharge,
    AttachmentStorage,
    DraftAttachment,
    MailboxAttachmentStorage,
)
from intents.models_broadcast import Broadcast, BroadcastRecipient  # noqa: E402
from intents.models_events import (  # noqa: E402
    AgentEvent,
    AgentEventDelivery,
    AgentEventEndpoint,
    EventType,
)
from intents.models_infra import ApiIdempotencyKey, ApiRateWindow, ProviderThrottle  # noqa: E402
from intents.models_suppression import Suppression  # noqa: E402
from intents.models_team import DraftNote, DraftPresence  # noqa: E402

__all__ = [
    "AgentEvent",
    "AgentEventDelivery",
    "AgentEventEndpoint",
    "ApiIdempotencyKey",
    "ApiRateWindow",
    "AttachmentBlob",
    "AttachmentCharge",
    "AttachmentStorage",
    "Broadcast",
    "BroadcastRecipient",
    "Draft",
    "DraftAttachment",
    "DraftNote",
    "DraftPresence",
    "DraftVersion",
    "EventType",
    "IntentEvent",
    "MailboxAttachmentStorage",
    "ProviderThrottle",
    "SendAttempt",
    "SendIntent",
    "Suppression",
]
