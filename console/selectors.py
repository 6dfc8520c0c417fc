"""Reads for the tenant admin pages; every query is filtered by the tenant."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING

from django.db.models import (
    Case,
    CharField,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Max,
    Min,
    Prefetch,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce, Concat, Now, NullIf
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from common.addresses import normalize_address, suppression_keys
from intents.models import Draft, IntentEvent, SendAttempt, SendIntent, Suppression
from intents.models_events import AgentEventEndpoint
from intents.reason_words import MACHINE_ACTORS
from intents.selectors.deadlines import sla_breaches
from intents.selectors.intents import current_sends, oldest_queued_age_seconds
from intents.selectors.provider_waits import OpenCircuit, open_circuits
from intents.selectors.storage import (
    MailboxStorageUse,
    StorageUse,
    attachment_storage,
    attachment_storage_by_mailbox,
)
from intents.sending.lease import CALL_TOO_LATE
from mailboxes.models import Mailbox
from tenants.invitations import with_expiry
from tenants.models import AgentToken, AuditEvent, Invitation, Membership, Tenant
from tenants.tokens import token_status
from webhooks.models import WebhookEndpoint, WebhookEvent

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


@dataclass(frozen=True)
class MemberStatus:
    code: str  # "active", "deactivated", "account_disabled"
    label: StrOrPromise
    badge: str  # the CSS class of its badge


def member_status(membership: Membership) -> MemberStatus:
    """The one status a person has in this tenant. Two flags decide whether they may act: this
    membership's and their account's (an operator may disable a user everywhere). The pages
    showed only the first, so a disabled account read "active" while nothing it did worked."""
    if not membership.user.is_active:
        return MemberStatus("account_disabled", _("account disabled"), "bad")
    if not membership.is_active:
        return MemberStatus("deactivated", _("deactivated"), "bad")
    return MemberStatus("active", _("active"), "ok")


def members(tenant: Tenant) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(tenant=tenant)
        .select_related("user")
        .prefetch_related(
            Prefetch("approve_mailboxes", queryset=Mailbox.objects.order_by("address"))
        )
        .order_by("-is_active", "role", "user__email")
    )


def member(tenant: Tenant, membership_id: int) -> Membership | None:
    return members(tenant).filter(pk=membership_id).first()


def invitations(tenant: Tenant, limit: int = 100) -> list[Invitation]:
    """Invitations not taken up, newest first: pending (live or expired), declined, revoked.
    Accepted ones are members."""

    return list(
        with_expiry(Invitation.objects.filter(tenant=tenant))
        .exclude(state=Invitation.State.ACCEPTED)
        .select_related("invited_by")
        .prefetch_related(
            Prefetch("approve_mailboxes", queryset=Mailbox.objects.order_by("address"))
        )
        .order_by("-created_at", "-id")[:limit]
    )


def mailboxes(tenant: Tenant):
    return Mailbox.objects.filter(tenant=tenant).order_by("address")


def mailbox(tenant: Tenant, mailbox_id: int) -> Mailbox | None:
    try:
        return Mailbox.objects.get(tenant=tenant, pk=mailbox_id)
    except Mailbox.DoesNotExist:
        return None


# The sends that wait on a mailbox whose key AgentMail refused: the worker calls nothing for them.
_WAITING_ON_KEY = Q(intents__state__in=["queued", "uncertain"])


@dataclass(frozen=True)
class KeyRefused:
    """A mailbox whose key AgentMail refused, and its sends waiting for the key."""

    mailbox: Mailbox
    waiting: int


def key_refused_mailboxes(tenant: Tenant, mailbox_id: int | None = None) -> list[KeyRefused]:
    """The tenant's mailboxes whose key AgentMail refused (mailboxes.key_health), each with its
    queued and uncertain sends, which wait for an admin to check the key; one query."""
    qs = Mailbox.objects.filter(tenant=tenant, key_refused_at__isnull=False)
    if mailbox_id is not None:
        qs = qs.filter(pk=mailbox_id)
    rows = qs.annotate(waiting=Count("intents", filter=_WAITING_ON_KEY)).order_by("address")
    return [KeyRefused(mailbox, mailbox.waiting) for mailbox in rows]


def tokens(tenant: Tenant) -> QuerySet[AgentToken]:
    """Every agent token of the tenant, revoked ones too (their drafts stay in the figures)."""
    return AgentToken.objects.filter(tenant=tenant).order_by("name", "pk")


def token(tenant: Tenant, token_id: int) -> AgentToken | None:
    return AgentToken.objects.filter(tenant=tenant, pk=token_id).first()


def token_rows(tenant: Tenant) -> list[dict]:
    """The tenant's agent tokens with their status, live ones first."""
    tokens = (
        AgentToken.objects.filter(tenant=tenant)
        .select_related("created_by")
        .prefetch_related("mailboxes")
        .order_by("revoked_at", "-created_at")
    )
    labels = dict(AgentToken.Scope.choices)
    return [
        {
            "token": t,
            "status": token_status(t),
            "scopes": [(scope, labels.get(scope, scope)) for scope in t.scopes],
        }
        for t in tokens
    ]


