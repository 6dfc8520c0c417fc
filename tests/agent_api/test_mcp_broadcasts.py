"""The MCP broadcast tools as an agent meets them (the server `make run` starts, on loopback,
driven by the official SDK's client): the same operations, schemas and rights as the JSON routes
(tests/agent_api/test_broadcasts.py), unknown fields refused, create idempotent."""

from __future__ import annotations

import pytest

from intents.models import Broadcast
from tests.agent_api.test_broadcasts import body
from tests.agent_api.test_mcp import problem, results, session

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_broadcast_tools_publish_the_apis_schemas(mcp_url, token_a):
    listed, _ = session(mcp_url, token_a)

    tools = {tool.name: tool for tool in listed.tools}
    create = tools["create_broadcast"].input_schema
    assert create["additionalProperties"] is False
    assert set(create["required"]) == {"mailbox", "subject"}
    assert create["properties"]["recipients_csv"]["anyOf"][0]["maxLength"] == 5_000_000
    assert tools["replace_broadcast_recipients"].input_schema["required"] == ["broadcast_id"]
    assert tools["get_broadcast"].annotations.read_only_hint is True
    assert tools["list_broadcasts"].input_schema["additionalProperties"] is False
    assert not {name for name in tools if "approve" in name or "pause" in name}


def test_create_is_idempotent_and_reads_match_the_json_api(mcp_url, api, token_a, mailbox_a):
    arguments = {**body(mailbox_a), "idempotency_key": "outage-1"}

    first, again, derived, derived_again = results(
        mcp_url,
        token_a,
        ("create_broadcast", arguments),
        ("create_broadcast", arguments),
        ("create_broadcast", body(mailbox_a, name="Second")),
        ("create_broadcast", body(mailbox_a, name="Second")),
    )
    created = first.structured_content
    got, listed = results(
        mcp_url,
        token_a,
        ("get_broadcast", {"broadcast_id": created["id"]}),
        ("list_broadcasts", {"limit": 1}),
    )

    assert (created["state"], created["recipient_count"]) == ("pending_review", 3)
    assert again.structured_content == created
    assert again.meta == {"countersign/idempotent-replayed": True}
    assert derived_again.structured_content == derived.structured_content
    assert Broadcast.objects.count() == 2
    assert got.structured_content == created
    assert got.structured_content == api.get(f"/broadcasts/{created['id']}", token=token_a).json()
    page = listed.structured_content
    assert [b["id"] for b in page["items"]] == [derived.structured_content["id"]]
    [rest] = results(mcp_url, token_a, ("list_broadcasts", {"cursor": page["next_cursor"]}))
    assert [b["id"] for b in rest.structured_content["items"]] == [created["id"]]
    assert rest.structured_content["next_cursor"] is None


def test_bad_rows_unknown_fields_and_a_reused_key_are_refused_and_save_nothing(
    mcp_url,
    token_a,
    mailbox_a,
):
    rows = [
        {"address": "nope", "variables": {"name": "b", "order": 2}},
        {"address": "c2@example.com", "variables": {"order": 3}},
    ]
    bad_rows, unknown, first, reused, bad_cursor = results(
        mcp_url,
        token_a,
        ("create_broadcast", body(mailbox_a, recipients=rows)),
        ("create_broadcast", {**body(mailbox_a), "bcc": ["x@example.com"]}),
        ("create_broadcast", {**body(mailbox_a), "idempotency_key": "k-1"}),
        ("create_broadcast", {**body(mailbox_a, name="Other"), "idempotency_key": "k-1"}),
        ("list_broadcasts", {"cursor": "abc"}),
    )

    assert problem(bad_rows)["code"] == "recipients_invalid"
    assert [(e["field"], e["row"]) for e in problem(bad_rows)["errors"]] == [
        ("recipients[0].address", 1),
        ("recipients[1].variables.name", 2),
    ]
    assert problem(unknown)["status"] == 422
    assert problem(unknown)["errors"][0]["field"] == "bcc"
    assert problem(reused)["code"] == "idempotency_key_reused"
    assert problem(bad_cursor)["code"] == "cursor_invalid"
    assert list(Broadcast.objects.values_list("pk", flat=True)) == [first.structured_content["id"]]


