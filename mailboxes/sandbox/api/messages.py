"""Message reads: `GET /v0/inboxes/{inbox_id}/messages` and `.../messages/{message_id}`."""

from __future__ import annotations

from ..errors import ApiError
from ..records import RESTRICTED_LABELS, iso
from ..store import Store
from .call import Call, Reply
from .fields import query_list
from .scope import allowed, listing, paging, perm, scope_inbox

LIST_ITEM_DROPPED = ("reply_to", "text", "html", "extracted_text", "extracted_html")


def list_messages(store: Store, call: Call) -> Reply:
    inbox = scope_inbox(store, call)
    perm(call, "message_read")
    labels = [label.lower() for label in _label_filter(store, call)]
    limit, token, asc = paging(call, cap=100 if labels else 1000)
    page = store.messages.page(
        inbox_id=inbox["inbox_id"],
        labels=labels,
        hidden=_hidden_labels(call),
        limit=limit,
        token=token,
        asc=asc,
        before=call.q("before"),
        after=call.q("after"),
    )
    page.items = [{k: v for k, v in m.items() if k not in LIST_ITEM_DROPPED} for m in page.items]
    return listing("messages", page, limit)


def _hidden_labels(call: Call) -> list[str]:
    """The restricted labels a listing leaves out: all but those asked for with
    `include_<label>=true` by a key that may read them."""
    return [
        label
        for label, flag in RESTRICTED_LABELS.items()
        if (call.q(f"include_{label}") or "").lower() != "true" or not allowed(call, flag)
    ]


def visible_message(call: Call, message: dict | None) -> dict | None:
    """`message`, or None when it carries a restricted label the caller's key may not read."""
    if message is None:
        return None
    for label in message.get("labels", []):
        flag = RESTRICTED_LABELS.get(label)
        if flag is not None and not allowed(call, flag):
            return None
    return message


def _label_filter(store: Store, call: Call) -> list[str]:
    """The `labels` query as the configured provider reads it (config `labels_query`)."""
    values = call.query.get("labels", [])
    mode = store.config["labels_query"]
    if mode == "ignored":
        return []
    if mode == "repeated":
        return list(values)
    return query_list(values)


def get_message(store: Store, call: Call) -> Reply:
    inbox = scope_inbox(store, call)
    perm(call, "message_read")
    message = visible_message(
        call, store.messages.get(inbox["inbox_id"], call.params["message_id"])
    )
    if message is None:
        raise ApiError.not_found("Message")
    return Reply.json(200, message)


# How long a download URL is said to last (AgentMail's are presigned and expire).
DOWNLOAD_URL_SECONDS = 3600


def get_attachment(store: Store, call: Call) -> Reply:
    """`GET .../messages/{message_id}/attachments/{attachment_id}`: the AttachmentResponse, with
    a `download_url` that serves the bytes without credentials, as AgentMail's presigned URL."""
    inbox = scope_inbox(store, call)
    perm(call, "message_read")
    message = visible_message(
        call, store.messages.get(inbox["inbox_id"], call.params["message_id"])
    )
    if message is None:
        raise ApiError.not_found("Message")
    attachment_id = call.params["attachment_id"]
    entry = next(
        (a for a in message.get("attachments", []) if a.get("attachment_id") == attachment_id),
        None,
    )
    token = store.messages.attachment_token(inbox["inbox_id"], message["message_id"], attachment_id)
    if entry is None or token is None:
        raise ApiError.not_found("Attachment")
    host = call.headers.get("Host") or "127.0.0.1"
    return Reply.json(
        200,
        {
            **entry,
            "download_url": f"http://{host}/_sandbox/attachment?token={token}",
            "expires_at": iso(store.now() + DOWNLOAD_URL_SECONDS),
        },
    )
