"""Every read of drafts and send intents that views, the API and tasks use, one module per
entity. Always tenant-scoped: another tenant's row and a missing row raise the same NotFound.

- ``drafts``: one draft, its history, counts; ``queue``: the review queue
- ``intents``: one send, the outbox, counts, what may have gone out
- ``common``: pages and the one cursor codec

The names below are re-exported for callers that write ``selectors.draft_detail(...)``; new code
imports from the entity module.
"""

from intents.selectors.common import DEFAULT_PAGE, MAX_PAGE, Page, decode_cursor, encode_cursor
from intents.selectors.drafts import DraftDetail, draft_detail, draft_get
from intents.selectors.intents import (
    REOPENABLE_STATES,
    UNPROVEN_STATES,
    intent_attempts,
    intent_counts,
    intent_counts_capped,
    intent_events,
    intent_get,
    intent_reopenable,
    intents_that_may_have_gone_out,
    live_intent_counts_by_tenant,
    oldest_queued_age_seconds,
    oldest_uncertain_age_seconds,
    outbox,
)
from intents.selectors.queue import AGE_CHOICES, QueueFilter, draft_queue, queue_drafts

__all__ = [
    "AGE_CHOICES",
    "DEFAULT_PAGE",
    "MAX_PAGE",
    "REOPENABLE_STATES",
    "UNPROVEN_STATES",
    "DraftDetail",
    "Page",
    "QueueFilter",
    "decode_cursor",
    "draft_detail",
    "draft_get",
    "draft_queue",
    "encode_cursor",
    "intent_attempts",
    "intent_counts",
    "intent_counts_capped",
    "intent_events",
    "intent_get",
    "intent_reopenable",
    "intents_that_may_have_gone_out",
    "live_intent_counts_by_tenant",
    "oldest_queued_age_seconds",
    "oldest_uncertain_age_seconds",
    "outbox",
    "queue_drafts",
]