def test_replace_recipients_while_pending_then_refused_once_decided(
    mcp_url,
    token_a,
    mailbox_a,
    member_of,
    tenant_a,
):
    from intents.services.broadcasts import broadcast_approve

    [created] = results(mcp_url, token_a, ("create_broadcast", body(mailbox_a)))
    broadcast_id = created.structured_content["id"]
    two = body(mailbox_a)["recipients"][:2]
    [replaced] = results(
        mcp_url,
        token_a,
        ("replace_broadcast_recipients", {"broadcast_id": broadcast_id, "recipients": two}),
    )
    assert replaced.structured_content["recipient_count"] == 2
    [bad_csv] = results(
        mcp_url,
        token_a,
        (
            "replace_broadcast_recipients",
            {"broadcast_id": broadcast_id, "recipients_csv": "address,name,order\nnope,N,1\n"},
        ),
    )
    assert [(e["field"], e["row"]) for e in problem(bad_csv)["errors"]] == [
        ("recipients_csv.address", 1)
    ]
    broadcast = Broadcast.objects.get()
    broadcast_approve(
        tenant=tenant_a,
        broadcast_id=broadcast_id,
        content_hash=broadcast.content_hash,
        actor=member_of(tenant_a, "approver").user,
    )

    [late] = results(
        mcp_url,
        token_a,
        ("replace_broadcast_recipients", {"broadcast_id": broadcast_id, "recipients": two[:1]}),
    )

    assert problem(late)["status"] == 409
    assert Broadcast.objects.get().recipient_count == 2


def test_another_tenant_a_restricted_token_and_a_reader_are_refused(
    mcp_url,
    make_token,
    tenant_a,
    mailbox_a,
    mailbox_a2,
    token_b,
):
    whole = make_token(tenant_a)
    restricted = make_token(tenant_a, mailboxes=[mailbox_a])
    reader = make_token(tenant_a, scopes=("drafts:read",))
    [other_box] = results(mcp_url, whole, ("create_broadcast", body(mailbox_a2)))
    other_id = other_box.structured_content["id"]
    [own] = results(mcp_url, restricted, ("create_broadcast", body(mailbox_a)))
    own_id = own.structured_content["id"]
    recipients = {"recipients": body(mailbox_a)["recipients"][:1]}

    foreign_get, foreign_list, foreign_replace, foreign_create = results(
        mcp_url,
        token_b,
        ("get_broadcast", {"broadcast_id": own_id}),
        ("list_broadcasts", {}),
        ("replace_broadcast_recipients", {"broadcast_id": own_id, **recipients}),
        ("create_broadcast", body(mailbox_a)),
    )
    box_get, box_list, missing = results(
        mcp_url,
        restricted,
        ("get_broadcast", {"broadcast_id": other_id}),
        ("list_broadcasts", {}),
        ("get_broadcast", {"broadcast_id": other_id + 1000}),
    )
    read, write = results(
        mcp_url,
        reader,
        ("get_broadcast", {"broadcast_id": own_id}),
        ("create_broadcast", body(mailbox_a)),
    )

    assert problem(foreign_get) == problem(box_get) == problem(missing)
    assert problem(foreign_get)["status"] == 404
    assert foreign_list.structured_content["items"] == []
    assert problem(foreign_replace)["status"] == 404
    assert problem(foreign_create)["code"] == "mailbox_not_found"
    assert [b["id"] for b in box_list.structured_content["items"]] == [own_id]
    assert read.structured_content["id"] == own_id
    assert problem(write)["code"] == "insufficient_scope"
    assert Broadcast.objects.count() == 2
    assert Broadcast.objects.get(pk=own_id).recipient_count == 3
