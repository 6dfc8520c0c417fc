"""The MCP server (/mcp/) as an agent meets it: the app served by the exact command `make run`
uses (gunicorn's ASGI worker on config.asgi) on a loopback port, on the test database, driven by
the official SDK's client over streamable HTTP.

Every tool has exactly the rights of the token: its tenant, its scopes, its mailbox restriction,
its expiry and revocation. Refusals are the JSON API's problem documents and change nothing.
"""

from __future__ import annotations

import json
import threading

import anyio
import httpx
import httpx2
import pytest
from django.utils import timezone
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from agent_api.idempotency import fingerprint, token_credential
from agent_api.mcp_tools import call_tool
from intents import services
from intents.models import Draft, DraftVersion
from tenants.models import AgentToken
from tenants.tokens import token_revoke
from tests.agent_api.conftest import draft_body
from webhooks.models import InboundMessage

TOOLS = {"list_mailboxes", "create_draft", "revise_draft", "withdraw_draft", "get_draft"}
TOOLS |= {"list_drafts", "create_broadcast", "replace_broadcast_recipients", "get_broadcast"}
TOOLS |= {"list_broadcasts"}


def run_async(fn):
    """``anyio.run(fn)`` in a thread of its own. The session-long Playwright browser
    (tests/pages.py) keeps an event loop running in the main thread once a browser test has run
    in this process, and anyio refuses to start another one there."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = anyio.run(fn)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def session(url: str, token: str | None, *calls: tuple[str, dict]):
    """One MCP session with the SDK's client: initialize, then each (tool, arguments) in order.
    Returns the tools/list result and the call results."""

    async def run():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            listed = await client.list_tools()
            return listed, [await client.call_tool(name, arguments) for name, arguments in calls]

    return run_async(run)


def results(url: str, token: str | None, *calls: tuple[str, dict]):
    return session(url, token, *calls)[1]


def rpc(url: str, token: str | None, body: bytes, **extra: str) -> httpx.Response:
    """One raw JSON-RPC POST: for what the SDK's client cannot send (a lone surrogate escaped in
    the JSON, an oversized body) and to read the HTTP status."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(url, content=body, headers={**headers, **extra}, timeout=30)


def tool_call(name: str, arguments_json: str) -> bytes:
    """A tools/call request whose arguments are the JSON text given, byte for byte."""
    params = {"name": name, "arguments": "@arguments@"}
    envelope = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    return envelope.replace('"@arguments@"', arguments_json).encode()


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
).encode()


def problem(result) -> dict:
    assert result.is_error is True
    return result.structured_content


def draft_count() -> int:
    return Draft.objects.count()


pytestmark = pytest.mark.django_db(transaction=True)


def test_the_tools_are_listed_with_the_apis_own_schemas(mcp_url, token_a):
    listed, _ = session(mcp_url, token_a)

    tools = {tool.name: tool for tool in listed.tools}
    create = tools["create_draft"].input_schema
    assert set(tools) == TOOLS
    assert not {name for name in tools if "approve" in name or "send" in name}
    assert create["additionalProperties"] is False
    assert set(create["required"]) == {"mailbox", "to"}
    assert create["properties"]["to"]["maxItems"] == services.MAX_RECIPIENTS
    assert create["properties"]["idempotency_key"]["anyOf"][0]["pattern"].startswith("^[A-Za-z")
    assert tools["revise_draft"].input_schema["required"] == ["to", "draft_id"]
    assert tools["list_mailboxes"].input_schema["additionalProperties"] is False
    assert tools["get_draft"].annotations.read_only_hint is True
    assert tools["create_draft"].annotations.read_only_hint is False


WRITE_TOOLS = {"create_draft", "revise_draft", "withdraw_draft", "create_broadcast"}
WRITE_TOOLS |= {"replace_broadcast_recipients"}


def test_tools_list_offers_only_the_tools_the_tokens_scopes_allow(mcp_url, make_token, tenant_a):
    """An outside probe: a read-only token was offered every write tool, and a model that picks a
    tool from the list tried each one into a 403; a write-only token was offered the reads."""
    reader = make_token(tenant_a, scopes=("drafts:read",))
    writer = make_token(tenant_a, scopes=("drafts:write",))

    read_listed, _ = session(mcp_url, reader)
    write_listed, _ = session(mcp_url, writer)

    assert {tool.name for tool in read_listed.tools} == TOOLS - WRITE_TOOLS
    assert {tool.name for tool in write_listed.tools} == WRITE_TOOLS


