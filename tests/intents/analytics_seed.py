"""A review history with known counts, written through the real services, for the reviewer
analytics tests (selector, console page, CSV, agent API).

What the history holds in tenant A (minutes: from creation to decision):

| draft | token | model | outcome | edit size | minutes |
|---|---|---|---|---|---|
| a1 | support-bot | gpt-x | approved as the agent wrote it | | 10 |
| a2 | support-bot | gpt-x | approved, the agent's own second version | | 20 |
| e1 | support-bot | gpt-x | approved after a person inserted "whole " | 6 | 30 |
| r1 | support-bot | gpt-x | rejected "Wrong tone." | | 40 |
| r2 | support-bot | gpt-x | rejected "  wrong   TONE " | | 50 |
| e2 | support-bot | (none) | approved after " today" in the subject and one cc | 7 | 60 |
| x1 | support-bot | (none) | expired (the sweep) | | |
| w1 | support-bot | (none) | withdrawn by the agent | | |
| a3 | billing-bot | claude-y | approved as written | | 70 |
| e3 | billing-bot | claude-y | approved after " Thanks!" | 8 | 80 |
| r3 | billing-bot | claude-y | rejected with a spreadsheet formula | | 90 |
| r4 | billing-bot | claude-y | rejected "Wrong tone!" | | 100 |

Not counted: a draft a person wrote and approved, a support-bot rejection decided 40 days ago,
and tenant B's drafts (one approved, one rejected "Wrong tone").

Decision times come from the database clock (``decided_at`` is PostgreSQL's ``now()``, which
time-machine cannot move), so after each decision the seed sets the creation time to the decision
time minus the minutes above: the durations are then exact. The expiry runs through the real
sweep after the deadline is moved into the past, for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import F

from intents import services
from intents.models import Draft
from tenants.models import AgentToken
from tenants.tokens import token_create
from tests.factories import MembershipFactory, make_local_mailbox

FORMULA = '=HYPERLINK("http://evil.example","x")'
TEXT = "We refunded your order."


@dataclass
class Seeded:
    support: AgentToken
    billing: AgentToken
    support_key: str
    billing_key: str
    admin: object
    approver: object
    drafts: dict


def _token(tenant, name, admin) -> tuple[AgentToken, str]:
    return token_create(
        tenant=tenant, name=name, scopes=("drafts:write", "drafts:read"), actor=admin
    )


def agent_draft(tenant, mailbox, token, model=None):
    return services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["customer@example.com"],
        subject="Your refund",
        text=TEXT,
        provenance={"model": model, "prompt": "p1"} if model else {},
        agent_token=token,
    )


def approve(tenant, draft, approver, minutes):
    draft.refresh_from_db()
    version = draft.versions.get(number=draft.current_version)
    services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=version.number,
        content_hash=version.content_hash,
        actor=approver,
    )
    _took(draft, minutes)


def reject(tenant, draft, approver, reason, minutes):
    services.draft_reject(tenant=tenant, draft_id=draft.pk, reason=reason, actor=approver)
    _took(draft, minutes)


def _took(draft, minutes):
    Draft.objects.filter(pk=draft.pk).update(
        created_at=F("decided_at") - timedelta(minutes=minutes)
    )


def person_edit(tenant, draft, approver, *, subject="Your refund", text=TEXT, cc=()):
    draft.refresh_from_db()
    services.draft_add_version(
        tenant=tenant,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=list(cc),
        bcc=[],
        subject=subject,
        text=text,
        html="",
        actor_user=approver,
        base_version=draft.current_version,
    )


def seed_history(tenant, other_tenant) -> Seeded:
    admin = MembershipFactory(tenant=tenant, role="admin").user
    approver = MembershipFactory(tenant=tenant, role="approver").user
    mailbox = make_local_mailbox(tenant)
    support, support_key = _token(tenant, "support-bot", admin)
    billing, billing_key = _token(tenant, "billing-bot", admin)
    d: dict = {}

    d["a1"] = agent_draft(tenant, mailbox, support, "gpt-x")
    approve(tenant, d["a1"], approver, 10)
    d["a2"] = agent_draft(tenant, mailbox, support, "gpt-x")
    services.draft_add_version(
        tenant=tenant,
        draft_id=d["a2"].pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="We refunded your order today.",
        html="",
        agent_token=support,
    )
    approve(tenant, d["a2"], approver, 20)
    d["e1"] = agent_draft(tenant, mailbox, support, "gpt-x")
    person_edit(tenant, d["e1"], approver, text="We refunded your whole order.")
    approve(tenant, d["e1"], approver, 30)
    d["r1"] = agent_draft(tenant, mailbox, support, "gpt-x")
    reject(tenant, d["r1"], approver, "Wrong tone.", 40)
    d["r2"] = agent_draft(tenant, mailbox, support, "gpt-x")
    reject(tenant, d["r2"], approver, "  wrong   TONE ", 50)
    d["e2"] = agent_draft(tenant, mailbox, support)
    person_edit(tenant, d["e2"], approver, subject="Your refund today", cc=["lead@example.com"])
    approve(tenant, d["e2"], approver, 60)
    d["x1"] = agent_draft(tenant, mailbox, support)
    Draft.objects.filter(pk=d["x1"].pk).update(review_deadline=F("created_at"))
    assert services.draft_expire_due() == 1
    d["w1"] = agent_draft(tenant, mailbox, support)
    services.draft_withdraw(tenant=tenant, draft_id=d["w1"].pk, agent_token=support)

    d["a3"] = agent_draft(tenant, mailbox, billing, "claude-y")
    approve(tenant, d["a3"], approver, 70)
    d["e3"] = agent_draft(tenant, mailbox, billing, "claude-y")
    person_edit(tenant, d["e3"], approver, text=TEXT + " Thanks!")
    approve(tenant, d["e3"], approver, 80)
    d["r3"] = agent_draft(tenant, mailbox, billing, "claude-y")
    reject(tenant, d["r3"], approver, FORMULA, 90)
    d["r4"] = agent_draft(tenant, mailbox, billing, "claude-y")
    reject(tenant, d["r4"], approver, "Wrong tone!", 100)

    _not_counted(tenant, other_tenant, mailbox, support, approver)
    return Seeded(
        support=support,
        billing=billing,
        support_key=support_key,
        billing_key=billing_key,
        admin=admin,
        approver=approver,
        drafts=d,
    )


def _not_counted(tenant, other_tenant, mailbox, support, approver) -> None:
    by_person = services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["customer@example.com"],
        subject="Hand written",
        text="Written by a person.",
        actor_user=approver,
    )
    approve(tenant, by_person, approver, 5)
    old = agent_draft(tenant, mailbox, support, "gpt-x")
    reject(tenant, old, approver, "Wrong tone.", 5)
    Draft.objects.filter(pk=old.pk).update(
        decided_at=F("decided_at") - timedelta(days=40),
        created_at=F("created_at") - timedelta(days=40),
    )
    other_admin = MembershipFactory(tenant=other_tenant, role="admin").user
    other_approver = MembershipFactory(tenant=other_tenant, role="approver").user
    other_mailbox = make_local_mailbox(other_tenant)
    other_token, _ = _token(other_tenant, "support-bot", other_admin)
    for rejecting in (False, True):
        draft = agent_draft(other_tenant, other_mailbox, other_token, "gpt-x")
        if rejecting:
            reject(other_tenant, draft, other_approver, "Wrong tone", 1)
        else:
            approve(other_tenant, draft, other_approver, 1)