# How the suppressions page names each reason (intents.Suppression.Reason holds the codes).
SUPPRESSION_REASONS = {
    "bounced": _("bounced"),
    "complained": _("complained"),
    "rejected": _("rejected by provider"),
    "manual": _("added by a person"),
}


def suppression_reason(code: str) -> StrOrPromise:
    return SUPPRESSION_REASONS.get(code, code)


def suppression_rows(tenant: Tenant, search: str = "", limit: int = 500) -> list[Suppression]:
    """The suppressions page's rows, each with ``reason_label`` in the reader's language."""
    rows = list(suppressions(tenant, search)[:limit])
    for row in rows:
        row.reason_label = suppression_reason(row.reason)
    return rows


def suppressions(tenant: Tenant, search: str = ""):
    qs = Suppression.objects.filter(tenant=tenant).select_related("created_by")
    if "\x00" in search:  # no stored address holds one (and PostgreSQL refuses it in a query)
        return qs.none()
    if search:
        found = Q(address__icontains=search.strip().lower())
        # A whole address finds the entries that cover it too: ana+billing@ is refused as
        # ana@example.com (common.addresses.suppression_keys).
        with contextlib.suppress(ValueError):
            found |= Q(address__in=suppression_keys(normalize_address(search)))
        qs = qs.filter(found)
    return qs.order_by("-created_at", "-id")


def suppression_removed(tenant: Tenant, suppression_id: int) -> str | None:
    """The address of the tenant's suppression ``suppression_id`` when an admin removed it (its
    row is gone; its audit row says so), else None: an id never listed, or another tenant's."""
    data = (
        AuditEvent.objects.filter(
            tenant=tenant,
            action="suppression.removed",
            object_type="suppression",
            object_id=str(suppression_id),
        )
        .values_list("data", flat=True)
        .first()
    )
    address = data.get("address") if isinstance(data, dict) else None
    return address if isinstance(address, str) else None


def webhook_endpoints(tenant: Tenant):
    return (
        WebhookEndpoint.objects.filter(tenant=tenant)
        .annotate(
            active_secrets=Count("secrets", filter=Q(secrets__retired_at__isnull=True)),
        )
        .order_by("-created_at")
    )


def webhook_event_states(tenant: Tenant) -> dict[str, int]:
    since = timezone.now() - timedelta(days=1)
    rows = (
        WebhookEvent.objects.filter(tenant=tenant, received_at__gte=since)
        .values("state")
        .annotate(n=Count("id"))
    )
    return {row["state"]: row["n"] for row in rows}


AUDIT_COLUMNS = ("created_at", "src", "action", "actor_name", "obj", "transition", "reason", "data")
# What the page adds to the export's columns: who in words, and the object as (type, id) so the
# page can name it and link to it (console.audit_words).
# actor_now: a person's address today, beside the one they acted under (actor_name); "" for
# an actor that is not a person. actor_kind: the journal's (whether the system wrote the row's
# reason); "" for an administration row.
AUDIT_PAGE_COLUMNS = (
    *AUDIT_COLUMNS,
    "actor_display",
    "obj_type",
    "obj_id",
    "to_state",
    "actor_now",
    "id",
    "actor_kind",
)