def test_one_key_twice_is_one_draft_and_the_same_answer(mcp_url, token_a, mailbox_a):
    arguments = {**draft_body(mailbox_a), "idempotency_key": "order-1042-reply"}

    first, second, other = results(
        mcp_url,
        token_a,
        ("create_draft", arguments),
        ("create_draft", arguments),
        ("create_draft", {**arguments, "text": "Another text under the same key."}),
    )

    assert first.is_error is False
    assert first.structured_content["status"] == "pending"
    assert first.structured_content["mailbox"]["id"] == mailbox_a.pk
    assert second.structured_content == first.structured_content
    assert second.meta == {"countersign/idempotent-replayed": True}
    assert first.meta is None
    assert problem(other)["code"] == "idempotency_key_reused"
    assert problem(other)["status"] == 422
    assert draft_count() == 1
    assert Draft.objects.get().agent_token.tenant_id == mailbox_a.tenant_id


def test_a_reused_key_is_refused_naming_the_argument_the_agent_sent(mcp_url, token_a, mailbox_a):
    """The refusal named the JSON API's header, ``Idempotency-Key``, which no tool takes: a model
    reading ``[Idempotency-Key: already used ...]`` looked for an argument of that name."""
    arguments = {**draft_body(mailbox_a), "idempotency_key": "order-1043-reply"}

    first, other = results(
        mcp_url,
        token_a,
        ("create_draft", arguments),
        ("create_draft", {**arguments, "text": "Another text under the same key."}),
    )

    assert first.is_error is False
    assert problem(other)["code"] == "idempotency_key_reused"
    assert [e["field"] for e in problem(other)["errors"]] == ["idempotency_key"]
    assert "Idempotency-Key" not in other.content[0].text
    assert draft_count() == 1


def test_without_a_key_the_same_arguments_are_one_draft(mcp_url, token_a, mailbox_a):
    first, second, changed = results(
        mcp_url,
        token_a,
        ("create_draft", draft_body(mailbox_a)),
        ("create_draft", draft_body(mailbox_a)),
        ("create_draft", draft_body(mailbox_a, text="A different reply.")),
    )

    assert second.structured_content["id"] == first.structured_content["id"]
    assert changed.structured_content["id"] != first.structured_content["id"]
    assert draft_count() == 2


def test_another_token_cannot_claim_the_key_a_call_without_one_derives(
    mcp_url, api, make_token, token_a, tenant_a, mailbox_a
):
    """The derived key was the fingerprint's first 60 hex digits: token id and arguments, both
    known to another token of the tenant, which posted a draft under that key first; the
    victim's own call was then refused as a reused key for a day."""
    victim = AgentToken.objects.get(tenant=tenant_a)
    digest = fingerprint(
        credential=token_credential(victim),
        method="MCP",
        path="mcp:create_draft",
        data=draft_body(mailbox_a),
    )
    other = make_token(tenant_a)
    claimed = api.post("/drafts", draft_body(mailbox_a), token=other, key=f"mcp-{digest[:60]}")

    [call] = results(mcp_url, token_a, ("create_draft", draft_body(mailbox_a)))

    assert claimed.status_code == 201
    assert not call.is_error and call.structured_content["status"] == "pending"
    assert draft_count() == 2


def test_a_call_without_a_key_is_one_draft_across_a_secret_rotation(token_a, mailbox_a, settings):
    """The derived key is an HMAC under SECRET_KEY: a retry just after a rotation (the old secret
    kept in SECRET_KEY_FALLBACKS) derived another key, and created the draft a second time."""
    first = call_tool(raw_token=token_a, name="create_draft", arguments=draft_body(mailbox_a))
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "rotated-" + settings.SECRET_KEY

    retried = call_tool(raw_token=token_a, name="create_draft", arguments=draft_body(mailbox_a))

    assert not first.is_error and first.document["status"] == "pending"
    assert retried.replayed and retried.document == first.document
    assert draft_count() == 1


