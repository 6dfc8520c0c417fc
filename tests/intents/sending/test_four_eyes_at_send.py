"""The tenant's "second approver on edit" rule, turned on while a send its author approved alone
is still queued (inside the undo window, or waiting for a retry after a 429): the pre-call check
applies it as it applies a right taken away or a narrower recipient policy, and the send is
blocked with zero provider calls. On real PostgreSQL, the sandbox over HTTP."""

from __future__ import annotations

import time

import pytest
from django.db.models.functions import Now

from intents import errors, sending, services
from intents.models import IntentEvent, SendIntent
from intents.sending.fanout import broadcast_run
from intents.services.broadcasts import broadcast_approve, broadcast_create
from tenants.models import Tenant
from tenants.policies import tenant_update_policies
from tenants.tokens import token_create
from tests.factories import approve_new_draft

pytestmark = pytest.mark.django_db(transaction=True)


def calls(sandbox, intent):
    return sandbox.requests(idempotency_key=intent.idempotency_key)


def sends(sandbox, intent):
    return sandbox.ledger(idempotency_key=intent.idempotency_key)


def due_now(intent):
    SendIntent.objects.filter(pk=intent.pk).update(hold_until=Now(), next_attempt_at=Now())


def step(intent):
    return sending.run_once(worker="w", intent_id=intent.pk)


def step_until_settled(intent, timeout=15.0):
    """Ticks until the queued send is claimed: after a 429 the key's bucket stays empty until
    Retry-After has passed (``throttle_feedback``)."""
    deadline = time.monotonic() + timeout
    while SendIntent.objects.get(pk=intent.pk).state == "queued":
        assert time.monotonic() < deadline, "the send was not claimed again in time"
        due_now(intent)
        step(intent)
        time.sleep(0.1)


def four_eyes_on(live, admin):
    tenant = Tenant.objects.get(pk=live.tenant.pk)
    tenant_update_policies(
        tenant=tenant,
        review_deadline_hours=tenant.review_deadline_hours,
        second_approver_on_edit=True,
        retention_days=tenant.retention_days,
        actor=admin,
    )


def blocked_event(intent):
    return IntentEvent.objects.get(intent=intent, action="intent.blocked")


def test_turned_on_inside_the_undo_window_blocks_the_authors_own_approval(live, member_of):
    admin = member_of(live.tenant, "admin").user
    Tenant.objects.filter(pk=live.tenant.pk).update(send_hold_seconds=60)
    intent = live.approved()  # written and approved by live.approver alone
    assert intent.hold_until is not None

    four_eyes_on(live, admin)
    due_now(intent)
    step(intent)

    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == ("blocked", "second_approver_required")
    assert "another person" in blocked_event(intent).reason
    assert calls(live.sandbox, intent) == []


def test_turned_on_while_a_429_retry_waits_blocks_the_retry(live, member_of):
    admin = member_of(live.tenant, "admin").user
    intent = live.approved()
    live.sandbox.fault("sends", "429", retry_after=1)
    step(intent)
    intent.refresh_from_db()
    assert intent.state == "queued"

    four_eyes_on(live, admin)
    step_until_settled(intent)

    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == ("blocked", "second_approver_required")
    assert len(calls(live.sandbox, intent)) == 1  # the 429 only
    assert sends(live.sandbox, intent) == []


def agents_draft(live, token, text="Agent's text."):
    return services.draft_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        to=["customer@example.com"],
        subject="Your refund",
        text=text,
        agent_token=token,
    )


def approve(live, draft, number, actor):
    return services.draft_approve(
        tenant=live.tenant,
        draft_id=draft.pk,
        version=number,
        content_hash=draft.versions.get(number=number).content_hash,
        actor=actor,
    )


