"""Retention: draft bodies are kept only as long as the workflow needs them.

Past the tenant's ``retention_days`` after a draft was decided (sent, failed, rejected, expired,
withdrawn) and after its last send ended (``_send_open_or_recent``), the subject line and the
recipients stay (they are the audit record, together with the content hash, the ids and the
journal), and the text and HTML bodies are emptied, with the reviewers' notes and the draft's
agent events (whose diffs quote the text). Its attachments' bytes go too, once no version that
still has its body names the same bytes (``attachment_bytes_purge``); their names, sizes and
digests stay. A draft whose send is still open (queued, sending, uncertain, needs attention)
keeps its body: a person may still need it to decide.

The agent API's Idempotency-Key records are kept IDEMPOTENCY_RETENTION after completion (the API
docs publish it), then the sweep deletes them.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.core.cache import cache
from django.db import transaction
from django.db.models import DateTimeField, Exists, ExpressionWrapper, F, OuterRef, Q, Value
from django.db.models.functions import Now

from intents.blobs import preview_cache_key
from intents.changes import BASE_FIELDS, EDIT_FIELDS, edit_size_from_agent, with_agent_base
from intents.journal import Entry, journal, journal_many
from intents.models import (
    AgentEvent,
    AgentEventDelivery,
    ApiIdempotencyKey,
    ApiRateWindow,
    AttachmentBlob,
    Broadcast,
    BroadcastRecipient,
    Draft,
    DraftAttachment,
    DraftNote,
    DraftVersion,
    IntentEvent,
    SendIntent,
)
from intents.services.storage import storage_release

log = logging.getLogger("intents.retention")
# The purge's log line keeps the logger and event name it had in the agent API's module.
api_log = logging.getLogger("intents.api")

IDEMPOTENCY_RETENTION = timedelta(hours=24)

OPEN_INTENT_STATES = ("queued", "sending", "uncertain", "needs_attention")


def _retention_cutoff() -> ExpressionWrapper:
    """Now less the row's tenant's ``retention_days`` (for a model with a ``tenant`` key)."""
    return ExpressionWrapper(
        Now() - F("tenant__retention_days") * Value(timedelta(days=1)), output_field=DateTimeField()
    )


def _delivery_pending() -> Exists:
    """For an AgentEvent: a delivery of it is still being attempted (it must not go yet)."""
    return Exists(
        AgentEventDelivery.objects.filter(
            event=OuterRef("pk"), status__in=AgentEventDelivery.UNFINISHED
        )
    )


def _events_delete(events) -> int:
    """Delete those of ``events`` no delivery of which is still being attempted, with their
    deliveries, in the caller's transaction. Returns rows deleted (events and deliveries).

    An admin's resend (``delivery_resend``) makes a new delivery of a finished event: read
    before this deleted it and committed after, it ended in a foreign-key error (on either
    side). A resend locks its event before it makes the delivery: an event one holds is skipped
    here, and the next run takes it once that delivery ends; one this takes first, the resend
    then finds gone. The delete reads again after the locks: a resend that committed in
    between made a delivery pending."""
    locked = list(
        events.exclude(_delivery_pending())
        .select_for_update(skip_locked=True, of=("self",))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not locked:
        return 0
    deleted, _ = AgentEvent.objects.filter(pk__in=locked).exclude(_delivery_pending()).delete()
    return deleted


def _send_open_or_recent(ref: str, *, of: str = "draft") -> Exists:
    """For a row naming a draft (or, ``of="broadcast"``, a broadcast) through ``ref``: a send of
    it is still open, or ended within its tenant's retention. A send may end long after its
    approval (it needed attention for days): counted from the approval alone, the body went at
    the next run after a person cancelled it, and the draft could no longer be re-approved
    (``draft_reopen`` refuses a purged body); counted from a broadcast's completion, the send a
    person had just decided on lost the text its page shows as sent."""
    return Exists(
        SendIntent.objects.filter(**{of: OuterRef(ref)}).filter(
            Q(state__in=OPEN_INTENT_STATES) | Q(updated_at__gte=_retention_cutoff())
        )
    )


def _journal_purged(drafts: set[tuple[int, int]], action: str) -> None:
    """One sweep journal row per (tenant id, draft id)."""
    journal_many(
        [
            Entry(
                tenant_id=tenant_id,
                draft_id=draft_id,
                actor_kind=IntentEvent.Actor.SWEEP,
                action=action,
                reason="retention period passed",
            )
            for tenant_id, draft_id in sorted(drafts)
        ]
    )


def draft_bodies_purge(*, batch: int = 1000) -> int:
    """Empty the bodies of decided drafts older than their tenant's retention. Returns rows purged."""
    cutoff = _retention_cutoff()
    due = (
        DraftVersion.objects.filter(body_purged_at__isnull=True, draft__updated_at__lt=cutoff)
        .exclude(draft__status=Draft.Status.PENDING)
        .exclude(_send_open_or_recent("draft"))
        .order_by("id")
        .values_list("id", "tenant_id", "draft_id")[:batch]
    )
    rows = list(due)
    if not rows:
        return 0
    return _purge_versions(rows)