def test_another_tenants_mailbox_is_refused_exactly_like_a_missing_one(
    mcp_url, token_a, mailbox_a, mailbox_b
):
    by_address, by_id, missing = results(
        mcp_url,
        token_a,
        ("create_draft", draft_body(mailbox_b)),
        ("create_draft", {**draft_body(mailbox_b), "mailbox": mailbox_b.pk}),
        ("create_draft", {**draft_body(mailbox_b), "mailbox": "nobody@agentmail.to"}),
    )

    assert problem(by_address)["status"] == 404
    assert problem(by_address)["code"] == "mailbox_not_found"
    assert problem(by_address) == problem(by_id) == problem(missing)
    assert by_address.content[0].text == missing.content[0].text
    assert draft_count() == 0


def test_a_new_message_naming_a_thread_is_refused_and_the_key_kept(mcp_url, token_a, mailbox_a):
    """As on the JSON API: a new message starts its own thread, so naming one is refused; the
    refusal writes nothing and leaves the key for the corrected call."""
    InboundMessage.objects.create(
        tenant=mailbox_a.tenant,
        mailbox=mailbox_a,
        thread_id="thr-kenji",
        message_id="<kenji@example.com>",
        sender="kenji@example.com",
        subject="Order 77",
        received_at=timezone.now(),
    )
    arguments = {**draft_body(mailbox_a, subject="Your order"), "idempotency_key": "new-1"}
    reply = draft_body(
        mailbox_a, subject="Re: Order 77", in_reply_to="<kenji@example.com>", thread_id="thr-kenji"
    )

    refused, corrected, replied = results(
        mcp_url,
        token_a,
        ("create_draft", {**arguments, "thread_id": "thr-kenji"}),
        ("create_draft", arguments),
        ("create_draft", reply),
    )

    assert problem(refused)["status"] == 422
    assert problem(refused)["code"] == "thread_id_without_in_reply_to"
    assert [e["field"] for e in problem(refused)["errors"]] == ["thread_id"]
    assert corrected.is_error is False
    assert corrected.structured_content["thread_id"] == ""
    assert replied.is_error is False
    assert replied.structured_content["thread_id"] == "thr-kenji"
    assert draft_count() == 2


def test_no_token_a_bad_one_and_a_revoked_one_are_401(mcp_url, make_token, tenant_a):
    revoked = make_token(tenant_a)
    token_revoke(
        tenant=tenant_a,
        token_id=AgentToken.objects.get(prefix=revoked.split("_")[1]).pk,
        actor=None,
    )
    forged = revoked[:-4] + "AAAA"

    answers = [rpc(mcp_url, token, INITIALIZE) for token in (None, "cs_nonsense", forged, revoked)]

    assert [a.status_code for a in answers] == [401, 401, 401, 401]
    assert all(a.headers["WWW-Authenticate"].startswith("Bearer ") for a in answers)
    with pytest.raises(ExceptionGroup) as refused:
        session(mcp_url, revoked)
    assert refused.group_contains(MCPError)


def test_an_expired_token_is_401(mcp_url, make_token, tenant_a):
    token = make_token(tenant_a)
    AgentToken.objects.filter(prefix=token.split("_")[1]).update(expires_at="2020-01-01T00:00Z")

    assert rpc(mcp_url, token, INITIALIZE).status_code == 401


def test_a_read_only_token_cannot_create(mcp_url, make_token, tenant_a, mailbox_a):
    reader = make_token(tenant_a, scopes=("drafts:read",))

    mailboxes, created = results(
        mcp_url, reader, ("list_mailboxes", {}), ("create_draft", draft_body(mailbox_a))
    )

    assert [m["id"] for m in mailboxes.structured_content["items"]] == [mailbox_a.pk]
    assert problem(created)["status"] == 403
    assert problem(created)["code"] == "insufficient_scope"
    assert draft_count() == 0


