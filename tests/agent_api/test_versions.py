"""POST /drafts/{id}/versions: an optional base_version refuses a revision of a draft that moved
on (409), and bodies are stored and hashed with LF line endings whatever the client sent."""

from __future__ import annotations

import pytest

from intents import services
from intents.hashing import content_hash
from intents.models import DraftVersion, IntentEvent, SendIntent
from intents.services.undo import intent_undo
from tenants.models import Tenant
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db

REVISION = {"to": ["customer@example.com"], "subject": "Re: order", "text": "Arrives tomorrow."}


def _person_edits(draft_id, member_of, tenant):
    person = member_of(tenant, "approver").user
    services.draft_add_version(
        tenant=tenant,
        draft_id=draft_id,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Re: order",
        text="A person's careful edit.",
        html="",
        actor_user=person,
        base_version=1,
    )


def test_a_revision_based_on_an_older_version_is_409_and_writes_nothing(
    api, token_a, mailbox_a, member_of, tenant_a
):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="b1").json()["id"]
    _person_edits(draft_id, member_of, tenant_a)

    response = api.post(
        f"/drafts/{draft_id}/versions", {**REVISION, "base_version": 1}, token=token_a
    )

    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "version_conflict"
    assert "version 2" in response.json()["detail"]
    assert response.json()["errors"][0]["field"] == "base_version"
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 2
    assert DraftVersion.objects.get(draft_id=draft_id, number=2).text == "A person's careful edit."


def test_a_revision_based_on_the_current_version_is_added(api, token_a, mailbox_a):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="b2").json()["id"]

    response = api.post(
        f"/drafts/{draft_id}/versions", {**REVISION, "base_version": 1}, token=token_a
    )

    assert response.status_code == 201
    assert response.json()["current_version"]["number"] == 2
    event = IntentEvent.objects.get(draft_id=draft_id, action="draft.version_added")
    assert event.data["base_version"] == 1


def test_a_base_version_that_never_existed_is_422_naming_the_field(api, token_a, mailbox_a):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="b3").json()["id"]

    ahead = api.post(f"/drafts/{draft_id}/versions", {**REVISION, "base_version": 5}, token=token_a)
    text = api.post(
        f"/drafts/{draft_id}/versions", {**REVISION, "base_version": "1"}, token=token_a
    )

    assert ahead.status_code == 422
    assert ahead.json()["errors"][0]["field"] == "base_version"
    assert text.status_code == 422
    assert text.json()["errors"][0]["field"] == "base_version"
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 1


def test_crlf_and_lone_cr_in_bodies_are_stored_and_hashed_as_lf(api, token_a, mailbox_a):
    created = api.post(
        "/drafts",
        draft_body(mailbox_a, text="Hello,\r\n\r\nIt shipped.\rBye", html="<p>a</p>\r\n<p>b</p>"),
        token=token_a,
        key="crlf-1",
    ).json()
    revised = api.post(
        f"/drafts/{created['id']}/versions",
        {**REVISION, "text": "Line one\r\nLine two\r", "html": "<p>x</p>\r<p>y</p>"},
        token=token_a,
    ).json()

    first, second = created["current_version"], revised["current_version"]
    assert (first["text"], first["html"]) == ("Hello,\n\nIt shipped.\nBye", "<p>a</p>\n<p>b</p>")
    assert (second["text"], second["html"]) == ("Line one\nLine two\n", "<p>x</p>\n<p>y</p>")
    assert first["content_hash"] == content_hash(
        mailbox_id=mailbox_a.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Re: Where is my order?",
        text="Hello,\n\nIt shipped.\nBye",
        html="<p>a</p>\n<p>b</p>",
        in_reply_to="",
    )


def test_the_schema_documents_base_version_as_optional(client):
    schema = client.get("/api/v1/openapi.json").json()
    operation = schema["paths"]["/api/v1/drafts/{draft_id}/versions"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]

    assert "base_version" in body["properties"]
    assert "base_version" not in body.get("required", [])
    assert "409" in operation["responses"]
    assert "409" in body["properties"]["base_version"]["description"]


def _approved(draft_id, member_of, tenant):
    person = member_of(tenant, "approver").user
    first = DraftVersion.objects.get(draft_id=draft_id, number=1)
    intent = services.draft_approve(
        tenant=tenant,
        draft_id=draft_id,
        version=1,
        content_hash=first.content_hash,
        actor=person,
    )
    return intent, person


def test_a_revision_of_the_version_whose_approval_was_undone_says_so(
    api, token_a, mailbox_a, member_of, tenant_a
):
    """The reviewer approved version 1 and undid it: the draft is pending on version 2, a copy
    of version 1. The agent's revision of version 1 was told "Someone saved version 2 while you
    were editing version 1": nobody saved anything, and the agent looked for an edit to merge.
    Now it is told that the approval was undone and version 2 is the same text to revise."""
    Tenant.objects.filter(pk=tenant_a.pk).update(send_hold_seconds=60)
    tenant_a.refresh_from_db()
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="u1").json()["id"]
    intent, person = _approved(draft_id, member_of, tenant_a)
    intent_undo(tenant=tenant_a, intent_id=intent.pk, actor=person)

    response = api.post(
        f"/drafts/{draft_id}/versions", {**REVISION, "base_version": 1}, token=token_a
    )

    assert response.status_code == 409
    problem = response.json()
    assert (problem["code"], problem["errors"][0]["field"]) == ("version_conflict", "base_version")
    assert problem["detail"] == (
        "The approval of version 1 was undone: version 2 is the same text, back in review. "
        "Base your revision on version 2."
    )
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 2


def test_a_revision_of_the_version_a_person_put_back_in_review_says_so(
    api, token_a, mailbox_a, member_of, tenant_a
):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="u2").json()["id"]
    intent, person = _approved(draft_id, member_of, tenant_a)
    SendIntent.objects.filter(pk=intent.pk).update(state="failed")
    services.draft_reopen(tenant=tenant_a, draft_id=draft_id, actor=person, reason="resend")

    response = api.post(
        f"/drafts/{draft_id}/versions", {**REVISION, "base_version": 1}, token=token_a
    )

    assert response.status_code == 409
    assert response.json()["detail"] == (
        "Version 1 was approved and its send did not go out; a person put it back in review as "
        "version 2, the same text. Base your revision on version 2."
    )
