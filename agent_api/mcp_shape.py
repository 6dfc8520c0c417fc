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
- A body this reading refuses (``common.strict_json``: not JSON, not UTF-8, nested too deep, a
  number that is not finite or too long) is a Parse error (-32700) here, whatever else it holds.
  It went to the SDK, whose parser takes ``NaN`` and ``Infinity``: an ``"id": NaN`` request was a
  notification to it (202, no answer), and a ``NaN`` anywhere hid every check above from this
  reading, a key given twice (the draft took the second) and a batch or a ``params`` string
  (quoted back) included.
- A JSON value that is no object (``"words"``, ``null``, ``42``): the SDK's -32602 dump quoted it
  back. -32600.
- A request method without an ``id`` (``tools/call`` as a notification): the SDK answered 202 and
  dropped it, so an agent that left the id out believed its draft was posted. A notification is
  never answered; MCP's transport lets a server refuse one it cannot accept (400). -32600.
- A response or an error the client sends back (no ``method``) of another shape than JSON-RPC's
  (an id of no JSON-RPC type, a ``result`` that is no object, an ``error`` without an integer
  ``code`` and a string ``message``, both a result and an error): the same dump. -32600, saying
  which member is wrong.
- ``tools/call`` params whose ``name`` is no string or whose ``arguments`` (or any request's
  ``_meta``) are no object: the SDK said only "Invalid request parameters". -32602, naming the
  member, with the request's id.

Anything else goes to the SDK unchanged.

A POST whose ``Content-Type`` is not ``application/json`` is 415 with a JSON-RPC error: the SDK's
Host and Origin check answered it first, with a bare text/plain 400 no JSON-RPC client can read.
So is one that names a charset other than UTF-8, as on the JSON API: the body was read as UTF-8
whatever the header said (a Latin-1 client's ``Ã©`` stored as ``é``).

A body over the limit (``MAX_BODY_BYTES``, as on the JSON API) is 413 with a JSON-RPC error whose
data is the API's ``body_too_large`` problem: the SDK's own 413 was a bare text/plain line, which
its client reported as -32603 "Server returned an error response".

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
from dataclasses import dataclass
from typing import Any

from agent_api.auth import UTF8_NAMES, body_too_large
from agent_api.errors import problem_of
from common import strict_json

# Deeper than the SDK's own parser goes (pydantic_core: 201 levels, then -32700), so every body the
# SDK would run is read here in full: a shallower read left a body nested 129-201 levels (a deep
# `_meta`) unchecked, and the SDK kept the last of two equal keys. A deeper body is the SDK's
# parse error.
READ_DEPTH = 512

# How much of a body over the limit is read (and dropped) before the 413, so that a client
# still writing it reads the answer; one declared longer is refused before a byte is read.
DRAIN_FACTOR = 2

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
App = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Any]


PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
# JSON-RPC leaves -32000 to -32099 to the server; the problem document in ``data`` says the rest.
RATE_LIMITED = -32000
# A request the token may not make at all (its tenant suspended), as the API's 403.
FORBIDDEN = -32003
# MCP's notifications all live under this prefix; a method outside it is a request.
NOTIFICATION_PREFIX = "notifications/"


@dataclass(frozen=True)
class Refusal:
    """A JSON-RPC error for a body refused here: its message never quotes the body."""

    message: str
    code: int = INVALID_REQUEST
    request_id: str | int | None = None


