"""Internal notes stay internal: the agent API's draft never carries them (issue 16)."""

import pytest

from intents import services
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db


def test_the_agent_api_draft_carries_no_note(api, token_a, mailbox_a, member_of):
    created = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="k-note").json()
    reviewer = member_of(mailbox_a.tenant, "approver").user
    services.draft_note_add(
        tenant=mailbox_a.tenant, draft_id=created["id"], author=reviewer, text="Secret-ish remark"
    )
    response = api.get(f"/drafts/{created['id']}", token=token_a)
    assert response.status_code == 200
    assert "Secret-ish remark" not in response.content.decode()
    assert "note" not in response.json()
