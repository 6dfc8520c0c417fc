"""The draft's and the send's journal in words a support person reads, in their language.

The stored rows keep their codes (``data-action`` on the page, the audit CSV and the API show
them): an action, the process that wrote the row (a worker's ``host:pid:thread``, a webhook's
``svix-id``) and the reasons the system writes are for operators, so the page shows words and
keeps the code in a tooltip (the system's reasons in words: ``intents.reason_words``, which the
console's audit page reads too). A delivery row takes its words from the delivery states' own labels
(``RecipientDelivery.State``), as the recipients' badges and the console's audit page do.
"""

from __future__ import annotations

from django.utils.html import conditional_escape, format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from intents.models import IntentEvent
from intents.reason_words import system_reason_words, system_words
from tenants.actor_words import then_and_now
from webhooks.models import RecipientDelivery

DELIVERY_PREFIX = "delivery."

ACTIONS = {
    "draft.created": _("draft created"),
    "draft.version_added": _("new version"),
    "draft.approved": _("approved"),
    "draft.approval_undone": _("approval undone"),
    "draft.rejected": _("rejected"),
    "draft.withdrawn": _("withdrawn"),
    "draft.expired": _("expired"),
    "draft.reopened": _("back in review"),
    "draft.closed_as_sent": _("out of review: its earlier send went out"),
    "draft.note_added": _("note added"),
    "draft.bodies_purged": _("bodies purged"),
    "draft.attachment_bytes_purged": _("attachments purged"),
    "draft.taken": _("taken"),
    "draft.handed": _("handed over"),
    "draft.released": pgettext_lazy("draft journal", "released"),
    "draft.assigned": _("assigned"),
    "draft.claim_lapsed": _("claim lapsed"),
    "draft.holder_cannot_decide": _("released: the holder may no longer decide it"),
    "draft.sla_warning": _("deadline near"),
    "draft.sla_breached": _("deadline passed"),
    "draft.escalated": _("escalated"),
    "intent.created": _("send created"),
    "intent.claimed": _("picked up by a worker"),
    "intent.accepted": _("accepted by AgentMail"),
    "intent.uncertain": _("outcome uncertain"),
    "intent.retry_scheduled": _("retry scheduled"),
    "intent.reconcile_pending": _("checking the outcome"),
    "intent.needs_attention": _("needs attention"),
    "intent.failed": _("failed"),
    "intent.blocked": _("blocked"),
    "intent.expired": _("expired"),
    "intent.cancelled": _("cancelled"),
    "intent.held": _("held"),
    "intent.released": pgettext_lazy("send journal", "released"),
    "intent.resolved_accepted": _("marked accepted"),
    "intent.lease_expired": _("worker lease expired"),
    "intent.handed_back": _("handed back by a stopping worker"),
    "intent.key_refused": _("waiting: AgentMail refused the mailbox's key"),
    "intent.undone": _("undone"),
    # webhooks.services.retention (or an applier, apply.closed_unapplied): a delivery event about
    # this send that was never applied.
    "webhook.event_closed_unapplied": _("webhook event closed unapplied"),
}


def action_words(action: str) -> str:
    if action.startswith(DELIVERY_PREFIX):
        state = action.removeprefix(DELIVERY_PREFIX)
        if state in RecipientDelivery.State.values:
            return str(RecipientDelivery.State(state).label)
    return str(ACTIONS.get(action, action))


def actor_words(event: IntentEvent) -> SafeString:
    if event.actor_user_id and event.actor_user:
        return _person_words(event.actor_user, then=event.actor_label)
    if event.actor_token_id and event.actor_token:
        return format_html("<span data-customer-content>{}</span>", event.actor_token.name)
    kind = event.get_actor_kind_display()
    if event.actor_label:
        return format_html('<span title="{}">{}</span>', event.actor_label, kind)
    return conditional_escape(kind)


def _person_words(user, *, then: str) -> SafeString:
    """A person by their name today, or, if the address they acted under (``then``: the row's
    label; a row from before it has none) is no longer theirs, by that and today's."""
    if not then or then == user.email:
        return conditional_escape(user.display_name)
    return then_and_now(then, user.email)


def reason_words(event: IntentEvent) -> SafeString:
    if not event.reason:
        return SafeString("")
    words = system_reason_words(
        actor_kind=event.actor_kind, action=event.action, reason=event.reason
    )
    if words is not None:
        return format_html('<div class="small" title="{}">{}</div>', event.reason, words)
    # A person's or an agent's words (a cancel reason, evidence), or a provider's answer.
    return format_html('<div class="small" data-customer-content>{}</div>', event.reason)


def error_words(detail: str) -> str:
    """A send's last error (``SendIntent.last_error_detail``) in the reader's words when the
    system wrote it as fixed text, else as stored (a provider's answer, a reason built with an
    address)."""
    words = system_words(detail)
    return detail if words is None else str(words)


def resolution_words(intent, events: list[IntentEvent]) -> SafeString:
    """A send's resolution note: in the reader's words when the system wrote it (an undo's note;
    the send's journal then has the undo's row, which carries no reason of a person), else a
    person's words as written (a cancel's reason, the evidence of a resolution), set apart."""
    note = intent.resolution_note
    words = system_words(note)
    if words is not None and any(e.action == "intent.undone" for e in events):
        return format_html('<span title="{}">{}</span>', note, words)
    return format_html("<span data-customer-content>{}</span>", note)


def delivery_recipients(event: IntentEvent) -> SafeString:
    if not event.action.startswith(DELIVERY_PREFIX) or not isinstance(event.data, dict):
        return SafeString("")
    moved = [a for a in event.data.get("moved") or [] if isinstance(a, str)]
    if not moved:
        return format_html(" · {}", _("no change"))
    return format_html(
        " · {}", format_html_join(", ", '<span class="mono">{}</span>', ((a,) for a in moved))
    )


def unapproved_recipients(events: list[IntentEvent]) -> list[str]:
    """The addresses AgentMail's delivery events of a send named that nobody approved (the
    applier keeps them on the row, ``unapproved_recipients``), each once, first seen first:
    the message went to them too, and the send's page says so."""
    found: dict[str, None] = {}
    for event in events:
        if not event.action.startswith(DELIVERY_PREFIX) or not isinstance(event.data, dict):
            continue
        for address in event.data.get("unapproved_recipients") or []:
            if isinstance(address, str):
                found.setdefault(address, None)
    return list(found)