def _purge_versions(rows: list[tuple[int, int, int]]) -> int:
    """Purge the drafts of the (version, tenant, draft) rows read before this transaction, as far
    as they are still due under their drafts' locks. Rows another purge emptied since they were
    read (the schedule runs on every cluster) are left out, so a draft is journaled once.

    Every version of such a draft goes in this transaction, not only the rows read: a batch (a
    number of versions) that ended between two versions of a draft emptied one and left the
    other to the next batch, journaling the draft twice, and the edit a person made was measured
    (``keep_edit_sizes``) against an agent's version already emptied."""
    with transaction.atomic():
        locked = _still_decided(rows)
        rows = list(
            DraftVersion.objects.filter(
                draft_id__in={r[2] for r in locked}, body_purged_at__isnull=True
            ).values_list("id", "tenant_id", "draft_id")
        )
        if not rows:
            return 0
        keep_edit_sizes([r[0] for r in rows])
        purged = DraftVersion.objects.filter(id__in=[r[0] for r in rows]).update(
            text="", html="", body_purged_at=Now()
        )
        drafts = {(tenant_id, draft_id) for _, tenant_id, draft_id in rows}
        # Reviewers' notes may quote the customer: they go with the bodies. So do agent events
        # (their diffs quote the text) once no delivery of them is still being attempted.
        draft_ids = {d for _, d in drafts}
        DraftNote.objects.filter(draft_id__in=draft_ids).delete()
        _events_delete(AgentEvent.objects.filter(draft_id__in=draft_ids))
        _journal_purged(drafts, "draft.bodies_purged")
    log.info("intents.retention.bodies_purged", extra={"versions": purged, "drafts": len(drafts)})
    return purged


def keep_edit_sizes(version_ids: list[int]) -> None:
    """Before their bodies go: each person's version among these that changed the agent's version
    before it keeps the size of that change (``purged_edit_size``). The reviewer analytics report
    it, and measured again from the emptied bodies every change of the text was gone: a draft a
    person rewrote counted as approved as the agent wrote it."""
    rows = with_agent_base(
        DraftVersion.objects.filter(id__in=version_ids, author_kind=DraftVersion.Author.PERSON)
    ).values("id", *EDIT_FIELDS, *BASE_FIELDS)
    kept = [
        DraftVersion(id=row["id"], purged_edit_size=size)
        for row in rows.iterator(chunk_size=500)
        if (size := edit_size_from_agent(row)) is not None
    ]
    DraftVersion.objects.bulk_update(kept, ["purged_edit_size"], batch_size=500)