def test_an_edit_the_approver_made_before_the_agents_last_version_still_counts(live, member_of):
    """The approval-time rule's second half: Ana wrote version 2, the agent re-posted version 3,
    Ana approved version 3 alone while the rule was off."""
    admin = member_of(live.tenant, "admin").user
    token, _ = token_create(tenant=live.tenant, name="agent", scopes=["drafts:write"], actor=None)
    draft = agents_draft(live, token)
    for number, (text, author) in enumerate(
        [("Ana's text.", {"actor_user": live.approver}), ("Ana's text.", {"agent_token": token})],
        start=2,
    ):
        services.draft_add_version(
            tenant=live.tenant,
            draft_id=draft.pk,
            to=["customer@example.com"],
            cc=[],
            bcc=[],
            subject="Your refund",
            text=text,
            html="",
            base_version=number - 1,
            **author,
        )
    intent = approve(live, draft, 3, live.approver)

    four_eyes_on(live, admin)
    step(intent)

    intent.refresh_from_db()
    assert (intent.state, intent.last_error_code) == ("blocked", "second_approver_required")
    assert calls(live.sandbox, intent) == []


def test_a_colleagues_approval_and_an_agents_version_still_go_out(live, member_of):
    admin = member_of(live.tenant, "admin").user
    colleague = member_of(live.tenant, "approver").user
    token, _ = token_create(tenant=live.tenant, name="agent", scopes=["drafts:write"], actor=None)
    by_colleague = approve_new_draft(live.tenant, live.mailbox, colleague, actor_user=live.approver)
    agents = approve(live, agents_draft(live, token), 1, live.approver)

    four_eyes_on(live, admin)
    step(by_colleague)
    step(agents)

    states = [SendIntent.objects.get(pk=i.pk).state for i in (by_colleague, agents)]
    assert states == ["accepted", "accepted"]
    assert [len(sends(live.sandbox, i)) for i in (by_colleague, agents)] == [1, 1]


def test_turned_on_after_a_broadcasts_author_approved_it_alone_blocks_its_sends(live, member_of):
    admin = member_of(live.tenant, "admin").user
    broadcast = broadcast_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        subject="Order {{ order }} is delayed",
        text="Your order {{ order }} is late.",
        html="",
        recipients=[{"address": f"c{i}@example.com", "variables": {"order": i}} for i in range(2)],
        actor_user=live.approver,
    )
    broadcast_approve(
        tenant=live.tenant,
        broadcast_id=broadcast.pk,
        content_hash=broadcast.content_hash,
        actor=live.approver,
    )
    broadcast_run(broadcast.pk)

    four_eyes_on(live, admin)
    intents = list(SendIntent.objects.filter(broadcast=broadcast))
    for intent in intents:
        step_until_settled(intent)  # a broadcast's own rate spaces its sends

    assert {
        (i.state, i.last_error_code) for i in SendIntent.objects.filter(broadcast=broadcast)
    } == {("blocked", "second_approver_required")}
    assert [calls(live.sandbox, i) for i in intents] == [[], []]


def four_eyes_off(live, admin):
    tenant = Tenant.objects.get(pk=live.tenant.pk)
    tenant_update_policies(
        tenant=tenant,
        review_deadline_hours=tenant.review_deadline_hours,
        second_approver_on_edit=False,
        retention_days=tenant.retention_days,
        actor=admin,
    )


def edited_then_revised_by_the_agent(live):
    """Ana wrote version 2, the agent re-posted it as version 3: Ana's edit is in version 3."""
    token, _ = token_create(tenant=live.tenant, name="agent", scopes=["drafts:write"], actor=None)
    draft = agents_draft(live, token)
    for number, author in enumerate(
        [{"actor_user": live.approver}, {"agent_token": token}], start=2
    ):
        services.draft_add_version(
            tenant=live.tenant,
            draft_id=draft.pk,
            to=["customer@example.com"],
            cc=[],
            bcc=[],
            subject="Your refund",
            text="Ana's text.",
            html="",
            base_version=number - 1,
            **author,
        )
    return draft


def test_a_send_the_rule_blocked_does_not_vouch_for_its_approvers_edit_after_a_reopen(
    live, member_of
):
    """Found by an outside probe: Ana approved version 3 alone while the rule was off, the rule
    blocked that send, Ana re-approved the draft's reopened copy (version 4, the agent's) and the
    approval was allowed: the blocked send of her own approval counted as the approval that
    covers her edit. Only another person's approval vouches for an edit."""
    admin = member_of(live.tenant, "admin").user
    draft = edited_then_revised_by_the_agent(live)
    first = approve(live, draft, 3, live.approver)
    four_eyes_on(live, admin)
    step(first)
    assert SendIntent.objects.get(pk=first.pk).state == "blocked"
    services.draft_reopen(
        tenant=live.tenant, draft_id=draft.pk, actor=live.approver, reason="Blocked, try again."
    )

    with pytest.raises(errors.SecondApproverRequired):
        approve(live, draft, 4, live.approver)

    assert SendIntent.objects.filter(draft=draft).count() == 1


