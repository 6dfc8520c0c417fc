"""Every agent API route and every MCP tool, walked as an outsider: tenant A's token naming tenant
B's drafts, broadcasts and mailboxes by id (or address), and tokens lacking the scope each one
needs. The routes come from the NinjaAPI and the tools from ``mcp_tools.TOOLS``, so a route or
tool added later without a line here fails the sweep instead of going unwalked.

Another tenant's object gets exactly the answer a missing one gets, and nothing of tenant B
changes; a token without the scope is 403 ``insufficient_scope`` and writes nothing.
"""

from __future__ import annotations

import json

import pytest

from agent_api.api import api as ninja_api
from agent_api.mcp_tools import TOOLS, call_tool
from intents.models import Broadcast, Draft, DraftVersion, IntentEvent
from tenants.models import AuditEvent
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db

MISSING = 2**62


def broadcast_body(mailbox) -> dict:
    return {
        "mailbox": mailbox.address,
        "name": "Outage",
        "subject": "Your order is delayed",
        "text": "Hello {{ name }}",
        "recipients": [{"address": "c1@example.com", "variables": {"name": "Ana"}}],
    }


REVISION = {"to": ["customer@example.com"], "subject": "Re: Where is my order?", "text": "v2"}
RECIPIENTS = {"recipients": [{"address": "c2@example.com", "variables": {"name": "Ben"}}]}

# operation id -> (scope, the object its path names or None, the body it is sent with).
ROUTES = {
    "draft_create": ("drafts:write", None, "draft"),
    "draft_list": ("drafts:read", None, None),
    "draft_get": ("drafts:read", "draft", None),
    "draft_add_version": ("drafts:write", "draft", REVISION),
    "draft_withdraw": ("drafts:write", "draft", None),
    "mailbox_list": ("drafts:read", None, None),
    "analytics_get": ("drafts:read", None, None),
    "broadcast_create": ("drafts:write", None, "broadcast"),
    "broadcast_list": ("drafts:read", None, None),
    "broadcast_replace_recipients": ("drafts:write", "broadcast", RECIPIENTS),
    "broadcast_get": ("drafts:read", "broadcast", None),
}

# tool -> the argument naming another tenant's object, and the rest of its arguments.
TOOL_TARGETS = {
    "list_mailboxes": (None, {}),
    "create_draft": ("mailbox", "draft"),
    "revise_draft": ("draft_id", REVISION),
    "withdraw_draft": ("draft_id", {}),
    "get_draft": ("draft_id", {}),
    "list_drafts": (None, {}),
    "create_broadcast": ("mailbox", "broadcast"),
    "replace_broadcast_recipients": ("broadcast_id", RECIPIENTS),
    "get_broadcast": ("broadcast_id", {}),
    "list_broadcasts": (None, {}),
}


def operations():
    for _prefix, router in ninja_api._routers:
        for path, view in router.path_operations.items():
            for operation in view.operations:
                [method] = operation.methods
                yield operation.operation_id, method, path, operation


@pytest.fixture
def world(api, make_token, tenant_a, tenant_b, mailbox_a, mailbox_b):
    """Tenant B's pending draft and broadcast, made through the API by B's own token; A's tokens."""
    token_b = make_token(tenant_b)
    draft = api.post("/drafts", draft_body(mailbox_b), token=token_b, key="b-draft").json()
    broadcast = api.post(
        "/broadcasts", broadcast_body(mailbox_b), token=token_b, key="b-broadcast"
    ).json()
    return {
        "ids": {"draft": draft["id"], "broadcast": broadcast["id"]},
        "mailbox_a": mailbox_a,
        "mailbox_b": mailbox_b,
        "full": make_token(tenant_a),
        "drafts:read": make_token(tenant_a, scopes=("drafts:read",)),
        "drafts:write": make_token(tenant_a, scopes=("drafts:write",)),
    }


def tenant_b_snapshot(world) -> tuple:
    draft = Draft.objects.get(pk=world["ids"]["draft"])
    broadcast = Broadcast.objects.get(pk=world["ids"]["broadcast"])
    return (
        draft.status,
        draft.current_version,
        DraftVersion.objects.filter(draft=draft).count(),
        broadcast.state,
        broadcast.content_hash,
        broadcast.recipient_count,
    )