def test_reads_show_only_the_tokens_tenant_and_mailboxes(
    mcp_url, make_token, tenant_a, mailbox_a, mailbox_a2, mailbox_b, token_b
):
    restricted = make_token(tenant_a, mailboxes=[mailbox_a])
    whole_tenant = make_token(tenant_a)
    [mine] = results(mcp_url, restricted, ("create_draft", draft_body(mailbox_a)))
    [sibling] = results(mcp_url, whole_tenant, ("create_draft", draft_body(mailbox_a2)))
    [foreign] = results(mcp_url, token_b, ("create_draft", draft_body(mailbox_b)))
    mine_id = mine.structured_content["id"]
    sibling_id = sibling.structured_content["id"]
    foreign_id = foreign.structured_content["id"]

    listed, boxes, own, other_box, other_tenant, missing, tenant_wide = results(
        mcp_url,
        restricted,
        ("list_drafts", {}),
        ("list_mailboxes", {}),
        ("get_draft", {"draft_id": mine_id}),
        ("get_draft", {"draft_id": sibling_id}),
        ("get_draft", {"draft_id": foreign_id}),
        ("get_draft", {"draft_id": foreign_id + 1000}),
        ("create_draft", draft_body(mailbox_a2)),
    )
    [wide] = results(mcp_url, whole_tenant, ("list_drafts", {}))

    assert [d["id"] for d in listed.structured_content["items"]] == [mine_id]
    assert [m["id"] for m in boxes.structured_content["items"]] == [mailbox_a.pk]
    assert own.structured_content["current_version"]["number"] == 1
    assert problem(other_box)["code"] == "not_found"
    assert problem(other_box) == problem(other_tenant) == problem(missing)
    assert problem(tenant_wide)["code"] == "mailbox_not_found"
    assert sorted(d["id"] for d in wide.structured_content["items"]) == [mine_id, sibling_id]
    assert draft_count() == 3


def test_revise_and_withdraw_then_a_decided_draft_is_refused(
    mcp_url, token_a, mailbox_a, member_of
):
    [kept, approved] = results(
        mcp_url,
        token_a,
        ("create_draft", draft_body(mailbox_a)),
        ("create_draft", draft_body(mailbox_a, text="To be approved.")),
    )
    kept_id, approved_id = kept.structured_content["id"], approved.structured_content["id"]
    version = DraftVersion.objects.get(draft_id=approved_id)
    services.draft_approve(
        tenant=mailbox_a.tenant,
        draft_id=approved_id,
        version=1,
        content_hash=version.content_hash,
        actor=member_of(mailbox_a.tenant, "approver").user,
    )
    revision = {"to": ["customer@example.com"], "subject": "Re: v2", "text": "Tracking: 1Z999."}

    revised, stale, withdrawn, again, late_revision, on_approved, withdraw_approved = results(
        mcp_url,
        token_a,
        ("revise_draft", {**revision, "draft_id": kept_id, "base_version": 1}),
        ("revise_draft", {**revision, "draft_id": kept_id, "base_version": 1}),
        ("withdraw_draft", {"draft_id": kept_id}),
        ("withdraw_draft", {"draft_id": kept_id}),
        ("revise_draft", {**revision, "draft_id": kept_id}),
        ("revise_draft", {**revision, "draft_id": approved_id}),
        ("withdraw_draft", {"draft_id": approved_id}),
    )

    assert revised.structured_content["current_version"]["number"] == 2
    assert revised.structured_content["current_version"]["text"] == "Tracking: 1Z999."
    assert problem(stale)["code"] == "version_conflict"
    assert withdrawn.structured_content["status"] == "withdrawn"
    assert problem(again)["code"] == "not_pending"
    assert problem(late_revision)["code"] == "not_pending"
    assert problem(on_approved)["code"] == "not_pending"
    assert problem(withdraw_approved)["status"] == 409
    assert Draft.objects.get(pk=approved_id).status == "approved"
    assert DraftVersion.objects.filter(draft_id=kept_id).count() == 2


