"""The reasons the system writes in the journal as fixed text, in the reader's words.

The worker, the sweep and the webhook applier write a row's reason in English, as a code that
the journal keeps (the audit CSV and the API give it as stored). The pages that read the journal
to a person (review's send and draft pages, a send's last error, the console's audit log) give it
in the reader's language from this one table. A person's or an agent's reason, and a provider's
answer, is not the system's: those pages show it as written, set apart as outside text (a
provider's answer inside one of the system's sentences is kept as AgentMail wrote it).

An entry may hold named placeholders (``"lease of %(worker)s expired"``): its writer stores the
template formatted with its values, and the reader matches the stored sentence against the
templates (anchored, each placeholder a non-greedy run of any text, a "%%" the "%" it was
stored as) and fills the captured values into the words. A value is text like any other: escaped
where the words are shown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from django.utils.translation import gettext_lazy as _

from intents.events.delivery import LEASE_EXPIRED
from intents.models import IntentEvent
from intents.policy import OUTSIDE, OUTSIDE_ROUTED, OWN_MAILBOX, SUPPRESSED, SUPPRESSED_AS
from intents.sending.inbox_lost import INBOX_LOST_REASON
from intents.sending.precheck import (
    APPROVED_OWN_VERSION,
    ATTACHMENT_CHANGED,
    MAILBOX_INACTIVE,
    WROTE_EARLIER_VERSION,
)
from intents.sending.reconcile import (
    ALSO_FOUND,
    FOUND_BY_LABEL,
    FOUND_BY_SCAN,
    LOOKUP_FAILED,
    LOOKUP_KEEPS_FAILING,
    LOOKUP_REFUSED,
    NOTHING_FOUND,
)
from intents.sending.record import GAVE_UP, REPLAY_REFUSED
from intents.sending.sweep import LEASE_EXPIRED_DETAIL, LEASE_EXPIRED_REASON
from intents.services.deadlines import NOBODY_TO_ESCALATE_TO, PASSED_OVER_FOR_AN_ADMIN
from intents.services.undo import UNDONE_NOTE
from mailboxes.recovery import INBOX_LOST_DETAIL

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

# The reasons the worker, the sweep and the webhook applier write as fixed text (intents.sending,
# intents.services, webhooks.services). A reason built from a provider's answer is not here.
SYSTEM_REASONS = {
    "sent": _("AgentMail accepted it on the first request."),
    "replayed with the same key": _(
        "AgentMail confirmed it when the request was repeated with the same idempotency key."
    ),
    "AgentMail's answer to an earlier call arrived after its lease ended": _(
        "AgentMail's answer to an earlier try arrived after that try had been handed over."
    ),
    "not_after passed before sending": _("Its send-before time passed before it was sent."),
    "Gave up: the safe retry window passed.": _(
        "Gave up: the time in which a retry is safe has passed."
    ),
    "The broadcast was paused before the call.": _("The broadcast was paused before the send."),
    "AgentMail refused the mailbox's key before the call.": _(
        "AgentMail had refused the mailbox's key; nothing was sent with it."
    ),
    "The broadcast was cancelled.": _("The broadcast was cancelled."),
    "the worker stopped before its call": _("The worker stopped before it called AgentMail."),
    "not called: its lease would have run out during the call": _(
        "Not sent yet: the worker had too many calls ahead of this one; it will try again."
    ),
    "nothing found yet, and an earlier call may still be in flight": _(
        "Nothing found at AgentMail yet; an earlier try may still be under way."
    ),
    "retention period passed": _("The retention period passed."),
    "review deadline passed": _("The review deadline passed."),
    "send-by time (not_after) passed": _("Its send-before time passed."),
    "customer wrote again in this thread after the draft was written; re-confirm": _(
        "The customer wrote again after this reply was written: a person must confirm it."
    ),
    # The pre-call check's refusals (intents.sending.precheck), the send's last error too.
    "The tenant is suspended.": _("The tenant is suspended."),
    "The mailbox does not belong to the intent's tenant.": _(
        "The mailbox does not belong to the send's tenant."
    ),
    "The approver no longer has the right to send from this mailbox.": _(
        "The approver no longer has the right to send from this mailbox."
    ),
    APPROVED_OWN_VERSION: _(
        "The approver wrote what they approved; this tenant now requires another person to "
        "approve it."
    ),
    WROTE_EARLIER_VERSION: _(
        "The approver wrote a version of this draft since it was last approved; this tenant now "
        "requires another person to approve it."
    ),
    "The broadcast is not approved for sending.": _("The broadcast is not approved for sending."),
    "The send does not belong to its broadcast's approval.": _(
        "The send does not belong to its broadcast's approval."
    ),
    "The broadcast no longer matches what was approved.": _(
        "The broadcast no longer matches what was approved."
    ),
    "The recipient's row changed after approval.": _("The recipient's row changed after approval."),
    "The rendered message differs from the approved one.": _(
        "The rendered message differs from the approved one."
    ),
    "The recipients differ from those approved.": _("The recipients differ from those approved."),
    "The approved version does not belong to this draft.": _(
        "The approved version does not belong to this draft."
    ),
    "The approved body was purged by retention.": _("The approved body was purged by retention."),
    "The stored content no longer matches what was approved.": _(
        "The stored content no longer matches what was approved."
    ),
    # An admin's recovery of a deleted inbox (mailboxes.recovery) hands an uncertain send on.
    INBOX_LOST_REASON: _(
        "Outcome unknown: the mailbox's inbox was deleted at AgentMail, with the messages that "
        "could show whether this send went out, and is being made again; a person must decide."
    ),
    # Not a journal row's: what a mailbox's key refusal says while an admin has its inbox made
    # again (mailboxes.recovery; the mailbox's page).
    INBOX_LOST_DETAIL: _("AgentMail no longer has the inbox; it is being made again."),
    # The sweep's escalation of a draft past its deadline (intents.services.deadlines).
    NOBODY_TO_ESCALATE_TO: _(
        "No one the escalation rule names may review this mailbox and is not marked away; it was "
        "left unassigned."
    ),
    PASSED_OVER_FOR_AN_ADMIN: _(
        "The member the escalation rule names can no longer decide it; it went to an admin."
    ),
    # Not a journal row's: the note an undo leaves on the send it cancels (intents.services.undo;
    # the send's page, when its journal has the undo's row) and an agent event delivery's error
    # when its attempt recorded no answer (intents.events.delivery; Console → Agent events).
    UNDONE_NOTE: _("Undone within the undo window; nothing was sent."),
    LEASE_EXPIRED: _(
        "No answer was recorded within the attempt's time: the worker stopped, or the receiver "
        "stalled."
    ),
    # With the values they were written with (placeholders: see the module's docstring).
    LEASE_EXPIRED_REASON: _("The lease of worker %(worker)s ran out."),
    LEASE_EXPIRED_DETAIL: _("The lease of worker %(worker)s ran out before it recorded an answer."),
    MAILBOX_INACTIVE: _("The mailbox %(address)s is not active."),
    GAVE_UP: _("Gave up after %(attempts)s attempts; the last answer: %(last)s"),
    # The pre-call check's refusals with the values they name (intents.sending.precheck): a
    # recipient's is the approval's refusal (intents.policy), with its own msgid.
    ATTACHMENT_CHANGED: _(
        "The stored bytes of the attachment %(name)s are no longer those that were approved "
        "(their SHA-256 differs); nothing was sent."
    ),
    SUPPRESSED: _(SUPPRESSED),
    SUPPRESSED_AS: _(SUPPRESSED_AS),
    OWN_MAILBOX: _(OWN_MAILBOX),
    OUTSIDE_ROUTED: _(OUTSIDE_ROUTED),
    OUTSIDE: _(OUTSIDE),
    # Settling a send whose outcome is unknown (intents.sending.record, .reconcile): the label is
    # the send's (cs-intent-<id>), a code or an answer is AgentMail's.
    REPLAY_REFUSED: _(
        "AgentMail refused the repeated request (%(answer)s); whether the first one went out is "
        "unknown."
    ),
    FOUND_BY_LABEL: _("Found at AgentMail by its label %(label)s."),
    FOUND_BY_SCAN: _("Found at AgentMail by its label %(label)s, reading the inbox."),
    FOUND_BY_LABEL + ALSO_FOUND: _(
        "Found at AgentMail by its label %(label)s; other messages that carry it too: %(others)s."
    ),
    FOUND_BY_SCAN + ALSO_FOUND: _(
        "Found at AgentMail by its label %(label)s, reading the inbox; other messages that "
        "carry it too: %(others)s."
    ),
    LOOKUP_FAILED: _("The search for its label at AgentMail failed (%(code)s); it will try again."),
    LOOKUP_REFUSED: _("%(status)s %(code)s: AgentMail refused the search for its label."),
    NOTHING_FOUND: _(
        "Outcome unknown: no message at AgentMail carries its label %(label)s (%(scanned)s read "
        "since the first try); a person must decide."
    ),
    LOOKUP_KEEPS_FAILING: _(
        "Outcome unknown: the search for its label at AgentMail keeps failing (%(code)s); a "
        "person must decide."
    ),
}

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def _template(stored: str) -> re.Pattern[str] | None:
    """The stored template as an anchored pattern, each placeholder a named non-greedy group;
    None for a fixed sentence."""
    parts = _PLACEHOLDER.split(stored)
    if len(parts) == 1:
        return None
    # A template's "%%" is stored as the "%" it formats to.
    pattern = "".join(
        re.escape(part.replace("%%", "%")) if i % 2 == 0 else f"(?P<{part}>.+?)"
        for i, part in enumerate(parts)
    )
    return re.compile(pattern, re.DOTALL)


_FIXED = {stored: words for stored, words in SYSTEM_REASONS.items() if not _template(stored)}
# The most fixed text first: a sentence that two templates read ("Gave up after 1 attempts; last:
# x is not active.") is the one whose own words it holds more of.
_TEMPLATES = [
    (pattern, words)
    for stored, words in sorted(
        SYSTEM_REASONS.items(), key=lambda item: -len(_PLACEHOLDER.sub("", item[0]))
    )
    if (pattern := _template(stored)) is not None
]


def system_words(stored: str) -> StrOrPromise | None:
    """A sentence the system stored, in the reader's words (with the values it was written
    with); None when no entry of the table wrote it."""
    words = _FIXED.get(stored)
    if words is not None:
        return words
    for pattern, template_words in _TEMPLATES:
        if match := pattern.fullmatch(stored):
            return str(template_words) % match.groupdict()
    return None


MACHINE_ACTORS = frozenset(
    {IntentEvent.Actor.WORKER, IntentEvent.Actor.SWEEP, IntentEvent.Actor.WEBHOOK}
)
# A person's rows whose reason the system wrote: a release carries the hold's reason
# (``intent_release``), which the webhook applier wrote; a send handed to a person by an admin's
# recovery of a deleted inbox (``intents_end_with_lost_inbox``; only the system writes that
# action's reason).
_CARRIES_THE_SYSTEMS_REASON = frozenset({"intent.released", "intent.needs_attention"})


def system_reason_words(*, actor_kind: str, action: str, reason: str) -> StrOrPromise | None:
    """A journal row's reason in the reader's words when the system wrote it as fixed text;
    None for any other: a person's or an agent's words (even ones that read like the system's),
    a provider's answer."""
    if actor_kind not in MACHINE_ACTORS and action not in _CARRIES_THE_SYSTEMS_REASON:
        return None
    return system_words(reason)
