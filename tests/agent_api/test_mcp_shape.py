"""JSON-RPC shapes the MCP SDK mishandles, sent to the server `make run` starts (on loopback, on
the test database) as raw POSTs: what agent_api/mcp_shape.py answers before the SDK sees them.
Each is refused whole with a JSON-RPC error that says what is wrong, repeats nothing of the
request back, and runs no tool."""

from __future__ import annotations

import json

import pytest
from mcp import MCPError

from tests.agent_api.conftest import draft_body
from tests.agent_api.test_mcp import (
    SECRET,
    draft_count,
    rpc,
    session,
    tool_call,
)

pytestmark = pytest.mark.django_db(transaction=True)

MODERN = {
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "create_draft",
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call_with(mailbox, **params) -> dict:
    arguments = draft_body(mailbox)
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    return {**body, "params": {"name": "create_draft", "arguments": arguments, **params}}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_non_finite_id_is_refused_not_taken_for_a_notification(
    mcp_url,
    token_a,
    mailbox_a,
    number,
):
    """The guard's reading refused the number and left the body to the SDK, whose parser takes
    NaN and Infinity: the request was a notification to it, 202 with no body, and the client
    waited for an answer that never came."""
    body = json.dumps({**call_with(mailbox_a), "id": "@@"}).replace('"@@"', number)

    answer = rpc(mcp_url, token_a, body.encode())

    assert answer.status_code == 400
    assert answer.json()["id"] is None
    assert answer.json()["error"]["code"] == -32700
    assert "numbers must be finite" in answer.json()["error"]["message"]
    assert draft_count() == 0


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e400"])
def test_a_non_finite_number_does_not_hide_a_key_given_twice(
    mcp_url,
    token_a,
    mailbox_a,
    number,
):
    """A NaN in `_meta` made the guard's reading fail before it saw the duplicate, and the SDK
    (which takes NaN) kept the second of two `text`s: a draft the agent's log shows as "first"
    went to review as "second"."""
    arguments = json.dumps(draft_body(mailbox_a, text="first")).replace(
        '"text": "first"', '"text": "first", "text": "second"'
    )
    body = tool_call("create_draft", arguments).decode()
    body = body.replace('"params": {', f'"params": {{"_meta": {{"n": {number}}}, ', 1)

    answer = rpc(mcp_url, token_a, body.encode())

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32700
    assert draft_count() == 0


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (json.dumps(SECRET), -32600, "A JSON-RPC message must be an object."),
        (b"null", -32600, "A JSON-RPC message must be an object."),
        (b"42", -32600, "A JSON-RPC message must be an object."),
        (
            f'[{{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "note": "{SECRET}", "n": NaN}}]',
            -32700,
            "Parse error: NaN is not valid JSON; numbers must be finite.",
        ),
        (
            f'{{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "{SECRET}", "n": NaN}}',
            -32700,
            "Parse error: NaN is not valid JSON; numbers must be finite.",
        ),
        (
            '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": ['
            + "0," * 200_000
            + "0]}}",
            -32600,
            "The request is too large: the body holds more than 200,000 values (items of arrays "
            "and members of objects).",
        ),
    ],
    ids=["string", "null", "number", "batch-with-nan", "params-string-with-nan", "many-values"],
)
def test_a_body_that_is_no_message_object_is_refused_and_repeats_nothing_back(
    mcp_url,
    token_a,
    body,
    code,
    message,
):
    """The SDK answered -32602 with pydantic's dump of the four message types it tried, each
    quoting the body back (`input_value='customer-private-words'`)."""
    answer = rpc(mcp_url, token_a, body.encode() if isinstance(body, str) else body)

    assert answer.status_code == 400
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": code, "message": message},
    }
    assert SECRET not in answer.text


@pytest.mark.parametrize("charset", ["latin-1", "iso-8859-1", "utf-16", "windows-1252"])
def test_a_charset_other_than_utf8_is_415_and_runs_nothing(mcp_url, token_a, mailbox_a, charset):
    """The body was read as UTF-8 whatever the header said (a Latin-1 client's 'Ã©' stored as
    'é'); the JSON API refuses another charset (415), and so does this."""
    body = tool_call("create_draft", json.dumps(draft_body(mailbox_a, text="Ã©")))

    answer = rpc(mcp_url, token_a, body, **{"Content-Type": f"application/json; charset={charset}"})

    assert answer.status_code == 415
    assert answer.json()["error"] == {
        "code": -32600,
        "message": (
            "Unsupported Media Type: JSON-RPC bodies are read as UTF-8 only; send "
            "Content-Type: application/json (or with charset=utf-8)."
        ),
    }
    assert draft_count() == 0