def _still_decided(rows: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The (version, tenant, draft) rows whose draft is, under its lock, still decided and
    untouched since the cutoff. A person may have reopened it since the rows were read
    (``draft_reopen`` locks the draft): a draft back in review keeps its versions and notes. A
    draft another transaction holds is left for the next run."""
    kept = set(
        Draft.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(pk__in={draft_id for _, _, draft_id in rows}, updated_at__lt=_retention_cutoff())
        .exclude(status=Draft.Status.PENDING)
        .exclude(_send_open_or_recent("pk"))
        .values_list("pk", flat=True)
    )
    return [row for row in rows if row[2] in kept]


def attachment_bytes_purge(*, batch: int = 200) -> int:
    """Drop the bytes of attachment blobs that only purged versions name (a blob is shared by
    every draft of the tenant that attached the same bytes), and their cached previews. Returns
    how many blobs lost their bytes.

    A draft attaching the same bytes at this moment (``DatabaseBlobStore.put``) locks the blob's
    row until its version commits. So the rows are locked first, and the second statement, with
    a snapshot taken after those locks were granted, sees every version that names them: a blob
    that one of them still needs keeps its bytes, and a put() after the purge refills them (and
    counts them against the tenant's storage quota again). The bytes dropped come off the
    tenant's total (``storage_release``) in the same transaction."""
    named = DraftAttachment.objects.filter(blob=OuterRef("pk"))
    still_needed = Exists(named.filter(version__body_purged_at__isnull=True))
    candidates = list(
        AttachmentBlob.objects.filter(data_purged_at__isnull=True)
        .filter(Exists(named.filter(version__body_purged_at__isnull=False)))
        .exclude(still_needed)
        .order_by("id")
        .values_list("id", flat=True)[:batch]
    )
    if not candidates:
        return 0
    with transaction.atomic():
        locked = list(
            AttachmentBlob.objects.select_for_update()
            .filter(id__in=candidates, data_purged_at__isnull=True)
            # The order a new version stores its files in (services.attachments.attach): a draft
            # storing again the bytes of two of these in the other order would deadlock with us.
            .order_by("tenant_id", "sha256")
            .values_list("id", flat=True)
        )
        gone = list(
            AttachmentBlob.objects.filter(id__in=locked)
            .exclude(still_needed)
            .values_list("id", "tenant_id", "sha256", "size")
        )
        AttachmentBlob.objects.filter(id__in=[row[0] for row in gone]).update(
            data=None, data_purged_at=Now()
        )
        storage_release([(blob_id, tenant_id, size) for blob_id, tenant_id, _, size in gone])
        drafts = set(
            DraftAttachment.objects.filter(blob_id__in=[row[0] for row in gone]).values_list(
                "tenant_id", "version__draft_id"
            )
        )
        _journal_purged(drafts, "draft.attachment_bytes_purged")
    # After the commit: a preview rendered from the bytes goes with them.
    cache.delete_many([preview_cache_key(t, sha) for _, t, sha, _ in gone])
    log.info("intents.retention.attachments_purged", extra={"blobs": len(gone)})
    return len(gone)


def broadcast_bodies_purge(*, batch: int = 100) -> int:
    """Empty the text, the HTML and every recipient's variables (names, order numbers: the
    customers' data) of finished broadcasts older than their tenant's retention, as for drafts.
    A broadcast with a send still open keeps them (its pre-send check re-derives each message
    from them), and so does one whose last send ended within the retention: a send may end long
    after the broadcast completed (it needed attention). Returns how many broadcasts were
    purged."""
    due = (
        Broadcast.objects.filter(
            body_purged_at__isnull=True,
            state__in=Broadcast.FINISHED,
            updated_at__lt=_retention_cutoff(),
        )
        .exclude(_send_open_or_recent("pk", of="broadcast"))
        .order_by("id")
    )
    if not due.exists():
        return 0
    with transaction.atomic():
        # Under each broadcast's lock, read again: another purge (the schedule runs on every
        # cluster) may have taken it meanwhile, and must not journal it a second time. One
        # another transaction holds is left for the next run.
        rows = list(
            due.select_for_update(skip_locked=True, of=("self",)).values_list("id", "tenant_id")[
                :batch
            ]
        )
        ids = [pk for pk, _ in rows]
        purged = Broadcast.objects.filter(id__in=ids).update(text="", html="", body_purged_at=Now())
        BroadcastRecipient.objects.filter(broadcast_id__in=ids).update(variables={})
        for pk, tenant_id in rows:
            journal(
                tenant=tenant_id,
                broadcast=pk,
                actor_kind=IntentEvent.Actor.SWEEP,
                action="broadcast.bodies_purged",
                reason="retention period passed",
            )
    log.info("intents.retention.broadcasts_purged", extra={"broadcasts": purged})
    return purged


def purged_drafts_events_purge() -> int:
    """Agent events of drafts whose bodies are already purged, once no delivery of them is still
    being attempted (their diffs quote the text). ``draft_bodies_purge`` skips those with a
    delivery pending, on an endpoint that may be disabled for months, and never looks at the
    draft again: this pass, run daily after it, takes them when they finish. Returns how many
    events were deleted."""
    purged = DraftVersion.objects.filter(draft=OuterRef("draft"), body_purged_at__isnull=False)
    with transaction.atomic():
        deleted = _events_delete(
            AgentEvent.objects.filter(draft__isnull=False).filter(Exists(purged))
        )
    if deleted:
        log.info("intents.retention.events_purged", extra={"deleted": deleted})
    return deleted


def api_rate_windows_purge() -> int:
    """Delete the agent API's rate windows that ended more than a minute ago (only the current
    window is ever read). Returns how many were deleted."""
    deleted, _ = ApiRateWindow.objects.filter(
        window_start__lt=Now() - timedelta(minutes=2)
    ).delete()
    return deleted


def api_idempotency_purge(*, retention: timedelta = IDEMPOTENCY_RETENTION) -> int:
    """Delete keys completed more than ``retention`` ago, and abandoned in-flight claims whose lock
    passed that long ago. Safe to run anywhere, any number of times."""
    expired = ExpressionWrapper(Now() - retention, output_field=DateTimeField())
    deleted, _ = (
        ApiIdempotencyKey.objects.annotate(cutoff=expired)
        # Every purgeable row was created before the cutoff: this lets the created_at index work.
        .filter(created_at__lt=F("cutoff"))
        .filter(
            Q(state=ApiIdempotencyKey.State.COMPLETED, completed_at__lt=F("cutoff"))
            | Q(state=ApiIdempotencyKey.State.IN_FLIGHT, locked_until__lt=F("cutoff"))
            | Q(
                state=ApiIdempotencyKey.State.IN_FLIGHT,
                locked_until__isnull=True,
                created_at__lt=F("cutoff"),
            )
        )
        .delete()
    )
    if deleted:
        api_log.info("intents.api.idempotency_purged", extra={"deleted": deleted})
    return deleted