# Newest first; rows of one instant in a fixed order, so that a page's last row says exactly
# where the next page starts (``_older_than_page``).
AUDIT_ORDER = ("-created_at", "-src", "-id")


@dataclass(frozen=True)
class AuditFilter:
    source: str = ""
    action: str = ""
    actor: str = ""
    since: date | None = None
    until: date | None = None
    before: datetime | None = None
    before_src: str = ""
    before_id: int | None = None
    # One send's record: the journal of the send, of the draft (or broadcast) it sends, from the
    # draft's first version to the send's last delivery event.
    send: int | None = None


def _send_scope(tenant: Tenant, send: int) -> Q:
    """The journal rows of one send's chain of custody; nothing for another tenant's send. Of
    its draft's rows, the draft's own and those of this send and of the draft's earlier sends
    (how the draft came to be approved again), not of its later ones: a draft reopened and
    approved again gets a new send, and that send's rows (its approval, its delivery) in this
    record made a cancelled send look approved and sent."""
    found = (
        SendIntent.objects.filter(tenant=tenant, pk=send)
        .values_list("draft_id", "broadcast_id")
        .first()
    )
    if found is None:
        return Q(pk__in=[])
    draft_id, broadcast_id = found
    scope = Q(intent_id=send)
    if draft_id is not None:
        scope |= Q(draft_id=draft_id) & (Q(intent__isnull=True) | Q(intent_id__lt=send))
    if broadcast_id is not None:
        scope |= Q(broadcast_id=broadcast_id, intent__isnull=True)
    return scope


_MACHINE_ACTORS = sorted(MACHINE_ACTORS)


def _journal(tenant: Tenant, f: AuditFilter):
    qs = IntentEvent.objects.filter(tenant=tenant).annotate(
        src=Value("journal", output_field=CharField()),
        # A person's row has their address then as its label (a row written by a release before
        # has none: their address today); no writer gives a token's row a label.
        actor_name=Coalesce(
            NullIf(F("actor_label"), Value("")),
            F("actor_user__email"),
            F("actor_token__name"),
            F("actor_kind"),
            output_field=CharField(),
        ),
        obj=Case(
            When(
                intent_id__isnull=False,
                then=Concat(Value("intent "), Cast("intent_id", CharField())),
            ),
            When(
                draft_id__isnull=False,
                then=Concat(Value("draft "), Cast("draft_id", CharField())),
            ),
            When(
                broadcast_id__isnull=False,
                then=Concat(Value("broadcast "), Cast("broadcast_id", CharField())),
            ),
            default=Value(""),
            output_field=CharField(),
        ),
        transition=Concat(F("from_state"), Value(" → "), F("to_state"), output_field=CharField()),
        # A machine's label is its process (a worker's host:pid:thread, "fan-out"): the page
        # names the kind ("the send worker") and keeps the label in the export.
        actor_display=Case(
            When(actor_kind__in=_MACHINE_ACTORS, then=F("actor_kind")),
            default=Coalesce(
                NullIf(F("actor_user__full_name"), Value("")),
                NullIf(F("actor_label"), Value("")),
                F("actor_user__email"),
                F("actor_token__name"),
                F("actor_kind"),
            ),
            output_field=CharField(),
        ),
        obj_type=Case(
            When(intent_id__isnull=False, then=Value("sendintent")),
            When(draft_id__isnull=False, then=Value("draft")),
            When(broadcast_id__isnull=False, then=Value("broadcast")),
            default=Value(""),
            output_field=CharField(),
        ),
        obj_id=Coalesce(
            Cast("intent_id", CharField()),
            Cast("draft_id", CharField()),
            Cast("broadcast_id", CharField()),
            Value(""),
            output_field=CharField(),
        ),
        actor_now=Coalesce(F("actor_user__email"), Value(""), output_field=CharField()),
    )
    if f.send is not None:
        qs = qs.filter(_send_scope(tenant, f.send))
    return _filtered(qs, f, "journal").values(*AUDIT_PAGE_COLUMNS)