def shape_problem(body: bytes) -> Refusal | None:
    """Why this body is refused before the SDK sees it, or None."""
    try:
        data = strict_json.loads(body, max_depth=READ_DEPTH)
    except strict_json.JSONRefused as exc:
        if exc.code == "duplicate_key":
            return Refusal(f"Duplicate key in the request: {exc.message}.")
        if exc.code == "too_many_values":
            return Refusal(f"The request is too large: {exc.message}.")
        return Refusal(f"Parse error: {exc.message}.", PARSE_ERROR)
    if isinstance(data, list):
        return Refusal("Batch requests are not supported: send one JSON-RPC request per POST.")
    if not isinstance(data, dict):
        return Refusal("A JSON-RPC message must be an object.")
    if data.get("jsonrpc") != "2.0":
        return Refusal('A JSON-RPC message must have "jsonrpc": "2.0".')
    if "method" not in data:
        # A response or an error the client sends back has no method: the SDK's to take, once
        # its shape is one the SDK reads.
        if "result" in data or "error" in data:
            return _reply_problem(data)
        return Refusal("A JSON-RPC request must name its method.")
    method = data["method"]
    if not isinstance(method, str):
        return Refusal("A request's method must be a string.")
    # ``"params": null`` the SDK reads as none given.
    params = data.get("params")
    if params is not None and not isinstance(params, dict):
        return Refusal("A request's params must be an object.")
    if "id" not in data:
        if method.startswith(NOTIFICATION_PREFIX):
            return None
        return Refusal(
            "A request needs an id (a string or an integer): without one it is a notification, "
            "which is never answered, so it was not run."
        )
    request_id = data["id"]
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return Refusal("A request's id must be a string or an integer.")
    problem = _params_problem(method, params or {})
    return Refusal(problem, INVALID_PARAMS, request_id) if problem else None


def _is_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _reply_problem(data: dict) -> Refusal | None:
    """What is wrong with a response or an error the client sends back, or None: the SDK
    answered any other shape with pydantic's dump of every message type it tried, each quoting
    the body back."""
    if "result" in data and "error" in data:
        return Refusal("A response has a result or an error, not both.")
    if "result" in data:
        if not _is_id(data.get("id")):
            return Refusal("A response's id must be a string or an integer.")
        if not isinstance(data["result"], dict):
            return Refusal("A response's result must be an object.")
        return None
    if "id" not in data or not (data["id"] is None or _is_id(data["id"])):
        return Refusal("An error's id must be a string, an integer or null.")
    error = data["error"]
    if not isinstance(error, dict):
        return Refusal("An error's error must be an object.")
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        return Refusal("An error's error.code must be an integer.")
    if not isinstance(error.get("message"), str):
        return Refusal("An error's error.message must be a string.")
    return None


def _params_problem(method: str, params: dict) -> str | None:
    if params.get("_meta") is not None and not isinstance(params["_meta"], dict):
        return "params._meta must be an object."
    if method != "tools/call":
        return None
    if not isinstance(params.get("name"), str):
        return "tools/call: params.name must be the tool's name (a string)."
    if params.get("arguments") is not None and not isinstance(params["arguments"], dict):
        return "tools/call: params.arguments must be an object."
    return None


def rpc_shape_guard(app: App) -> App:
    """``app`` behind the checks above that read no body: another method than POST is 405, a
    POST not sent as ``application/json`` 415. The body's checks are ``body_guard``'s, inside the
    SDK's app, once its authentication has run."""

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
        if not _sent_as_utf8(scope):
            await _unsupported_charset(send)
            return
        await app(scope, receive, send)

    return guarded


def body_guard(app: App, *, max_body: int) -> App:
    """``app`` behind the body checks above (``shape_problem``), for a request whose bearer token
    the SDK's authentication middleware accepted (it runs after it: ``mcp_server``). A request
    without a valid token goes on unread, and the SDK answers 401: this guard read and parsed
    every body first, up to ``max_body``, on the event loop every tenant's calls share, for any
    client, and told one with no token what was wrong with its JSON. The JSON API checks the
    token before it reads a body too (``agent_api.auth``).

    A checked body is read once and handed on as read. A body over ``max_body`` is 413 with the
    JSON API's ``body_too_large`` as the error's data (``_read_body``): the SDK answered it with
    a bare text/plain ``Request body too large``, which its client turns into -32603 "Server
    returned an error response", so an agent whose files took a draft over the limit was told
    the server had failed, and retried."""

    async def guarded(scope: Scope, receive, send) -> None:
        user = scope.get("user") if scope["type"] == "http" else None
        if not getattr(user, "is_authenticated", False):
            await app(scope, receive, send)
            return
        if _declared_length(scope) > DRAIN_FACTOR * max_body:
            await _too_large(send)
            return
        body = await _read_body(receive, max_body)
        if body is None:  # the client left
            return
        if len(body) > max_body:
            await _too_large(send)
            return
        problem = shape_problem(body)
        if problem is not None:
            await _refuse(send, problem)
            return
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return guarded


