"""Every write of the webhooks app, one module per job:

- ``receive``: the receiver's one statement, the event ledger (store, duplicates, endpoint touch);
- ``applier``: the batch applier that applies stored events (``SKIP LOCKED``, one transaction per
  batch), the wake-up the receiver sends it, and its loop;
- ``apply``: the apply step, an event's effect on delivery state, suppressions, inbound mail and
  holds, and the later paths (deferred events, the sweep);
- ``reapply``: the events rejected before their mailbox recorded its inbox, applied once it does
  (and by the sweep, for a rejection committed after that);
- ``backfill``: asking AgentMail for what webhooks never told us, stored as events to apply;
- ``retention``: payloads purged after each tenant's retention period.

The reads are in ``webhooks.selectors``. Import from the module that does the job; the names below
are re-exported only so that ``from webhooks import services`` keeps working.
"""

from webhooks.services.applier import events_apply_batch, events_apply_pending
from webhooks.services.apply import (
    event_apply,
    events_apply_deferred,
    events_apply_deferred_many,
    events_replay_pending,
)
from webhooks.services.receive import (
    ENDPOINT_TOUCH_INTERVAL,
    Received,
    endpoint_touch,
    event_receive,
    event_store,
)
from webhooks.services.retention import events_purge_payloads

__all__ = [
    "ENDPOINT_TOUCH_INTERVAL",
    "Received",
    "endpoint_touch",
    "event_apply",
    "event_receive",
    "event_store",
    "events_apply_batch",
    "events_apply_deferred",
    "events_apply_deferred_many",
    "events_apply_pending",
    "events_purge_payloads",
    "events_replay_pending",
]
