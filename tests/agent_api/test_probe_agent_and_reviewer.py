"""The agent and a reviewer acting on the same draft: an outside probe of what the agent is told
when a person's decision about the draft's send lands around its revision."""

from __future__ import annotations

import pytest
from django.db import transaction

from intents import services
from intents.models import DraftVersion, SendIntent
from tests.agent_api.conftest import draft_body
from tests.intents.helpers import blocked_on_a_lock, drain_sends, in_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quick(settings):
    settings.SEND_BACKOFF_BASE_SECONDS = 0.01
    settings.SEND_BACKOFF_CAP_SECONDS = 0.05
    settings.AGENTMAIL_READ_TIMEOUT = 1.0
    settings.SEND_LEASE_SECONDS = 5
    return settings


def _sent(sandbox, draft_id) -> list:
    keys = SendIntent.objects.filter(draft_id=draft_id).values_list("idempotency_key", flat=True)
    return [s for key in keys for s in sandbox.ledger(idempotency_key=key)]


REVISION = {
    "to": ["customer@example.com"],
    "subject": "Re: Where is my order?",
    "text": "A better answer.",
    "base_version": 2,
}


def _reopened_after_a_lost_answer(api, token, tenant, mailbox, member_of, sandbox):
    """The agent's draft approved and sent (the sandbox holds it), the worker's answer lost
    (needs attention), the draft reopened as version 2; returns its id and the reviewer's mark
    of the earlier send as sent, with the provider's id for it."""
    reviewer = member_of(tenant, "approver").user
    created = api.post("/drafts", draft_body(mailbox), token=token, key="d-1")
    draft_id = created.json()["id"]
    first = DraftVersion.objects.get(draft_id=draft_id, number=1)
    earlier = services.draft_approve(
        tenant=tenant, draft_id=draft_id, version=1, content_hash=first.content_hash, actor=reviewer
    )
    drain_sends()
    [went_out] = sandbox.ledger(idempotency_key=earlier.idempotency_key)
    # Data setup: the worker's answer was lost and the safe window passed without proof.
    SendIntent.objects.filter(pk=earlier.pk).update(state="needs_attention", provider_message_id="")
    services.draft_reopen(tenant=tenant, draft_id=draft_id, actor=reviewer, reason="resend")

    def mark_sent():
        return services.intent_resolve_accepted(
            tenant=tenant,
            intent_id=earlier.pk,
            actor=reviewer,
            provider_message_id=went_out["message_id"],
            evidence="The customer quoted our reply.",
        )

    return draft_id, mark_sent


def test_a_revision_of_a_draft_whose_reopened_send_was_proven_sent_is_refused(
    api, make_token, tenant_a, mailbox_a, member_of, sandbox, quick
):
    """The send's answer was lost (needs attention), a reviewer put the draft back in review and
    then found the customer's copy and marked the send sent. The reply went out: no approval of
    the draft can send anything again. The agent's revision was still taken (201, a new version
    in the queue) and the agent was told it was under review; its text could never go out. Now
    the mark closes the draft (approved again on the version that went out): the revision and a
    withdrawal are refused, and nothing more is sent."""
    token = make_token(tenant_a)
    draft_id, mark_sent = _reopened_after_a_lost_answer(
        api, token, tenant_a, mailbox_a, member_of, sandbox
    )
    mark_sent()
    revised = api.post(
        f"/drafts/{draft_id}/versions",
        REVISION,
        token=token,
        key="r-1",
    )
    drain_sends()

    assert revised.status_code == 409, revised.content
    # The mark closed the reopened draft: approved again on the version that went out.
    assert revised.json()["code"] == "not_pending"
    assert "already approved: version 1 was approved at" in revised.json()["detail"]
    document = api.get(f"/drafts/{draft_id}", token=token).json()
    assert (document["status"], document["current_version"]["number"]) == ("approved", 1)
    assert document["intent"]["state"] == "accepted"
    withdrawn = api.post(f"/drafts/{draft_id}/withdraw", {}, token=token, key="w-1")
    assert (withdrawn.status_code, withdrawn.json()["code"]) == (409, "not_pending")
    assert len(_sent(sandbox, draft_id)) == 1


def test_a_revision_waiting_while_the_send_is_marked_sent_is_refused(
    api, make_token, tenant_a, mailbox_a, member_of, sandbox, quick
):
    """The same, at the same moment: the reviewer's mark holds the draft while the agent's
    revision arrives; the revision waits for it, then sees the send went out."""
    token = make_token(tenant_a)
    draft_id, mark_sent = _reopened_after_a_lost_answer(
        api, token, tenant_a, mailbox_a, member_of, sandbox
    )
    outcome: list = []

    with transaction.atomic():
        mark_sent()
        agent = in_thread(
            lambda: api.post(f"/drafts/{draft_id}/versions", REVISION, token=token), outcome
        )
        assert blocked_on_a_lock(), "the revision never waited for the draft's lock"
    agent.join(30)
    drain_sends()

    [revised] = outcome
    assert revised.status_code == 409, revised.content
    assert revised.json()["code"] == "not_pending"
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 2
    assert len(_sent(sandbox, draft_id)) == 1


def test_an_agent_revision_arriving_during_an_approval_is_refused_and_its_replay_too(
    api, make_token, tenant_a, mailbox_a, member_of, sandbox, quick
):
    """The reviewer's approval of version 1 holds the draft when the agent's revision arrives:
    the revision waits, is told the draft was approved (which version, when), and a retry with
    the same key is decided again (a refusal is not stored), never applied; one send, of the
    approved text."""
    reviewer = member_of(tenant_a, "approver").user
    token = make_token(tenant_a)
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token, key="d-2").json()["id"]
    first = DraftVersion.objects.get(draft_id=draft_id, number=1)
    body = {**REVISION, "base_version": 1}
    outcome: list = []

    with transaction.atomic():
        intent = services.draft_approve(
            tenant=tenant_a,
            draft_id=draft_id,
            version=1,
            content_hash=first.content_hash,
            actor=reviewer,
        )
        agent = in_thread(
            lambda: api.post(f"/drafts/{draft_id}/versions", body, token=token, key="r-2"),
            outcome,
        )
        assert blocked_on_a_lock(), "the revision never waited for the draft's lock"
    agent.join(30)
    retried = api.post(f"/drafts/{draft_id}/versions", body, token=token, key="r-2")
    drain_sends()

    [revised] = outcome
    assert (revised.status_code, retried.status_code) == (409, 409)
    assert revised.json()["code"] == retried.json()["code"] == "not_pending"
    assert "version 1 was approved at" in revised.json()["detail"]
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 1
    [sent] = _sent(sandbox, draft_id)
    assert sent["idempotency_key"] == intent.idempotency_key
    assert sent["text"] == first.text