async def _read_body(receive, max_body: int) -> bytes | None:
    """The body, or None if the client left. One over ``max_body`` is read on, up to
    ``DRAIN_FACTOR`` times it, and kept only until it passes the limit: a client that writes its
    whole body before it reads the answer (the SDK's does) met a connection closed under it,
    a read error instead of the 413."""
    chunks: list[bytes] = []
    size, more = 0, True
    while more and size <= DRAIN_FACTOR * max_body:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        if size <= max_body:
            chunks.append(chunk)
        size += len(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def _declared_length(scope: Scope) -> int:
    """The Content-Length header as a number; 0 without one or with one that is no number (the
    body is then counted as it arrives)."""
    raw = dict(scope.get("headers") or []).get(b"content-length", b"").strip()
    if not raw.isdigit():
        return 0
    # int() refuses a number of more than 4300 digits, which a header can hold.
    return int(raw) if len(raw) <= 18 else 10**18


def _content_type(scope: Scope) -> list[str]:
    """The Content-Type header split at its semicolons, as text (latin-1, as HTTP allows)."""
    headers = dict(scope.get("headers") or [])
    return headers.get(b"content-type", b"").decode("latin-1").split(";")


def _sent_as_json(scope: Scope) -> bool:
    return _content_type(scope)[0].strip().lower() == "application/json"


def _sent_as_utf8(scope: Scope) -> bool:
    for parameter in _content_type(scope)[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').strip().lower() in UTF8_NAMES
    return True


async def _unsupported_media_type(send) -> None:
    await _error(
        send, 415, "Unsupported Media Type: send the request as Content-Type: application/json."
    )


async def _unsupported_charset(send) -> None:
    await _error(
        send,
        415,
        "Unsupported Media Type: JSON-RPC bodies are read as UTF-8 only; send "
        "Content-Type: application/json (or with charset=utf-8).",
    )


async def _refuse(send, refusal: Refusal) -> None:
    await _error(send, 400, refusal.message, code=refusal.code, request_id=refusal.request_id)


async def _too_large(send) -> None:
    """HTTP 413, the body unread past the limit (so the id is null), with the JSON API's problem
    document as the error's data."""
    problem = problem_of(body_too_large())
    await _error(send, 413, problem["detail"], data=problem)


async def refuse_rate_limited(send, problem: dict) -> None:
    """HTTP 429 with ``Retry-After``, and the API's problem document (``retry_after`` in it) as
    the JSON-RPC error's data. The body is unread, so the id is null (the SDK's client answers
    the request it sent with it)."""
    retry_after = str(problem["retry_after"]).encode()
    await _error(
        send,
        429,
        problem["detail"],
        code=RATE_LIMITED,
        data=problem,
        headers=[(b"retry-after", retry_after)],
    )


async def _method_not_allowed(send) -> None:
    await _error(
        send,
        405,
        "Method Not Allowed: this server answers POST only (it opens no SSE stream and keeps no "
        "sessions).",
        headers=[(b"allow", b"POST")],
    )


async def _error(
    send,
    status: int,
    message: str,
    *,
    code: int = INVALID_REQUEST,
    request_id: str | int | None = None,
    headers: list | None = None,
    data: dict | None = None,
) -> None:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    document = {"jsonrpc": "2.0", "id": request_id, "error": error}
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