def _admin(tenant: Tenant, f: AuditFilter):
    qs = AuditEvent.objects.filter(tenant=tenant).annotate(
        src=Value("admin", output_field=CharField()),
        # Who acted as they were then; a row without that (written by a release before it)
        # has only their address today.
        actor_name=Coalesce(
            NullIf(F("actor_label"), Value("")),
            F("actor__email"),
            Value("system"),
            output_field=CharField(),
        ),
        obj=Concat(F("object_type"), Value(" "), F("object_id"), output_field=CharField()),
        transition=Value("", output_field=CharField()),
        reason=Value("", output_field=CharField()),
        actor_display=Coalesce(
            NullIf(F("actor__full_name"), Value("")),
            NullIf(F("actor_label"), Value("")),
            F("actor__email"),
            Value("system"),
            output_field=CharField(),
        ),
        obj_type=F("object_type"),
        obj_id=F("object_id"),
        to_state=Value("", output_field=CharField()),
        actor_now=Coalesce(F("actor__email"), Value(""), output_field=CharField()),
        actor_kind=Value("", output_field=CharField()),
    )
    return _filtered(qs, f, "admin").values(*AUDIT_PAGE_COLUMNS)


def _filtered(qs, f: AuditFilter, src: str):
    if f.action:
        qs = qs.filter(action__startswith=f.action)
    if f.actor:
        # A person is found by the address they acted under and by the one they have now.
        qs = qs.filter(Q(actor_name__icontains=f.actor) | Q(actor_now__icontains=f.actor))
    tz = timezone.get_current_timezone()
    if f.since:
        qs = qs.filter(created_at__gte=datetime.combine(f.since, time.min, tzinfo=tz))
    if f.until:
        qs = qs.filter(created_at__lt=datetime.combine(f.until, time.min, tzinfo=tz) + timedelta(1))
    if f.before:
        qs = qs.filter(_older_than_page(f, src))
    return qs


def _older_than_page(f: AuditFilter, src: str) -> Q:
    """The rows of source ``src`` after the page's last row in the log's order (``AUDIT_ORDER``).
    A batch written in one statement (the webhook applier's deliveries, a worker's claims, a
    broadcast's fan-out) shares its created_at to the microsecond: cut at the time alone, the
    next page began after the whole batch, and the rest of it was never shown."""
    older = Q(created_at__lt=f.before)
    if f.before_id is None or not f.before_src:
        return older  # a link from before the cursor named the row
    # Each condition is a plain upper bound on created_at first, so the index on (tenant,
    # -created_at, -id) still seeks to the cursor (an OR of two ranges would walk from the top).
    up_to = Q(created_at__lte=f.before)
    if src == f.before_src:
        return up_to & (older | Q(id__lt=f.before_id))
    if src < f.before_src:
        return up_to
    return older


def audit_log(tenant: Tenant, f: AuditFilter):
    """Both journals as one stream, newest first: IntentEvent (drafts and sends) and
    AuditEvent (administration). One SQL UNION, so paging and CSV export stay single queries."""
    parts = []
    if f.source in ("", "journal"):
        parts.append(_journal(tenant, f))
    if f.source in ("", "admin") and f.send is None:
        parts.append(_admin(tenant, f))
    if not parts:
        # Administration rows name no send.
        return _journal(tenant, f).none()
    qs = parts[0]
    if len(parts) == 2:
        qs = qs.union(parts[1], all=True)
    return qs.order_by(*AUDIT_ORDER)


