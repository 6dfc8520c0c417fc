"""The four send routes: `POST /v0/inboxes/{inbox_id}/messages/send`, and `.../{message_id}/reply`,
`/reply-all`, `/forward`, with the `Idempotency-Key` of reference §8.3."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from ..errors import ApiError
from ..records import address_of, dumps, iso, set_body
from ..store import Store
from .call import Call, Reply
from .fields import (
    ADDRESS_RE,
    IDEMPOTENCY_KEY_RE,
    MAX_SEND_REQUEST_BYTES,
    addresses,
    attachments,
    opt_str,
    prefixed,
    string_map,
    unique,
)
from .messages import visible_message
from .scope import perm, scope_inbox


def send(store: Store, call: Call) -> Reply:
    return _send(store, call, "send")


def reply(store: Store, call: Call) -> Reply:
    return _send(store, call, "reply")


def reply_all(store: Store, call: Call) -> Reply:
    return _send(store, call, "reply_all")


def forward(store: Store, call: Call) -> Reply:
    return _send(store, call, "forward")


def _send(store: Store, call: Call, route: str) -> Reply:
    inbox = scope_inbox(store, call)
    perm(call, "message_send")
    key = call.headers.get("Idempotency-Key")
    if key is not None and not IDEMPOTENCY_KEY_RE.fullmatch(key):
        raise ApiError.validation(
            "Idempotency-Key must be 1-256 characters from A-Z a-z 0-9 - . _ ~",
            ["Idempotency-Key"],
        )
    if len(call.body) > MAX_SEND_REQUEST_BYTES:
        raise ApiError(
            413, "payload_too_large", "The request is larger than 6 MB", name="PayloadTooLargeError"
        )
    body = call.json()
    source = None
    if route != "send":
        source = visible_message(
            call, store.messages.get(inbox["inbox_id"], call.params["message_id"])
        )
        if source is None:
            raise ApiError.not_found("Message")
    message, files = compose(store, inbox, route, body, source)
    fingerprint = json.dumps(
        {
            "route": route,
            "inbox_id": inbox["inbox_id"],
            "message_id": call.params.get("message_id"),
            "body": body,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    if key is not None:
        replay = store.idempotency.begin(key, fingerprint)
        if replay is not None:
            return Reply(replay[0], replay[1])
    try:
        response = _accept(store, call, inbox, route, message, files, key)
    except ApiError:
        if key is not None:
            store.idempotency.release(key)
        raise
    except BaseException:
        if key is not None:
            store.idempotency.fail(key)
        raise
    return Reply(200, response)


def _accept(
    store: Store,
    call: Call,
    inbox: dict,
    route: str,
    message: dict,
    files: list[bytes],
    key: str | None,
) -> bytes:
    """Refuse suppressed recipients, or record the send; the response body a replay repeats."""
    recipients = message["to"] + message.get("cc", []) + message.get("bcc", [])
    blocked = store.sends.suppressed(recipients)
    if blocked:
        raise ApiError(
            403,
            "message_rejected",
            f"Recipient is suppressed: {', '.join(blocked)}",
            name="MessageRejectedError",
        )
    latency = float(store.config["latency_ms"])
    if latency > 0:
        time.sleep(latency / 1000)
    stamp = iso(store.now())
    message["timestamp"] = message["created_at"] = message["updated_at"] = stamp
    response = dumps({"message_id": message["message_id"], "thread_id": message["thread_id"]})
    store.sends.commit(
        message=message,
        pod_id=inbox["pod_id"],
        route=route,
        idempotency_key=key,
        response_body=response.encode(),
        identity=call.who,
        files=files,
    )
    return response.encode()


def compose(
    store: Store, inbox: dict, route: str, body: dict, source: dict | None
) -> tuple[dict, list[bytes]]:
    """The message a send, reply, reply-all or forward of `source` would store, validated, and
    the bytes of its attachments (in the order of `message["attachments"]`)."""
    to = addresses(body, "to")
    cc = addresses(body, "cc")
    bcc = addresses(body, "bcc")
    reply_to = addresses(body, "reply_to")
    own = inbox["inbox_id"]
    subject = opt_str(body, "subject")
    thread_id = str(uuid.uuid4())
    in_reply_to = None
    references: list[str] = []
    if source is not None and route in ("reply", "reply_all"):
        to, cc = _reply_recipients(store, own, route, body, source, to, cc, bcc)
        subject = prefixed("Re: ", source.get("subject"))
        thread_id = source["thread_id"]
        in_reply_to = source["message_id"]
        references = [*source.get("references", []), source["message_id"]]
    elif source is not None:
        subject = subject or prefixed("Fwd: ", source.get("subject"))
    if not (to or cc or bcc):
        raise ApiError(422, "unprocessable", "Message must have at least one recipient")
    labels, headers = _checked(body, to, cc, bcc, reply_to)
    text = opt_str(body, "text")
    html = opt_str(body, "html")
    display = inbox.get("display_name")
    message: dict[str, Any] = {
        "inbox_id": own,
        "thread_id": thread_id,
        "message_id": f"<{uuid.uuid4()}@{own.split('@', 1)[1]}>",
        "labels": unique(["sent", *(label.lower() for label in labels)]),
        "timestamp": "",
        "from": f"{display} <{own}>" if display else own,
    }
    if reply_to:
        message["reply_to"] = reply_to
    message["to"] = to
    if cc:
        message["cc"] = cc
    if bcc:
        message["bcc"] = bcc
    if subject is not None:
        message["subject"] = subject
    set_body(message, text, html)
    files: list[bytes] = []
    if body.get("attachments"):
        parsed = attachments(body["attachments"])
        message["attachments"] = [entry for entry, _ in parsed]
        files = [data for _, data in parsed]
    if in_reply_to:
        message["in_reply_to"] = in_reply_to
        message["references"] = references
    if headers:
        message["headers"] = headers
    message["size"] = message.pop("size") + sum(len(f) for f in files)
    return message, files


def _reply_recipients(
    store: Store,
    own: str,
    route: str,
    body: dict,
    source: dict,
    to: list[str],
    cc: list[str],
    bcc: list[str],
) -> tuple[list[str], list[str]]:
    """`to` and `cc` of a reply: the sender (or the original recipients of our own message),
    and for reply-all everyone else on it but us; explicit recipients win on a plain reply."""
    reply_all = route == "reply_all" or bool(body.get("reply_all"))
    if route == "reply" and body.get("reply_all") and (to or cc or bcc):
        raise ApiError.validation("reply_all cannot be combined with to, cc or bcc")
    direction = store.messages.direction(own, source["message_id"])
    if direction == "inbound":
        original = source.get("reply_to") or [source["from"]]
    else:
        original = list(source["to"])
    if reply_all:
        others = [a for a in source["to"] if address_of(a) != own]
        to = unique(original + (others if direction == "inbound" else []))
        cc = unique([a for a in source.get("cc", []) if address_of(a) != own])
    elif not (to or cc or bcc):
        to = original
    return to, cc


def _checked(
    body: dict, to: list[str], cc: list[str], bcc: list[str], reply_to: list[str]
) -> tuple[list[str], dict | None]:
    """Validate every address, and return the message's labels and custom headers."""
    for name, values in (("to", to), ("cc", cc), ("bcc", bcc), ("reply_to", reply_to)):
        for index, value in enumerate(values):
            if not ADDRESS_RE.fullmatch(address_of(value)):
                raise ApiError.validation(f"Invalid email address: {value}", [name, index])
    labels = body.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise ApiError.validation("labels must be a list of strings", ["labels"])
    headers = body.get("headers")
    if headers is not None and not string_map(headers):
        raise ApiError.validation("headers must map names to strings", ["headers"])
    return labels, headers