@pytest.mark.parametrize("charset", ["utf-8", "UTF-8", '"utf-8"', "utf8"])
def test_a_utf8_charset_is_served(mcp_url, token_a, mailbox_a, charset):
    body = tool_call("create_draft", json.dumps(draft_body(mailbox_a, text="Grüße")))

    answer = rpc(mcp_url, token_a, body, **{"Content-Type": f"application/json; charset={charset}"})

    assert answer.status_code == 200
    assert answer.json()["result"]["structuredContent"]["current_version"]["text"] == "Grüße"
    assert draft_count() == 1


@pytest.mark.parametrize("headers", [{}, MODERN], ids=["2025-11-25", "2026-07-28"])
def test_a_tool_call_without_an_id_is_refused_not_silently_dropped(
    mcp_url,
    token_a,
    mailbox_a,
    headers,
):
    """Without an id a request is a notification, which gets no answer: the SDK accepted it
    (202) and dropped it, so an agent that left the id out believed its draft was posted. MCP's
    transport lets a server refuse a notification it cannot accept (400); a request method is
    one."""
    request = call_with(mailbox_a, _meta=MODERN_META) if headers else call_with(mailbox_a)
    del request["id"]
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}

    refused = rpc(mcp_url, token_a, json.dumps(request).encode(), **headers)
    accepted = rpc(mcp_url, token_a, json.dumps(notification).encode())

    assert refused.status_code == 400
    assert refused.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": (
                "A request needs an id (a string or an integer): without one it is a "
                "notification, which is never answered, so it was not run."
            ),
        },
    }
    assert accepted.status_code == 202
    assert draft_count() == 0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "tools/call: params.name must be the tool's name (a string)."),
        ({"name": 5}, "tools/call: params.name must be the tool's name (a string)."),
        (
            {"name": "create_draft", "arguments": [SECRET]},
            "tools/call: params.arguments must be an object.",
        ),
        (
            {"name": "create_draft", "arguments": SECRET},
            "tools/call: params.arguments must be an object.",
        ),
        (
            {"name": "list_mailboxes", "arguments": {}, "_meta": SECRET},
            "params._meta must be an object.",
        ),
    ],
    ids=["no-name", "name-number", "arguments-list", "arguments-string", "meta-string"],
)
def test_tool_call_params_of_the_wrong_shape_name_the_member(
    mcp_url,
    token_a,
    params,
    message,
):
    """The SDK answered -32602 "Invalid request parameters" with empty data: nothing said which
    member was wrong."""
    body = {"jsonrpc": "2.0", "id": "call-9", "method": "tools/call", "params": params}

    answer = rpc(mcp_url, token_a, json.dumps(body).encode())

    assert answer.status_code == 400
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": "call-9",
        "error": {"code": -32602, "message": message},
    }
    assert SECRET not in answer.text
    assert draft_count() == 0


@pytest.mark.parametrize("credential", [None, "cs_unknown0_" + "x" * 43], ids=["none", "unknown"])
@pytest.mark.parametrize(
    "body",
    [b"[1, 2]", b"\xff\xfe", b'{"jsonrpc": "1.0"}', b"[" + b"{}," * 1_400_000 + b"{}]"],
    ids=["batch", "not-utf8", "envelope", "four-mib-batch"],
)
def test_a_body_is_not_read_before_its_token_is_checked(mcp_url, credential, body):
    """The guard parsed every body, up to the 4.4 MiB limit, before the SDK checked the token:
    a client with no token had its JSON read (about half a second of the worker's one event
    loop for a body of four MiB of `{}`) and got the guard's answer about its shape. Two such
    clients slowed every tenant's calls on that worker from 0.04 s to over a second. The token
    comes first, as on the JSON API: 401, the body unread."""
    answer = rpc(mcp_url, credential, body)

    assert answer.status_code == 401
    assert answer.json()["error"] == "invalid_token"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"id": 1, "result": SECRET}, "A response's result must be an object."),
        ({"result": {"note": SECRET}}, "A response's id must be a string or an integer."),
        ({"id": {"a": SECRET}, "result": {}}, "A response's id must be a string or an integer."),
        ({"id": 1, "error": SECRET}, "An error's error must be an object."),
        (
            {"id": 1, "error": {"code": "x", "message": SECRET}},
            "An error's error.code must be an integer.",
        ),
        (
            {"id": 1, "error": {"code": 1, "message": [SECRET]}},
            "An error's error.message must be a string.",
        ),
        (
            {"error": {"code": 1, "message": SECRET}},
            "An error's id must be a string, an integer or null.",
        ),
        (
            {"id": 1, "result": {}, "error": {"code": 1, "message": SECRET}},
            "A response has a result or an error, not both.",
        ),
    ],
    ids=[
        "result-string",
        "result-no-id",
        "result-object-id",
        "error-string",
        "code-string",
        "message-list",
        "error-no-id",
        "both",
    ],
)
def test_a_malformed_response_from_the_client_is_refused_and_repeats_nothing_back(
    mcp_url,
    token_a,
    body,
    message,
):
    """A message without a method (a response or an error the client sends back) went to the
    SDK whatever its shape, which answered -32602 with pydantic's dump of the four message
    types it tried, each quoting the body back (`input_value={... 'customer-private-words'}`)
    with the library's version in its links."""
    answer = rpc(mcp_url, token_a, json.dumps({"jsonrpc": "2.0", **body}).encode())

    assert answer.status_code == 400
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": message},
    }
    assert SECRET not in answer.text