def test_hostile_arguments_are_refused_cleanly_and_change_nothing(mcp_url, token_a, mailbox_a):
    nul, huge, unknown, header_break, wrong_type, unknown_tool = results(
        mcp_url,
        token_a,
        ("create_draft", draft_body(mailbox_a, text="hello\x00world")),
        ("create_draft", draft_body(mailbox_a, text="x" * 200_001)),
        ("create_draft", {**draft_body(mailbox_a), "bbc": ["hidden@example.com"]}),
        ("create_draft", draft_body(mailbox_a, subject="Hi\r\nBcc: x@evil.test")),
        ("get_draft", {"draft_id": "1"}),
        ("approve_draft", {"draft_id": 1}),
    )
    surrogate = rpc(
        mcp_url,
        token_a,
        tool_call(
            "create_draft", json.dumps(draft_body(mailbox_a, text="@@")).replace("@@", "\\ud800")
        ),
    )
    oversized = rpc(
        mcp_url,
        token_a,
        tool_call("create_draft", json.dumps(draft_body(mailbox_a, text="y" * 6_000_000))),
    )

    assert problem(nul)["code"] == "unstorable_value"
    assert problem(nul)["errors"][0]["field"] == "text"
    assert problem(huge)["code"] == "validation_failed"
    assert problem(huge)["errors"][0]["field"] == "text"
    assert problem(unknown)["errors"][0]["field"] == "bbc"
    assert problem(header_break)["errors"][0]["field"] == "subject"
    assert problem(wrong_type)["errors"][0]["field"] == "draft_id"
    assert problem(unknown_tool)["code"] == "unknown_tool"
    assert problem(unknown_tool)["errors"] == [{"field": "name", "message": "no tool of that name"}]
    # The SDK's JSON parser refuses an unpaired surrogate escape before any tool runs.
    assert surrogate.status_code == 400
    assert surrogate.json()["error"]["code"] == -32700
    assert oversized.status_code == 413
    assert draft_count() == 0


def test_concurrent_calls_with_one_key_make_one_draft(mcp_url, token_a, mailbox_a):
    arguments = {**draft_body(mailbox_a), "idempotency_key": "raced"}
    outcomes: list = []

    async def one():
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token_a}"}, timeout=30) as http,
            streamable_http_client(mcp_url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            outcomes.append(await client.call_tool("create_draft", arguments))

    async def race():
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(one)

    run_async(race)

    created = {o.structured_content["id"] for o in outcomes if not o.is_error}
    refused = {o.structured_content["code"] for o in outcomes if o.is_error}
    assert len(created) == 1
    assert refused <= {"idempotency_key_in_flight"}
    assert draft_count() == 1


def test_a_key_used_on_the_json_api_is_not_replayed_to_a_tool(mcp_url, api, token_a, mailbox_a):
    posted = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="shared-key")

    [tool] = results(
        mcp_url,
        token_a,
        ("create_draft", {**draft_body(mailbox_a), "idempotency_key": "shared-key"}),
    )

    assert posted.status_code == 201
    assert problem(tool)["code"] == "idempotency_key_reused"
    assert draft_count() == 1


def test_a_suspended_tenants_token_is_refused(mcp_url, token_a, tenant_a, mailbox_a):
    type(tenant_a).objects.filter(pk=tenant_a.pk).update(status="suspended")

    # Calls as a client that never lists would make them (listing is refused too: below).
    mailboxes, created = (
        rpc(mcp_url, token_a, tool_call(name, json.dumps(arguments))).json()["result"]
        for name, arguments in (("list_mailboxes", {}), ("create_draft", draft_body(mailbox_a)))
    )

    assert mailboxes["isError"] is True
    assert mailboxes["structuredContent"]["code"] == "tenant_suspended"
    assert created["structuredContent"]["status"] == 403
    assert draft_count() == 0


def test_a_host_outside_allowed_hosts_is_refused(mcp_url, token_a):
    rebound = rpc(mcp_url, token_a, INITIALIZE, Host="attacker.example")
    foreign_origin = rpc(mcp_url, token_a, INITIALIZE, Origin="https://attacker.example")

    assert rebound.status_code == 421
    assert foreign_origin.status_code == 403


def test_a_get_opens_no_stream_it_is_405(mcp_url, make_token, tenant_b):
    """A GET opened the transport's SSE stream and held it for as long as the client liked (a
    ping every 15 s), for a token of any scope and uncounted by the rate limit: each one a
    connection and a file descriptor of the worker that every tenant's agents share, with no
    end."""
    reader = make_token(tenant_b, scopes=["drafts:read"])
    headers = {"Authorization": f"Bearer {reader}", "Accept": "text/event-stream"}

    with httpx.stream("GET", mcp_url, headers=headers, timeout=10) as answer:
        # The old answer was an endless stream, its headers sent with the first ping 15 s in:
        # the timeout fails it.
        assert answer.status_code == 405
        assert answer.headers["Allow"] == "POST"
        assert json.loads(answer.read())["error"]["code"] == -32600


def test_deeply_nested_arguments_are_refused_before_any_tool_runs(mcp_url, token_a, mailbox_a):
    nested = json.dumps(draft_body(mailbox_a, provenance="@@")).replace(
        '"@@"', '{"a":' * 5_000 + "1" + "}" * 5_000
    )

    answer = rpc(mcp_url, token_a, tool_call("create_draft", nested))

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32700
    assert draft_count() == 0


