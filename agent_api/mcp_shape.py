"""JSON-RPC shapes the MCP SDK mishandles, answered before it sees them.

- A request whose ``id`` is neither a string nor an integer (an object, a list, a float, ``true``,
  ``null``): the SDK takes it for a notification, runs nothing and answers 202 with no body, so the
  client waits for an answer that never comes. JSON-RPC 2.0 makes it an Invalid Request (-32600).
- A batch (a JSON array): the SDK answers 400 with a validation dump that repeats the start of the
  request back. MCP's streamable HTTP transport since 2025-06-18 has no batches: -32600 too.
- An envelope that is no JSON-RPC 2.0 message (``jsonrpc`` other than ``"2.0"``, no ``method``, a
  ``method`` that is not a string, ``params`` that are not an object, as MCP's requests all take):
  the SDK answers -32602 with pydantic's dump of every message type it tried, each quoting the
  request's values back. -32600, saying which member is wrong.
- A key given twice in one object (``{"arguments": {"to": [...], "to": [...]}}``): the SDK keeps
  the last, as the JSON API did; the API now refuses it (422 ``duplicate_key``), and so does this.

Anything else, a body that is not JSON included, goes to the SDK unchanged (it answers -32700).

A POST whose ``Content-Type`` is not ``application/json`` is 415 with a JSON-RPC error: the SDK's
Host and Origin check answered it first, with a bare text/plain 400 no JSON-RPC client can read.

And one HTTP method: only POST is served. A GET asks for the server's own SSE stream, which the
SDK's stateless transport opened and kept open for as long as the client liked (a ping every
15 s), for any valid token, whatever its scopes and uncounted by the rate limit: each one held a
connection and a file descriptor of the worker every tenant's agents share, with no end. This
server sends nothing unasked (no tool streams or asks back), so, as the transport specification
allows, a GET is 405, like the DELETE the SDK already refuses (there are no sessions to end).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from common import strict_json

# Deeper than the SDK's own parser goes (pydantic_core: 201 levels, then -32700), so every body the
# SDK would run is read here in full: a shallower read left a body nested 129-201 levels (a deep
# `_meta`) unchecked, and the SDK kept the last of two equal keys. A deeper body is the SDK's
# parse error.
READ_DEPTH = 512

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
App = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Any]


def shape_problem(body: bytes) -> str | None:
    """Why this body is an Invalid Request the SDK would mishandle, or None."""
    try:
        data = strict_json.loads(body, max_depth=READ_DEPTH)
    except strict_json.JSONRefused as exc:
        if exc.code == "duplicate_key":
            return f"Duplicate key in the request: {exc.message}."
        return None
    if isinstance(data, list):
        return "Batch requests are not supported: send one JSON-RPC request per POST."
    if not isinstance(data, dict):
        return None
    if data.get("jsonrpc") != "2.0":
        return 'A JSON-RPC message must have "jsonrpc": "2.0".'
    if "method" not in data:
        # A response or an error the client sends back has no method: the SDK's to take.
        if "result" in data or "error" in data:
            return None
        return "A JSON-RPC request must name its method."
    if not isinstance(data["method"], str):
        return "A request's method must be a string."
    # ``"params": null`` the SDK reads as none given.
    if data.get("params") is not None and not isinstance(data["params"], dict):
        return "A request's params must be an object."
    if "id" in data:
        request_id = data["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return "A request's id must be a string or an integer."
    return None


def rpc_shape_guard(app: App, *, max_body: int) -> App:
    """``app`` behind the checks above: another method than POST is 405, a POST not sent as
    ``application/json`` 415; a POST's body is read once and handed on as read. A body over
    ``max_body`` goes on unread past that point: the SDK refuses it (413)."""

    async def guarded(scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if scope.get("method") != "POST":
            await _method_not_allowed(send)
            return
        if not _sent_as_json(scope):
            await _unsupported_media_type(send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more and size <= max_body:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        problem = None if more else shape_problem(body)
        if problem is not None:
            await _invalid_request(send, problem)
            return
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        await app(scope, replay, send)

    return guarded


def _sent_as_json(scope: Scope) -> bool:
    headers = dict(scope.get("headers") or [])
    media_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    return media_type == b"application/json"


async def _unsupported_media_type(send) -> None:
    await _error(
        send, 415, "Unsupported Media Type: send the request as Content-Type: application/json."
    )


async def _invalid_request(send, message: str) -> None:
    await _error(send, 400, message)


async def _method_not_allowed(send) -> None:
    await _error(
        send,
        405,
        "Method Not Allowed: this server answers POST only (it opens no SSE stream and keeps no "
        "sessions).",
        headers=[(b"allow", b"POST")],
    )


async def _error(send, status: int, message: str, headers: list | None = None) -> None:
    document = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    payload = json.dumps(document).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