def test_a_well_formed_response_from_the_client_is_accepted(mcp_url, token_a):
    result = rpc(mcp_url, token_a, b'{"jsonrpc": "2.0", "id": 1, "result": {}}')
    error = rpc(
        mcp_url, token_a, b'{"jsonrpc": "2.0", "id": null, "error": {"code": 1, "message": "x"}}'
    )

    assert (result.status_code, error.status_code) == (202, 202)


def _oversized_call(mailbox) -> bytes:
    return json.dumps(call_with(mailbox, arguments=draft_body(mailbox, text="y" * 6_000_000)))


@pytest.mark.parametrize("sent", ["with_length", "chunked"])
def test_a_body_over_the_limit_is_a_json_rpc_413_that_says_so(mcp_url, token_a, mailbox_a, sent):
    """The SDK answered a body over the limit with a bare text/plain 413, ``Request body too
    large``, which its own client turns into -32603 "Server returned an error response": an agent
    whose draft's files took it over the limit was told the server failed, and retried."""
    body = _oversized_call(mailbox_a).encode()
    content = body if sent == "with_length" else iter([body[:1_000_000], body[1_000_000:]])

    answer = rpc(mcp_url, token_a, content)

    assert answer.status_code == 413
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json()["error"]["code"] == -32600
    assert answer.json()["error"]["message"].startswith("The request body is larger than ")
    assert answer.json()["error"]["data"]["code"] == "body_too_large"
    assert draft_count() == 0


def test_the_sdks_client_reads_why_a_body_over_the_limit_was_refused(mcp_url, token_a, mailbox_a):
    """The client writes the whole body before it reads the answer: the rest of a body over the
    limit is read and dropped, so the client reads the 413 instead of a connection closed under
    it."""
    with pytest.raises(ExceptionGroup) as refused:
        session(mcp_url, token_a, ("create_draft", draft_body(mailbox_a, text="y" * 6_000_000)))

    assert refused.group_contains(MCPError, match=r"^The request body is larger than \d+ KiB\.$")
    assert draft_count() == 0


# The MCP server's answers hold what the JSON API's do (drafts, customers' addresses), which
# say no-store: the SDK's own, the shape guard's refusals and the 401 said nothing of caching
# nor of sniffing, so a proxy or a browser between the agent and us could keep or read them.
def test_every_answer_is_stored_by_no_cache_and_is_not_sniffed(mcp_url, token_a, mailbox_a):
    answers = {
        "result": rpc(
            mcp_url, token_a, tool_call("create_draft", json.dumps(draft_body(mailbox_a)))
        ),
        "refused shape": rpc(mcp_url, token_a, b"[1]"),
        "no token": rpc(mcp_url, None, tool_call("create_draft", "{}")),
        "charset": rpc(
            mcp_url, token_a, b"{}", **{"Content-Type": "application/json; charset=latin-1"}
        ),
    }

    assert {name: answer.status_code for name, answer in answers.items()} == {
        "result": 200,
        "refused shape": 400,
        "no token": 401,
        "charset": 415,
    }
    for name, answer in answers.items():
        assert "no-store" in answer.headers.get("Cache-Control", ""), name
        assert answer.headers.get("X-Content-Type-Options") == "nosniff", name