@dataclass(frozen=True)
class Health:
    pending_drafts: int
    queue_depth: int
    # Of queue_depth, the sends not due yet and so not in oldest_queued_age: those in their undo
    # window after approval, and those waiting for a retry (held ones are counted by ``held``).
    in_undo_window: int
    waiting_to_retry: int
    oldest_queued_age: timedelta | None
    sending: int
    uncertain: int
    needs_attention: int
    held: int
    failures_last_hour: int
    throttled_last_hour: int
    attempts_last_hour: int
    webhook_unapplied: int
    # Set aside after their apply raised too often (webhooks.services.failures): waiting for an
    # operator's retry.
    webhook_failed: int
    webhook_oldest_unapplied: datetime | None
    webhook_max_lag: timedelta | None
    # Store first: how long the oldest stored event has waited for the applier (zero when none
    # waits), and the longest any event waited, store to apply, in the last hour.
    webhook_apply_lag: timedelta
    webhook_max_apply_lag: timedelta | None
    webhook_last_event: datetime | None
    # Deadline breaches of the last week (intents.selectors.deadlines).
    breaches_by_mailbox: list[tuple[str, int]]
    breaches_by_reviewer: list[tuple[str, int]]
    # Attachment bytes the tenant holds, against its quota (intents.selectors.storage).
    attachment_storage: StorageUse
    # Each mailbox's bytes against its share of that quota (MAILBOX_ATTACHMENT_STORAGE_SHARE).
    mailbox_attachment_storage: list[MailboxStorageUse]
    # Mailboxes whose key AgentMail refused, with their waiting sends (key_refused_mailboxes).
    key_refused: list[KeyRefused]
    # The tenant's keys whose circuit AgentMail's failures opened (intents.sending.throttle).
    circuits: list[OpenCircuit]


# Queued, not held, and not due yet by the database clock: the complement, within the unheld
# queued sends, of what oldest_queued_age_seconds ages.
_QUEUED_NOT_DUE = Q(state="queued", held_reason="", next_attempt_at__gt=Now())


def _attempts_since(tenant: Tenant, since) -> dict:
    """The tenant's calls to AgentMail since ``since``: all, failed, rate-limited."""
    return SendAttempt.objects.filter(tenant=tenant, started_at__gte=since).aggregate(
        total=Count("id"),
        # A call retried later failed too (refused connection, DNS, a timeout before it was
        # written), unless AgentMail rate-limited it (its own tile) or the worker never made it
        # (no time left in its lease: a backlog of the worker, not of the provider).
        failures=Count(
            "id",
            filter=Q(outcome__in=["permanent", "uncertain"])
            | (Q(outcome="retry") & ~Q(http_status=429) & ~Q(error_code=CALL_TOO_LATE)),
        ),
        throttled=Count("id", filter=Q(http_status=429)),
    )


def _webhook_events(tenant: Tenant, since) -> dict:
    """Two reads that each stay within an index, not one over the tenant's whole history (events
    are never deleted, only their payloads: at a million events the one read took 120 ms, on a
    panel every open tab refreshes twice a minute): the waiting and failed events (partial
    indexes) and those received since ``since`` (the tenant's recent index)."""
    waiting = Q(state__in=["pending", "deferred"])
    return WebhookEvent.objects.filter(waiting | Q(state="failed"), tenant=tenant).aggregate(
        unapplied=Count("id", filter=waiting),
        oldest_unapplied=Min("received_at", filter=waiting),
        oldest_pending=Min("received_at", filter=Q(state="pending")),
        failed=Count("id", filter=Q(state="failed")),
    ) | WebhookEvent.objects.filter(tenant=tenant, received_at__gte=since).aggregate(
        max_lag=Max(
            ExpressionWrapper(F("received_at") - F("occurred_at"), output_field=DurationField()),
            filter=Q(occurred_at__isnull=False),
        ),
        max_apply_lag=Max(
            ExpressionWrapper(F("applied_at") - F("received_at"), output_field=DurationField()),
            filter=Q(state="applied", applied_at__isnull=False),
        ),
    )