def send(api, method, path, *, token, body, key):
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
    return api.client.generic(
        method,
        f"/api/v1{path}",
        data=json.dumps(body) if body is not None else "",
        content_type="application/json",
        headers=headers,
    )


def body_for(spec, mailbox):
    if spec == "draft":
        return draft_body(mailbox)
    if spec == "broadcast":
        return broadcast_body(mailbox)
    return spec


def test_the_sweep_knows_every_route_and_every_tool():
    assert {op_id for op_id, *_ in operations()} == set(ROUTES)
    assert set(TOOLS) == set(TOOL_TARGETS)


def test_every_route_answers_another_tenants_ids_exactly_as_missing_ones(api, world):
    before = tenant_b_snapshot(world)
    answers = {}
    for op_id, method, path, _operation in operations():
        _scope, target, spec = ROUTES[op_id]
        if target is None:
            continue
        body = body_for(spec, world["mailbox_a"])
        seen = []
        for n, object_id in enumerate((world["ids"][target], MISSING)):
            concrete = path.replace(f"{{{target}_id}}", str(object_id))
            response = send(
                api, method, concrete, token=world["full"], body=body, key=f"{op_id}-{n}"
            )
            seen.append((response.status_code, response.json()))
        answers[op_id] = seen

    assert set(answers) == {op_id for op_id, (_s, target, _b) in ROUTES.items() if target}
    for op_id, (foreign, missing) in answers.items():
        assert foreign == missing, op_id
        assert foreign[0] == 404, op_id
    assert tenant_b_snapshot(world) == before


def test_creating_in_another_tenants_mailbox_is_a_missing_mailbox(api, world):
    mailbox_b = world["mailbox_b"]
    answers = []
    for op_id, method, path, _operation in operations():
        _scope, _target, spec = ROUTES[op_id]
        if spec not in ("draft", "broadcast"):
            continue
        for n, ref in enumerate((mailbox_b.pk, mailbox_b.address, MISSING)):
            body = {**body_for(spec, mailbox_b), "mailbox": ref}
            response = send(api, method, path, token=world["full"], body=body, key=f"{op_id}-{n}")
            answers.append((op_id, response.status_code, response.json()["code"]))

    assert {(status, code) for _op, status, code in answers} == {(404, "mailbox_not_found")}
    assert Draft.objects.filter(tenant=world["mailbox_a"].tenant).count() == 0
    assert Broadcast.objects.filter(tenant=world["mailbox_a"].tenant).count() == 0


def test_lists_show_nothing_of_another_tenant(api, world):
    drafts = api.get("/drafts", token=world["full"]).json()["items"]
    broadcasts = api.get("/broadcasts", token=world["full"]).json()["items"]
    mailboxes = api.get("/mailboxes", token=world["full"]).json()["items"]

    assert drafts == broadcasts == []
    assert [m["id"] for m in mailboxes] == [world["mailbox_a"].pk]


def _own_draft_and_broadcast(api, world) -> dict[str, int]:
    """A draft and a broadcast of the full token's own tenant: the ids its routes are walked with."""
    draft = api.post("/drafts", draft_body(world["mailbox_a"]), token=world["full"], key="own-d")
    broadcast = api.post(
        "/broadcasts", broadcast_body(world["mailbox_a"]), token=world["full"], key="own-b"
    )
    return {"draft": draft.json()["id"], "broadcast": broadcast.json()["id"]}


def _written(own) -> tuple:
    """What a refused request must leave as it was: the rows it could write, and the content of
    the token's own broadcast."""
    return (
        Draft.objects.count(),
        DraftVersion.objects.count(),
        IntentEvent.objects.count(),
        AuditEvent.objects.count(),
        Broadcast.objects.count(),
        Broadcast.objects.get(pk=own["broadcast"]).content_hash,
    )