@pytest.mark.parametrize(
    "request_id", [{"a": 1}, [1], 1.5, True, None], ids=["object", "list", "float", "true", "null"]
)
def test_a_request_id_of_no_json_rpc_type_is_an_invalid_request_and_runs_nothing(
    mcp_url, token_a, mailbox_a, request_id
):
    """The SDK took such a request for a notification: 202, no body, the client left waiting."""
    body = json.loads(tool_call("create_draft", json.dumps(draft_body(mailbox_a))))
    body["id"] = request_id

    answer = rpc(mcp_url, token_a, json.dumps(body).encode())

    assert answer.status_code == 400
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "A request's id must be a string or an integer."},
    }
    assert draft_count() == 0


def test_arguments_naming_a_key_twice_are_an_invalid_request_and_run_nothing(
    mcp_url, token_a, mailbox_a
):
    """The SDK kept the last of the two; the JSON API refuses them (422 duplicate_key)."""
    arguments = json.dumps(draft_body(mailbox_a, text="first")).replace(
        '"text": "first"', '"text": "first", "text": "second"'
    )

    answer = rpc(mcp_url, token_a, tool_call("create_draft", arguments))

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32600
    assert "params.arguments.text" in answer.json()["error"]["message"]
    assert draft_count() == 0


def test_a_batch_is_an_invalid_request_that_repeats_nothing_back(mcp_url, token_a):
    secret = "customer-private-words"
    batch = json.dumps([json.loads(INITIALIZE), {"jsonrpc": "2.0", "id": 2, "note": secret}])

    answer = rpc(mcp_url, token_a, batch.encode())

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32600
    assert secret not in answer.text


@pytest.mark.parametrize("depth", [130, 190])
def test_a_key_given_twice_is_refused_however_deep_the_rest_of_the_request_nests(
    mcp_url, token_a, mailbox_a, depth
):
    """The guard read the body only 128 levels deep and left a deeper one to the SDK, whose
    parser goes to about 200 and keeps the last of two equal keys: a `_meta` nested 130 levels
    took `"text": "first", "text": "second"` past the guard, and the draft held "second"."""
    arguments = json.dumps(draft_body(mailbox_a, text="first")).replace(
        '"text": "first"', '"text": "first", "text": "second"'
    )
    envelope = tool_call("create_draft", arguments).decode()
    meta = '{"a":' * depth + "1" + "}" * depth
    body = envelope.removesuffix("}}") + f', "_meta": {meta}}}}}'

    answer = rpc(mcp_url, token_a, body.encode())

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32600
    assert "params.arguments.text" in answer.json()["error"]["message"]
    assert draft_count() == 0


SECRET = "customer-private-words"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"params": SECRET}, "A request's params must be an object."),
        ({"params": [SECRET]}, "A request's params must be an object."),
        ({"jsonrpc": SECRET}, 'A JSON-RPC message must have "jsonrpc": "2.0".'),
        ({"method": [SECRET]}, "A request's method must be a string."),
        ({"method": None, "note": SECRET}, "A JSON-RPC request must name its method."),
    ],
    ids=["params-string", "params-array", "jsonrpc", "method-array", "no-method"],
)
def test_a_malformed_envelope_is_an_invalid_request_that_repeats_nothing_back(
    mcp_url, token_a, mailbox_a, change, message
):
    """The SDK answered -32602 (invalid params) with pydantic's dump of four failed models, each
    quoting the request's values back (`input_value='customer-private-words'`)."""
    envelope = json.loads(tool_call("create_draft", json.dumps(draft_body(mailbox_a))))
    envelope.update(change)
    if envelope["method"] is None:
        del envelope["method"]

    answer = rpc(mcp_url, token_a, json.dumps(envelope).encode())

    assert answer.status_code == 400
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": message},
    }
    assert SECRET not in answer.text
    assert draft_count() == 0


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_a_body_not_sent_as_json_is_a_json_rpc_415_and_runs_nothing(
    mcp_url, token_a, mailbox_a, content_type
):
    """The SDK's Host and Origin check answered it first: a bare text/plain 400, "Invalid
    Content-Type header", that no JSON-RPC client can read."""
    body = tool_call("create_draft", json.dumps(draft_body(mailbox_a)))

    answer = rpc(mcp_url, token_a, body, **{"Content-Type": content_type})

    assert answer.status_code == 415
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Unsupported Media Type: send the request as Content-Type: application/json.",
        },
    }
    assert draft_count() == 0


