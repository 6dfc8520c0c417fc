"""What each agent event says (the ``data`` of the Standard Webhooks body; README "Agent events").

Every payload names the draft (id, version, mailbox, the agent token that wrote it) and, for send
events, the intent. ``draft.approved`` and ``draft.edited`` carry ``change``, the structured diff
from the agent's last version (``intents.changes``); ``draft.rejected`` the reviewer's reason;
``draft.reopened`` (an approval undone, or a draft reopened after its send did not go out) the
new version and the earlier send; the send events the code and reason the journal recorded;
delivery events the recipients that moved. Payloads are computed once, when the event is written,
and stored: every retry and resend sends the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from intents.changes import change_from_agent
from intents.models import Draft, DraftVersion, EventType, SendIntent

_WITH_CHANGE = {EventType.DRAFT_APPROVED, EventType.DRAFT_EDITED}
_WITH_REASON = {
    EventType.DRAFT_REJECTED,
    EventType.DRAFT_EXPIRED,
    EventType.SEND_NEEDS_ATTENTION,
    EventType.SEND_FAILED,
    EventType.SEND_BLOCKED,
    EventType.SEND_CANCELLED,
    EventType.SEND_EXPIRED,
    EventType.DRAFT_REOPENED,
}
# The code of an event whose journal row records none: what happened, for an agent to branch on.
_CODE_BY_ACTION = {
    "draft.rejected": "rejected",
    "intent.cancelled": "cancelled",
    "intent.expired": "not_after_passed",
    "draft.reopened": "reopened",
    "draft.approval_undone": "approval_undone",
}
_DELIVERY = {EventType.SEND_DELIVERED, EventType.SEND_BOUNCED, EventType.SEND_COMPLAINED}


@dataclass
class Facts:
    """The rows a batch of events is about, read in a fixed number of queries."""

    drafts: dict[int, Draft]
    intents: dict[int, SendIntent]

    @classmethod
    def load(cls, typed) -> Facts:
        draft_ids = {c.draft_id for c, _ in typed if c.draft_id}
        intent_ids = {c.intent_id for c, _ in typed if c.intent_id}
        intents = {
            i.pk: i
            for i in SendIntent.objects.filter(pk__in=intent_ids).select_related("draft_version")
        }
        draft_ids |= {i.draft_id for i in intents.values()}
        drafts = {d.pk: d for d in Draft.objects.filter(pk__in=draft_ids).select_related("mailbox")}
        return cls(drafts=drafts, intents=intents)

    def draft_of(self, cause) -> Draft | None:
        intent = self.intents.get(cause.intent_id) if cause.intent_id else None
        draft_id = cause.draft_id or (intent.draft_id if intent else None)
        return self.drafts.get(draft_id) if draft_id else None

    def mailbox_of(self, cause) -> int | None:
        draft = self.draft_of(cause)
        return draft.mailbox_id if draft else None


def _version_number(cause, type_: str, draft: Draft | None, intent: SendIntent | None) -> int:
    if intent is not None and intent.draft_version is not None and type_.startswith("send."):
        return intent.draft_version.number
    if isinstance(cause.data.get("version"), int):
        return cause.data["version"]
    return draft.current_version if draft else 0


def payload_for(cause, type_: str, facts: Facts) -> dict:
    draft = facts.draft_of(cause)
    intent = facts.intents.get(cause.intent_id) if cause.intent_id else None
    number = _version_number(cause, type_, draft, intent)
    payload: dict = {
        "draft": {
            "id": draft.pk if draft else cause.draft_id,
            "version": number,
            "status": draft.status if draft else None,
            "mailbox": {"id": draft.mailbox_id, "address": draft.mailbox.address}
            if draft
            else None,
            "agent_token_id": draft.agent_token_id if draft else None,
            "thread_id": draft.thread_id if draft else "",
        },
        "intent": {"id": intent.pk, "state": intent.state} if intent else None,
    }
    if type_ in _WITH_CHANGE and draft is not None:
        version = DraftVersion.objects.filter(draft_id=draft.pk, number=number).first()
        payload["change"] = change_from_agent(version) if version else None
    if type_ in _WITH_REASON:
        payload["reason"] = cause.reason
        payload["code"] = cause.data.get("code") or _CODE_BY_ACTION.get(cause.action, "")
    if type_ == EventType.SEND_ACCEPTED:
        payload["provider_message_id"] = cause.data.get("provider_message_id") or (
            intent.provider_message_id if intent else ""
        )
    if type_ in _DELIVERY:
        payload["recipients"] = list(cause.data.get("moved", []))
        payload["suppressed"] = list(cause.data.get("suppressed", []))
    return payload