def test_every_route_refuses_a_token_without_its_scope(api, world):
    own = _own_draft_and_broadcast(api, world)
    before = (Draft.objects.count(), DraftVersion.objects.count(), Broadcast.objects.count())
    refused = {}
    for op_id, method, path, operation in operations():
        scope, target, spec = ROUTES[op_id]
        assert [auth.scope for auth in operation.auth_callbacks] == [scope], op_id
        lacking = "drafts:read" if scope == "drafts:write" else "drafts:write"
        concrete = path.replace(f"{{{target}_id}}", str(own[target])) if target else path
        body = body_for(spec, world["mailbox_a"])
        response = send(
            api, method, concrete, token=world[lacking], body=body, key=f"scope-{op_id}"
        )
        refused[op_id] = (response.status_code, response.json()["code"])

    assert set(refused.values()) == {(403, "insufficient_scope")}, refused
    assert (
        Draft.objects.count(),
        DraftVersion.objects.count(),
        Broadcast.objects.count(),
    ) == before


def test_every_tool_answers_another_tenants_ids_exactly_as_missing_ones(world):
    before = tenant_b_snapshot(world)
    answers = {}
    for name, (argument, rest) in TOOL_TARGETS.items():
        if argument is None:
            continue
        arguments = body_for(rest, world["mailbox_a"])
        if argument == "mailbox":
            foreign = [world["mailbox_b"].pk, world["mailbox_b"].address]
        else:
            foreign = [world["ids"][argument.removesuffix("_id")]]
        seen = [
            call_tool(
                raw_token=world["full"], name=name, arguments={**arguments, argument: object_id}
            )
            for object_id in [*foreign, MISSING]
        ]
        answers[name] = [(a.is_error, a.document) for a in seen]

    assert set(answers) == {name for name, (argument, _r) in TOOL_TARGETS.items() if argument}
    for name, seen in answers.items():
        assert all(answer == seen[-1] for answer in seen), name
        assert seen[-1][1]["status"] == 404, name
    assert tenant_b_snapshot(world) == before
    assert Draft.objects.filter(tenant=world["mailbox_a"].tenant).count() == 0


def test_every_tool_refuses_a_token_without_its_scope(world):
    refused = {}
    for name, spec in TOOLS.items():
        lacking = "drafts:read" if spec.scope == "drafts:write" else "drafts:write"
        argument, rest = TOOL_TARGETS[name]
        arguments = body_for(rest, world["mailbox_a"])
        if argument is not None and argument != "mailbox":
            arguments = {**arguments, argument: 1}
        answer = call_tool(raw_token=world[lacking], name=name, arguments=arguments)
        refused[name] = (answer.is_error, answer.document["code"])

    assert set(refused.values()) == {(True, "insufficient_scope")}, refused
    assert Draft.objects.filter(tenant=world["mailbox_a"].tenant).count() == 0


def test_every_route_refuses_a_query_parameter_it_does_not_take_and_writes_nothing(api, world):
    """Only the three list routes and analytics refused one: `POST /drafts?dry_run=true` (or
    `?validate_only=1`) posted a real draft into the review queue, `GET /mailboxes?status=active`
    answered every mailbox, as if the parameter had been read. The README promises 422 naming it
    on every route."""
    own = _own_draft_and_broadcast(api, world)
    before = _written(own)
    refused = {}
    for op_id, method, path, _operation in operations():
        _scope, target, spec = ROUTES[op_id]
        concrete = path.replace(f"{{{target}_id}}", str(own[target])) if target else path
        body = body_for(spec, world["mailbox_a"])
        response = send(
            api, method, f"{concrete}?dry_run=true", token=world["full"], body=body, key=op_id
        )
        problem = response.json()
        fields = [error["field"] for error in problem.get("errors", [])]
        refused[op_id] = (response.status_code, problem.get("code"), fields)

    assert refused == {op_id: (422, "validation_failed", ["dry_run"]) for op_id in ROUTES}
    assert _written(own) == before


@pytest.mark.parametrize(
    "path",
    [
        "/drafts?limit=1&limit=2",
        "/broadcasts?limit=1&limit=2",
        "/analytics?since=2026-01-01&since=2026-02-01",
    ],
)
def test_a_query_parameter_given_twice_is_refused_naming_it(api, world, path):
    """Of "?limit=1&limit=2" the route read one value, silently: the agent could not know
    which it got."""
    response = api.get(path, token=world["full"])
    problem = response.json()
    name = path.split("?")[1].split("=")[0]
    assert response.status_code == 422, problem
    assert problem["code"] == "validation_failed"
    assert [error["field"] for error in problem["errors"]] == [name]
    assert "more than once" in problem["detail"]
