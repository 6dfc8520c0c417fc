"""Every write to drafts, send intents and suppressions: one module per entity, one function per
transition (DESIGN.md).

Each runs in one transaction, is guarded by its source state (a row lock or a conditional UPDATE
whose row count is the truth) and writes its journal row (``intents.journal``) in the same
transaction. Follow-up work (waking a worker) is scheduled with ``transaction.on_commit``; nothing
here touches the network. The worker-side transitions (claim, record result, reconcile) live in
``intents/sending/``.

- ``drafts``: create, add a version, reject, withdraw, expire
- ``approval``: approve (the send intent is born here), reopen
- ``intents``: cancel, resolve by hand, hold, release
- ``undo``: undo an approval inside its undo window
- ``notes``: internal notes between reviewers
- ``assignment``: take, hand over, release, automatic assignment, lapsed claims
- ``deadlines``: the deadline (SLA) of a draft, its warning and escalation
- ``suppressions``: the suppression list
- ``content``: validation of what a draft holds; ``common``: guards shared by all

The names below are re-exported for callers that write ``services.draft_create(...)``; new code
imports from the entity module.
"""

from intents.journal import Entry, journal, journal_many
from intents.selectors.intents import REOPENABLE_STATES
from intents.services.approval import draft_approve
from intents.services.assignment import (
    draft_claim_renew,
    draft_hand,
    draft_release,
    draft_take,
)
from intents.services.common import enqueue_execution
from intents.services.content import MAX_RECIPIENTS, MAX_SUBJECT
from intents.services.drafts import draft_add_version, draft_create
from intents.services.endings import draft_expire_due, draft_reject, draft_withdraw
from intents.services.intents import (
    apply_deferred_events,
    intent_cancel,
    intent_hold,
    intent_release,
    intent_resolve_accepted,
    intents_hold_stale,
)
from intents.services.notes import draft_note_add
from intents.services.reopen import draft_reopen
from intents.services.suppressions import (
    suppression_add,
    suppression_remove,
    suppressions_record,
)
from intents.services.undo import intent_undo

__all__ = [
    "MAX_RECIPIENTS",
    "MAX_SUBJECT",
    "REOPENABLE_STATES",
    "Entry",
    "apply_deferred_events",
    "draft_add_version",
    "draft_approve",
    "draft_claim_renew",
    "draft_create",
    "draft_expire_due",
    "draft_hand",
    "draft_note_add",
    "draft_reject",
    "draft_release",
    "draft_reopen",
    "draft_take",
    "draft_withdraw",
    "enqueue_execution",
    "intent_cancel",
    "intent_hold",
    "intent_release",
    "intent_resolve_accepted",
    "intent_undo",
    "intents_hold_stale",
    "journal",
    "journal_many",
    "suppression_add",
    "suppression_remove",
    "suppressions_record",
]
