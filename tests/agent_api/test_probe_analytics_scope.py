"""GET /api/v1/analytics within the token's mailbox restriction.

Found by an outside probe (an agent token walked over every route with a narrowed restriction):
the figures counted the token's drafts in every mailbox, so a token that lost a mailbox was told
how many of its drafts there were rejected or withdrawn, and the reviewers' reasons, where
``GET /drafts/{id}`` answers each of those drafts 404 like a missing one.
"""

from __future__ import annotations

import pytest

from intents import services
from tenants.models import AgentToken
from tenants.tokens import token_authenticate
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db


def narrow(raw_token: str, *, mailboxes) -> None:
    """What an operator's change of the token's mailboxes leaves."""
    token = AgentToken.objects.get(pk=token_authenticate(raw_token).pk)
    token.all_mailboxes = False
    token.save(update_fields=["all_mailboxes"])
    token.mailboxes.set(mailboxes)


def test_analytics_count_nothing_of_a_mailbox_the_token_no_longer_reaches(
    api, make_token, member_of, tenant_a, mailbox_a, mailbox_a2
):
    agent = make_token(tenant_a, mailboxes=(mailbox_a, mailbox_a2))
    approver = member_of(tenant_a, "approver").user
    kept = api.post("/drafts", draft_body(mailbox_a), token=agent, key="kept").json()["id"]
    lost = api.post("/drafts", draft_body(mailbox_a2), token=agent, key="lost").json()["id"]
    withdrawn = api.post("/drafts", draft_body(mailbox_a2), token=agent, key="gone").json()["id"]
    services.draft_reject(tenant=tenant_a, draft_id=kept, reason="Wrong tone", actor=approver)
    services.draft_reject(
        tenant=tenant_a, draft_id=lost, reason="Refund for order 1042 refused", actor=approver
    )
    assert api.post(f"/drafts/{withdrawn}/withdraw", token=agent).status_code == 200
    narrow(agent, mailboxes=[mailbox_a])

    figures = api.get("/analytics", token=agent).json()["figures"]

    assert api.get(f"/drafts/{lost}", token=agent).status_code == 404
    assert (figures["rejected"], figures["withdrawn"]) == (1, 0)
    assert figures["top_reasons"] == [{"reason": "wrong tone", "count": 1}]