def test_the_write_tools_refuse_outsiders_and_a_key_is_never_replayed_to_another_token(
    mcp_url, make_token, tenant_a, mailbox_a, mailbox_a2, mailbox_b, token_b
):
    """Every write tool checks the token's scope and tenant (not only create_draft), and a key is
    the tenant's: another token of the tenant (here restricted to another mailbox) that names a
    used key is refused, never handed the first token's draft; another tenant's is its own."""
    owner = make_token(tenant_a, mailboxes=[mailbox_a])
    sibling = make_token(tenant_a, mailboxes=[mailbox_a2])
    reader = make_token(tenant_a, scopes=("drafts:read",))
    keyed = {**draft_body(mailbox_a), "idempotency_key": "order-7"}
    [created] = results(mcp_url, owner, ("create_draft", keyed))
    draft_id = created.structured_content["id"]
    revision = {"draft_id": draft_id, "to": ["customer@example.com"], "text": "v2"}
    recipients = {"broadcast_id": 1, "recipients": [{"address": "c@example.com"}]}

    read_only = results(
        mcp_url,
        reader,
        ("revise_draft", revision),
        ("withdraw_draft", {"draft_id": draft_id}),
        ("replace_broadcast_recipients", recipients),
    )
    foreign_revise, foreign_withdraw, missing, foreign_key = results(
        mcp_url,
        token_b,
        ("revise_draft", revision),
        ("withdraw_draft", {"draft_id": draft_id}),
        ("withdraw_draft", {"draft_id": draft_id + 1000}),
        ("create_draft", {**draft_body(mailbox_b), "idempotency_key": "order-7"}),
    )
    [sibling_key] = results(
        mcp_url, sibling, ("create_draft", {**draft_body(mailbox_a2), "idempotency_key": "order-7"})
    )

    assert {problem(r)["code"] for r in read_only} == {"insufficient_scope"}
    assert problem(foreign_revise) == problem(foreign_withdraw) == problem(missing)
    assert problem(missing)["status"] == 404
    assert foreign_key.is_error is False
    assert foreign_key.structured_content["mailbox"]["id"] == mailbox_b.pk
    assert problem(sibling_key)["code"] == "idempotency_key_reused"
    assert "current_version" not in sibling_key.structured_content
    assert Draft.objects.get(pk=draft_id).status == "pending"
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 1
    assert draft_count() == 2


def test_a_suspended_tenants_token_is_listed_no_tool_and_told_why(mcp_url, token_a, tenant_a):
    """tools/list offered every tool to a suspended tenant's token (each call then refused): a
    model picks tools from that list. Nothing is listed; the error says why, with the API's
    problem document."""
    type(tenant_a).objects.filter(pk=tenant_a.pk).update(status="suspended")
    listing = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()

    answer = rpc(mcp_url, token_a, listing).json()

    assert "result" not in answer
    assert answer["error"]["data"]["code"] == "tenant_suspended"
    assert "suspended" in answer["error"]["message"]
    with pytest.raises(ExceptionGroup) as refused:
        session(mcp_url, token_a)
    assert refused.group_contains(MCPError, match="Tenant suspended")


def test_tools_list_and_call_with_a_revoked_or_an_expired_token_are_401(
    mcp_url, make_token, tenant_a
):
    revoked, expired = make_token(tenant_a), make_token(tenant_a)
    token_revoke(
        tenant=tenant_a,
        token_id=AgentToken.objects.get(prefix=revoked.split("_")[1]).pk,
        actor=None,
    )
    AgentToken.objects.filter(prefix=expired.split("_")[1]).update(expires_at="2020-01-01T00:00Z")
    listing = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()

    answers = [
        rpc(mcp_url, token, body)
        for token in (revoked, expired)
        for body in (listing, tool_call("list_mailboxes", "{}"))
    ]

    assert [a.status_code for a in answers] == [401] * 4
    assert all('error="invalid_token"' in a.headers["WWW-Authenticate"] for a in answers)
    assert not any("tools" in a.text for a in answers)
