"""Every write of the webhooks app, one module per job:

- ``receive``: the receiver's transaction, the event ledger (store, duplicates, endpoint touch);
- ``apply``: the apply step, an event's effect on delivery state, suppressions, inbound mail and
  holds, and the later paths that apply what the receiver could not (deferred events, the sweep);
- ``retention``: payloads purged after each tenant's retention period.

The reads are in ``webhooks.selectors``. Import from the module that does the job; the names below
are re-exported only so that ``from webhooks import services`` keeps working.
"""

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
    "events_apply_deferred",
    "events_apply_deferred_many",
    "events_purge_payloads",
    "events_replay_pending",
]
