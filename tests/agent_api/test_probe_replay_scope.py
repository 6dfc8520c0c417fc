"""A stored Idempotency-Key answer is replayed only to a token that may still do what it asks.

The answer is the draft (or broadcast) document as it stood: its text, recipients and mailbox. A
token restricted since to other mailboxes replayed a withdraw's answer for a draft in a mailbox it
had lost, a read past its scope. A replay is now refused exactly as the live request would be,
on the JSON API and the MCP tools alike; a narrowed scope (drafts:write taken away) already was.
"""

from __future__ import annotations

import json

import pytest

from agent_api.mcp_tools import call_tool
from intents.models import Draft
from tenants.models import AgentToken
from tenants.tokens import token_authenticate
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db

REVISION = {"to": ["customer@example.com"], "subject": "v2", "text": "The second text."}


def broadcast_body(mailbox) -> dict:
    return {
        "mailbox": mailbox.address,
        "name": "Outage",
        "subject": "Delayed",
        "text": "Hello {{ name }}",
        "recipients": [{"address": "c0@example.com", "variables": {"name": "N0"}}],
    }


def narrow(raw_token: str, *, mailboxes=None, scopes=None) -> None:
    """What an operator's change to the token leaves: other mailboxes, or fewer scopes."""
    token = AgentToken.objects.get(pk=token_authenticate(raw_token).pk)
    if mailboxes is not None:
        token.all_mailboxes = False
        token.save(update_fields=["all_mailboxes"])
        token.mailboxes.set(mailboxes)
    if scopes is not None:
        token.scopes = list(scopes)
        token.save(update_fields=["scopes"])


def put(api, path: str, body: dict, *, token: str, key: str):
    return api.client.generic(
        "PUT",
        f"/api/v1{path}",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
    )


@pytest.fixture
def agent(make_token, tenant_a, mailbox_a, mailbox_a2):
    return make_token(tenant_a, mailboxes=(mailbox_a, mailbox_a2))


def test_a_withdraw_replayed_after_the_mailbox_was_taken_away_is_the_live_404(
    api, agent, mailbox_a, mailbox_a2
):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=agent, key="d-1").json()["id"]
    first = api.post(f"/drafts/{draft_id}/withdraw", token=agent, key="w-1")
    narrow(agent, mailboxes=[mailbox_a2])

    replayed = api.post(f"/drafts/{draft_id}/withdraw", token=agent, key="w-1")
    live = api.post(f"/drafts/{draft_id}/withdraw", token=agent, key="w-2")

    assert first.status_code == 200
    assert replayed.status_code == 404
    assert "Idempotent-Replayed" not in replayed
    assert b"shipped" not in replayed.content
    assert replayed.json() == live.json()


def test_a_create_and_a_revision_replayed_after_the_mailbox_was_taken_away_are_refused(
    api, agent, mailbox_a, mailbox_a2
):
    created = api.post("/drafts", draft_body(mailbox_a), token=agent, key="d-1")
    draft_id = created.json()["id"]
    revised = api.post(f"/drafts/{draft_id}/versions", REVISION, token=agent, key="v-1")
    narrow(agent, mailboxes=[mailbox_a2])

    create_again = api.post("/drafts", draft_body(mailbox_a), token=agent, key="d-1")
    revise_again = api.post(f"/drafts/{draft_id}/versions", REVISION, token=agent, key="v-1")

    assert (created.status_code, revised.status_code) == (201, 201)
    assert create_again.status_code == 404
    assert create_again.json()["code"] == "mailbox_not_found"
    assert revise_again.status_code == 404
    assert revise_again.json()["code"] == "not_found"
    assert Draft.objects.count() == 1


def test_broadcast_replays_after_the_mailbox_was_taken_away_are_refused(
    api, agent, mailbox_a, mailbox_a2
):
    created = api.post("/broadcasts", broadcast_body(mailbox_a), token=agent, key="b-1")
    recipients = {"recipients": [{"address": "c1@example.com", "variables": {"name": "N1"}}]}
    path = f"/broadcasts/{created.json()['id']}/recipients"
    replaced = put(api, path, recipients, token=agent, key="r-1")
    narrow(agent, mailboxes=[mailbox_a2])

    create_again = api.post("/broadcasts", broadcast_body(mailbox_a), token=agent, key="b-1")
    replace_again = put(api, path, recipients, token=agent, key="r-1")

    assert (created.status_code, replaced.status_code) == (201, 200)
    assert create_again.status_code == 404
    assert replace_again.status_code == 404
    assert "Idempotent-Replayed" not in create_again
    assert "Idempotent-Replayed" not in replace_again


def test_a_replay_for_a_mailbox_still_in_scope_is_the_stored_answer(
    api, agent, mailbox_a, mailbox_a2
):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=agent, key="d-1").json()["id"]
    first = api.post(f"/drafts/{draft_id}/withdraw", token=agent, key="w-1")
    narrow(agent, mailboxes=[mailbox_a])

    replayed = api.post(f"/drafts/{draft_id}/withdraw", token=agent, key="w-1")

    assert replayed.status_code == 200
    assert replayed["Idempotent-Replayed"] == "true"
    assert replayed.content == first.content


def test_a_replay_after_the_write_scope_was_taken_away_is_the_live_403(api, agent, mailbox_a):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=agent, key="d-1").json()["id"]
    api.post(f"/drafts/{draft_id}/withdraw", token=agent, key="w-1")
    narrow(agent, scopes=["drafts:read"])

    replayed = api.post(f"/drafts/{draft_id}/withdraw", token=agent, key="w-1")

    assert replayed.status_code == 403
    assert replayed.json()["code"] == "insufficient_scope"


def test_mcp_replays_after_the_mailbox_was_taken_away_are_the_live_refusals(
    agent, mailbox_a, mailbox_a2
):
    def call(tool: str, **arguments):
        return call_tool(raw_token=agent, name=tool, arguments=arguments)

    created = call("create_draft", **draft_body(mailbox_a), idempotency_key="d-1")
    draft_id = created.document["id"]
    revised = call("revise_draft", draft_id=draft_id, **REVISION, idempotency_key="v-1")
    withdrawn = call("withdraw_draft", draft_id=draft_id, idempotency_key="w-1")
    broadcast = call("create_broadcast", **broadcast_body(mailbox_a), idempotency_key="b-1")
    narrow(agent, mailboxes=[mailbox_a2])

    again = [
        call("create_draft", **draft_body(mailbox_a), idempotency_key="d-1"),
        call("revise_draft", draft_id=draft_id, **REVISION, idempotency_key="v-1"),
        call("withdraw_draft", draft_id=draft_id, idempotency_key="w-1"),
        call("create_broadcast", **broadcast_body(mailbox_a), idempotency_key="b-1"),
    ]
    live = call("get_draft", draft_id=draft_id)

    assert not any(a.is_error for a in (created, revised, withdrawn, broadcast))
    assert [(a.is_error, a.replayed, a.document.get("status")) for a in again] == [
        (True, False, 404)
    ] * 4
    assert again[0].document["code"] == "mailbox_not_found"
    assert again[2].document == live.document
