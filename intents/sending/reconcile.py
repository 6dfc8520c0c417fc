"""Reconciling ``uncertain`` intents. Within the safe window the worker replays the identical
request with the same key (recorded like any send, ``record.py``); past it, or when a replay may
not go out, it lists the inbox's messages by the intent's label ``cs-intent-<id>``: found proves
the send (``accepted``), nothing found leaves it to a person (``needs_attention``)."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now

from intents.models import SendAttempt, SendIntent
from intents.sending.lease import Claim, Prepared, backoff_seconds
from intents.sending.record import (
    Acceptance,
    Leased,
    close_attempt,
    finish_leased,
    hold_for_refused_key,
    lock_leased_for_record,
    mark_accepted,
)
from mailboxes import provider

log = logging.getLogger("intents.sending")

State = SendIntent.State
AttemptOutcome = SendAttempt.Outcome

# The reasons (and last errors) a label lookup leaves, with the label, the messages read and
# AgentMail's error code or answer (intents.reason_words reads them in the reader's words).
FOUND_BY_LABEL = "found by label %(label)s"
FOUND_BY_SCAN = FOUND_BY_LABEL + " (inbox scan)"
ALSO_FOUND = "; %(others)s other message(s) carry it too"
LOOKUP_FAILED = "label lookup failed: %(code)s"
LOOKUP_REFUSED = "%(status)s %(code)s: label lookup refused"
NOTHING_FOUND = (
    "Outcome unknown: no message carries the label %(label)s (read %(scanned)s since the first "
    "attempt); a person must decide."
)
LOOKUP_KEEPS_FAILING = "Outcome unknown and the label lookup keeps failing (%(code)s)."


def intent_record_lookup(claim: Claim, prepared: Prepared, lookup: provider.LookupResult) -> str:
    """Apply a label lookup: found proves the send; nothing found leaves it to a person."""
    with transaction.atomic():
        intent = lock_leased_for_record([claim]).get(claim.intent_id)
        outcome = _lookup_outcome(lookup)
        fields = {
            "http_status": lookup.http_status,
            "error_code": lookup.error_code[:64],
            "provider_message_id": lookup.message_ids[0] if lookup.message_ids else "",
        }
        if intent is None:
            close_attempt(prepared, AttemptOutcome.FENCED, **fields)
            return "fenced"
        close_attempt(prepared, outcome, **fields)
        # A list of the inbox's messages answers 404 only for the inbox itself.
        if not lookup.ok and provider.refuses_key(lookup.http_status, lookup.error_code, "inbox"):
            detail = LOOKUP_REFUSED % {"status": lookup.http_status, "code": lookup.error_code}
            return hold_for_refused_key(intent, claim, prepared, detail)
        return _resolve(intent, claim, prepared, lookup, outcome)


def _earlier_call_in_flight(claim: Claim, prepared: Prepared) -> timedelta | None:
    """How long until every earlier call of the intent must have ended, if one has not answered
    (its attempt row not finished: pending, or marked uncertain by the sweep when its lease ran
    out) and may still be running; else None."""
    longest = timedelta(
        seconds=settings.SEND_LEASE_SECONDS
        + settings.AGENTMAIL_CONNECT_TIMEOUT
        + settings.AGENTMAIL_READ_TIMEOUT
    )
    running = (
        SendAttempt.objects.filter(
            intent_id=claim.intent_id,
            finished_at__isnull=True,
            started_at__gt=Now() - longest,
        )
        .exclude(pk=prepared.attempt_id)
        .exists()
    )
    return longest if running else None


def _lookup_outcome(lookup: provider.LookupResult) -> str:
    if lookup.ok and lookup.message_ids:
        return AttemptOutcome.ACCEPTED
    return AttemptOutcome.NOT_FOUND if lookup.ok else AttemptOutcome.UNCERTAIN


def _resolve(
    intent: Leased, claim: Claim, prepared: Prepared, lookup: provider.LookupResult, outcome: str
) -> str:
    """The intent's move after a lookup (inside the recording transaction, lease checked)."""
    if outcome == AttemptOutcome.ACCEPTED:
        found, *others = lookup.message_ids
        if others:
            log.warning(
                "intents.intent.sent_more_than_once",
                extra={"intent_id": intent.pk, "messages": len(lookup.message_ids)},
            )
        mark_accepted(
            [
                Acceptance(
                    intent=intent,
                    claim=claim,
                    message_id=found,
                    thread_id="",
                    how=(
                        (FOUND_BY_SCAN if lookup.method == "inbox_scan" else FOUND_BY_LABEL)
                        + (ALSO_FOUND if others else "")
                    )
                    % {"label": prepared.label, "others": len(others)},
                    also_found=tuple(others),
                )
            ]
        )
        return State.ACCEPTED
    if outcome == AttemptOutcome.NOT_FOUND and (wait := _earlier_call_in_flight(claim, prepared)):
        # An earlier call of this intent has not answered yet (its lease ran out first): what it
        # sends may land after this lookup. Look again once it must have ended; its own answer,
        # if it comes first, settles the intent (record.intents_adopt_late_acceptances).
        finish_leased(
            intent,
            claim,
            to_state=State.UNCERTAIN,
            action="intent.reconcile_pending",
            reason="nothing found yet, and an earlier call may still be in flight",
            code="call_in_flight",
            next_attempt_at=Now() + wait,
        )
        return State.UNCERTAIN
    if outcome == AttemptOutcome.NOT_FOUND or intent.attempts > 2 * settings.SEND_MAX_ATTEMPTS:
        finish_leased(
            intent,
            claim,
            to_state=State.NEEDS_ATTENTION,
            action="intent.needs_attention",
            reason=(
                NOTHING_FOUND % {"label": prepared.label, "scanned": lookup.scanned}
                if lookup.ok
                else LOOKUP_KEEPS_FAILING % {"code": lookup.error_code}
            ),
            code="unresolved",
        )
        return State.NEEDS_ATTENTION
    finish_leased(
        intent,
        claim,
        to_state=State.UNCERTAIN,
        action="intent.reconcile_pending",
        reason=LOOKUP_FAILED % {"code": lookup.error_code},
        code=lookup.error_code or "lookup_failed",
        next_attempt_at=Now() + timedelta(seconds=backoff_seconds(intent.attempts)),
    )
    return State.UNCERTAIN