def test_the_pre_call_check_asks_the_same_of_a_re_approval_given_while_the_rule_was_off(
    live, member_of
):
    """The same re-approval given while the rule was off again, then the rule turned back on
    before the send: blocked at the check, zero provider calls."""
    admin = member_of(live.tenant, "admin").user
    draft = edited_then_revised_by_the_agent(live)
    first = approve(live, draft, 3, live.approver)
    four_eyes_on(live, admin)
    step(first)
    four_eyes_off(live, admin)
    services.draft_reopen(
        tenant=live.tenant, draft_id=draft.pk, actor=live.approver, reason="Blocked, try again."
    )
    second = approve(live, draft, 4, live.approver)

    four_eyes_on(live, admin)
    step(second)

    second.refresh_from_db()
    assert (second.state, second.last_error_code) == ("blocked", "second_approver_required")
    assert calls(live.sandbox, second) == []


def test_a_colleagues_approval_of_an_edit_still_vouches_for_it_once_reopened_and_edited_again(
    live, member_of
):
    """Found by probe 6 (two reviewers): Ana edited the agent's text (version 2), Ben approved
    it, the send failed and Ben reopened it: version 3 is the copy of Ana's text that Ben
    approved, kept under Ana's name so that she cannot approve it alone. Ben then corrected a
    word (version 4) and asked Ana to approve his correction: she was refused, "You wrote a
    version of this draft since it was last approved", for the copy, which she did not write and
    Ben had approved; in a team of two nobody could ever send it. The pre-call check must
    agree: the send goes out."""
    from tests.intents.helpers import set_state

    admin = member_of(live.tenant, "admin").user
    four_eyes_on(live, admin)
    ana, ben = live.approver, member_of(live.tenant, "approver").user
    token, _ = token_create(tenant=live.tenant, name="agent", scopes=["drafts:write"], actor=None)
    draft = agents_draft(live, token)
    edit = {"to": ["customer@example.com"], "cc": [], "bcc": [], "subject": "Your refund"}
    services.draft_add_version(
        tenant=live.tenant, draft_id=draft.pk, text="Ana's text.", html="", actor_user=ana, **edit
    )
    first = approve(live, draft, 2, ben)
    set_state(first, "failed")
    services.draft_reopen(tenant=live.tenant, draft_id=draft.pk, actor=ben, reason="Try again.")
    services.draft_add_version(
        tenant=live.tenant, draft_id=draft.pk, text="Ana's text!", html="", actor_user=ben, **edit
    )

    second = approve(live, draft, 4, ana)
    step(second)

    second.refresh_from_db()
    assert second.state == "accepted"
    assert [s["text"] for s in sends(live.sandbox, second)] == ["Ana's text!"]


def test_an_approval_taken_back_still_vouches_for_no_copy_of_the_edit(live, member_of):
    """The same, with Ben's approval undone instead of failed: the copy of Ana's text was
    approved by nobody, and Ana may not approve Ben's correction of it alone."""
    admin = member_of(live.tenant, "admin").user
    four_eyes_on(live, admin)
    Tenant.objects.filter(pk=live.tenant.pk).update(send_hold_seconds=60)
    live.tenant.refresh_from_db()
    ana, ben = live.approver, member_of(live.tenant, "approver").user
    token, _ = token_create(tenant=live.tenant, name="agent", scopes=["drafts:write"], actor=None)
    draft = agents_draft(live, token)
    edit = {"to": ["customer@example.com"], "cc": [], "bcc": [], "subject": "Your refund"}
    services.draft_add_version(
        tenant=live.tenant, draft_id=draft.pk, text="Ana's text.", html="", actor_user=ana, **edit
    )
    first = approve(live, draft, 2, ben)
    services.intent_undo(tenant=live.tenant, intent_id=first.pk, actor=ben)
    services.draft_add_version(
        tenant=live.tenant, draft_id=draft.pk, text="Ana's text!", html="", actor_user=ben, **edit
    )

    with pytest.raises(errors.SecondApproverRequired):
        approve(live, draft, 4, ana)
