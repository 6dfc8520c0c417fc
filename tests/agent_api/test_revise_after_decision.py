"""An agent's revision that lost the race to a person's decision: the 409 names the draft's state
precisely (which version was decided, and when), not only that it is no longer pending."""

from __future__ import annotations

import pytest

from intents import services
from intents.models import Draft, DraftVersion
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db


def test_a_revision_after_an_approval_is_409_naming_the_version_and_time_approved(
    api, token_a, mailbox_a, tenant_a, member_of
):
    draft_id = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="race").json()["id"]
    read = api.get(f"/drafts/{draft_id}", token=token_a).json()
    ana = member_of(tenant_a, "approver", user__full_name="Ana Lima").user
    version = DraftVersion.objects.get(draft_id=draft_id)
    services.draft_approve(
        tenant=tenant_a,
        draft_id=draft_id,
        version=1,
        content_hash=version.content_hash,
        actor=ana,
    )

    revised = api.post(
        f"/drafts/{draft_id}/versions",
        {"to": ["customer@example.com"], "subject": "Re: order", "text": "Better words."},
        token=token_a,
    )

    decided_at = Draft.objects.get(pk=draft_id).decided_at
    problem = revised.json()
    assert read["status"] == "pending"
    assert (revised.status_code, problem["code"]) == (409, "not_pending")
    assert problem["detail"] == (
        "This draft is already approved: version 1 was approved at "
        f"{decided_at.strftime('%Y-%m-%dT%H:%M:%S')}Z."
    )
    assert "Ana" not in revised.content.decode()
    assert DraftVersion.objects.filter(draft_id=draft_id).count() == 1