def health(tenant: Tenant) -> Health:
    """Ten small queries (eight aggregates, one row, the mailboxes whose key was refused),
    whatever the volume."""
    hour_ago = timezone.now() - timedelta(hours=1)
    # The same sends the needs-attention view lists: one superseded by a re-approval is history.
    intents = current_sends(tenant).aggregate(
        queued=Count("id", filter=Q(state="queued")),
        sending=Count("id", filter=Q(state="sending")),
        uncertain=Count("id", filter=Q(state="uncertain")),
        needs_attention=Count("id", filter=Q(state="needs_attention")),
        held=Count("id", filter=Q(state="queued") & ~Q(held_reason="")),
        not_due=Count("id", filter=_QUEUED_NOT_DUE),
        in_undo_window=Count("id", filter=_QUEUED_NOT_DUE & Q(hold_until__gt=Now())),
    )
    # One definition with the operators' command: due, unheld intents, aged from next_attempt_at
    # by the database clock. A queued intent backing off or on hold is not late.
    oldest_seconds = oldest_queued_age_seconds(tenant=tenant)
    pending = Draft.objects.filter(tenant=tenant, status="pending").count()
    attempts = _attempts_since(tenant, hour_ago)
    events = _webhook_events(tenant, hour_ago)
    last_event = WebhookEndpoint.objects.filter(tenant=tenant).aggregate(last=Max("last_event_at"))
    breaches = sla_breaches(tenant=tenant)
    return Health(
        breaches_by_mailbox=breaches["mailboxes"],
        breaches_by_reviewer=breaches["reviewers"],
        pending_drafts=pending,
        queue_depth=intents["queued"],
        in_undo_window=intents["in_undo_window"],
        waiting_to_retry=intents["not_due"] - intents["in_undo_window"],
        oldest_queued_age=None if oldest_seconds is None else timedelta(seconds=oldest_seconds),
        sending=intents["sending"],
        uncertain=intents["uncertain"],
        needs_attention=intents["needs_attention"],
        held=intents["held"],
        failures_last_hour=attempts["failures"],
        throttled_last_hour=attempts["throttled"],
        attempts_last_hour=attempts["total"],
        webhook_unapplied=events["unapplied"],
        webhook_failed=events["failed"],
        webhook_oldest_unapplied=events["oldest_unapplied"],
        webhook_max_lag=events["max_lag"],
        webhook_apply_lag=(
            max(timedelta(0), timezone.now() - events["oldest_pending"])
            if events["oldest_pending"]
            else timedelta(0)
        ),
        webhook_max_apply_lag=events["max_apply_lag"],
        webhook_last_event=last_event["last"],
        attachment_storage=attachment_storage(tenant=tenant),
        mailbox_attachment_storage=attachment_storage_by_mailbox(tenant=tenant),
        key_refused=key_refused_mailboxes(tenant),
        circuits=open_circuits(tenant=tenant),
    )


def still_working_for(tenant: Tenant, user) -> tuple[int, int]:
    """The agent tokens (live: not revoked, not expired) and the enabled agent-event endpoints of
    ``tenant`` that ``user`` created. They belong to the tenant and outlive the membership of
    whoever made them; the deactivation page says so, so the admin can decide."""
    now = timezone.now()
    tokens = (
        AgentToken.objects.filter(tenant=tenant, created_by=user, revoked_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .count()
    )
    endpoints = AgentEventEndpoint.objects.filter(
        tenant=tenant, created_by=user, enabled=True
    ).count()
    return tokens, endpoints


@dataclass(frozen=True)
class SetupProgress:
    """What a new tenant still lacks before an agent's draft can be reviewed and sent: a
    mailbox, an agent token, and someone besides the first admin (a member or an invitation).
    The health page lists the steps while any is missing: a first admin lands on an empty
    queue and an all-zero health page, and nothing else says where to begin."""

    mailbox: bool
    token: bool
    team: bool

    @property
    def complete(self) -> bool:
        return self.mailbox and self.token and self.team


def setup_progress(tenant: Tenant) -> SetupProgress:
    now = timezone.now()
    return SetupProgress(
        mailbox=Mailbox.objects.filter(tenant=tenant).exists(),
        token=AgentToken.objects.filter(tenant=tenant, revoked_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .exists(),
        team=Membership.objects.filter(tenant=tenant).count() > 1
        or Invitation.objects.filter(tenant=tenant, state=Invitation.State.PENDING).exists(),
    )
