"""Every transition has a race: threads on separate connections, exactly one wins."""

import threading

import pytest
from django.db import connections, transaction

from intents import errors, sending, services
from intents.models import Broadcast, Draft, DraftVersion, IntentEvent, SendIntent
from intents.sending.fanout import broadcast_run
from intents.services.broadcast_controls import broadcast_cancel, broadcast_pause, broadcast_resume
from intents.services.broadcasts import broadcast_approve, broadcast_create
from tenants.models import AgentToken
from tenants.tokens import token_create, token_revoke
from tests.intents.helpers import (
    blocked_on_a_lock,
    drain_sends,
    in_thread,
    nudge_queued,
    run_concurrently,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_fifty_concurrent_approvals_make_one_intent(tenant_a, new_draft, approver):
    draft = new_draft()
    version = draft.versions.get()

    def approve(_):
        return services.draft_approve(
            tenant=tenant_a,
            draft_id=draft.pk,
            version=1,
            content_hash=version.content_hash,
            actor=approver,
        )

    results = run_concurrently(approve, 50)
    winners = [r for r in results if isinstance(r, SendIntent)]
    losers = [r for r in results if isinstance(r, errors.NotPending)]
    assert len(winners) == 1
    assert len(losers) == 49
    assert SendIntent.objects.filter(draft=draft).count() == 1
    assert IntentEvent.objects.filter(draft=draft, action="draft.approved").count() == 1


def test_replies_to_one_message_approved_at_once_from_lists_send_one_answer(
    tenant_a, new_draft, approver, local_mailbox
):
    """Each approval from a list refuses a reply to a message another approved draft answers;
    without serialising them, eight at once each saw the others pending and all went out."""
    from datetime import timedelta

    from django.utils import timezone

    from webhooks.models import InboundMessage

    InboundMessage.objects.create(
        tenant=tenant_a,
        mailbox=local_mailbox,
        thread_id="thr-kenji",
        message_id="<kenji-77@example.com>",
        sender="kenji@example.com",
        subject="Order 77",
        received_at=timezone.now() - timedelta(minutes=5),
    )
    drafts = [
        new_draft(
            to=["kenji@example.com"],
            subject=None,
            text=f"Answer {n}.",
            in_reply_to="<kenji-77@example.com>",
        )
        for n in range(8)
    ]

    def approve(i):
        draft = drafts[i]
        return services.draft_approve(
            tenant=tenant_a,
            draft_id=draft.pk,
            version=1,
            content_hash=draft.versions.get().content_hash,
            actor=approver,
            unseen=True,
        )

    results = run_concurrently(approve, len(drafts))

    assert len([r for r in results if isinstance(r, SendIntent)]) == 1
    assert all(
        isinstance(r, errors.AnsweredByAnotherDraft)
        for r in results
        if r is not None and not isinstance(r, SendIntent)
    )
    assert SendIntent.objects.filter(draft__in=drafts).count() == 1


def test_approve_races_reject_one_wins(tenant_a, new_draft, approver, member_of):
    draft = new_draft()
    version = draft.versions.get()
    other = member_of(tenant_a, "approver").user

    def act(i):
        if i % 2:
            return services.draft_reject(
                tenant=tenant_a, draft_id=draft.pk, reason="no", actor=other
            )
        return services.draft_approve(
            tenant=tenant_a,
            draft_id=draft.pk,
            version=1,
            content_hash=version.content_hash,
            actor=approver,
        )

    results = run_concurrently(act, 10)
    successes = [r for r in results if not isinstance(r, Exception)]
    assert len(successes) == 1
    assert all(isinstance(r, errors.NotPending) for r in results if isinstance(r, Exception))
    draft.refresh_from_db()
    assert SendIntent.objects.filter(draft=draft).count() == (draft.status == "approved")
    decisions = IntentEvent.objects.filter(
        draft=draft, action__in=["draft.approved", "draft.rejected"]
    )
    assert decisions.count() == 1


def test_edit_races_approval_never_approves_unseen_content(tenant_a, new_draft, approver):
    draft = new_draft()
    version = draft.versions.get()

    def act(i):
        if i == 0:
            return services.draft_add_version(
                tenant=tenant_a,
                draft_id=draft.pk,
                to=["other@example.com"],
                cc=[],
                bcc=[],
                subject="changed",
                text="changed",
                html="",
                actor_user=approver,
            )
        return services.draft_approve(
            tenant=tenant_a,
            draft_id=draft.pk,
            version=1,
            content_hash=version.content_hash,
            actor=approver,
        )

    results = run_concurrently(act, 6)
    draft.refresh_from_db()
    intents = list(SendIntent.objects.filter(draft=draft))
    assert len(intents) <= 1
    assert all(i.content_hash == version.content_hash for i in intents)
    assert all(i.draft_version.number == 1 for i in intents)
    # Every call either won or lost in one of the two expected ways: nothing else went wrong.
    edit, approvals = results[0], results[1:]
    assert all(
        isinstance(r, SendIntent | errors.NotPending | errors.StaleVersion) for r in approvals
    )
    approved = [r for r in approvals if isinstance(r, SendIntent)]
    assert len(approved) == len(intents)
    # Whichever took the draft's lock first decided: the edit (every approval is then stale), or
    # one approval (the edit and the other approvals then find the draft no longer pending).
    if isinstance(edit, errors.NotPending):
        assert len(approved) == 1
        assert draft.status == "approved"
        assert all(isinstance(r, errors.NotPending) for r in approvals if r not in approved)
    else:
        assert isinstance(edit, DraftVersion), edit
        assert approved == []
        assert draft.current_version == 2
        assert all(isinstance(r, errors.StaleVersion) for r in approvals)


def test_cancel_races_cancel_one_journal_row(tenant_a, new_draft, approver):
    draft = new_draft()
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=approver,
    )
    results = run_concurrently(
        lambda _: services.intent_cancel(tenant=tenant_a, intent_id=intent.pk, actor=approver), 8
    )
    assert sum(isinstance(r, SendIntent) for r in results) == 1
    assert IntentEvent.objects.filter(intent=intent, action="intent.cancelled").count() == 1


def test_expire_sweeps_race_each_draft_expired_once(new_draft):
    drafts = [new_draft(subject=f"d{i}") for i in range(20)]
    from datetime import timedelta

    from django.utils import timezone

    Draft.objects.filter(pk__in=[d.pk for d in drafts]).update(
        review_deadline=timezone.now() - timedelta(seconds=1)
    )
    results = run_concurrently(lambda _: services.draft_expire_due(), 4)
    assert sum(results) == 20
    assert IntentEvent.objects.filter(action="draft.expired").count() == 20


def _edit(tenant, draft, text, **actor_and_base):
    return services.draft_add_version(
        tenant=tenant,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text=text,
        html="",
        **actor_and_base,
    )


def test_two_people_saving_on_the_same_base_one_wins_the_other_gets_a_conflict(
    tenant_a, new_draft, approver, member_of
):
    draft = new_draft()
    people = [approver, member_of(tenant_a, "approver").user]

    results = run_concurrently(
        lambda i: _edit(
            tenant_a, draft, f"Edited by person {i}.", base_version=1, actor_user=people[i]
        ),
        2,
    )

    saved = [r for r in results if isinstance(r, DraftVersion)]
    conflicts = [r for r in results if isinstance(r, errors.VersionConflict)]
    assert len(saved) == 1
    assert len(conflicts) == 1
    assert (conflicts[0].base_version, conflicts[0].current_version) == (1, 2)
    assert list(draft.versions.order_by("number").values_list("number", flat=True)) == [1, 2]
    assert IntentEvent.objects.filter(draft=draft, action="draft.version_added").count() == 1


def test_an_agent_revision_landing_during_a_persons_save_refuses_the_stale_save(
    tenant_a, new_draft, approver
):
    draft = new_draft()
    token, _ = token_create(
        tenant=tenant_a, name="agent", scopes=["drafts:write"], mailbox_ids=[], actor=None
    )
    outcome: list = []

    def person_saves() -> None:
        try:
            outcome.append(
                _edit(tenant_a, draft, "Person's edit.", base_version=1, actor_user=approver)
            )
        except Exception as exc:
            outcome.append(exc)
        finally:
            connections.close_all()

    with transaction.atomic():
        # The agent's revision holds the draft's lock while the person's save (based on
        # version 1) arrives; it commits version 2 while the person waits.
        _edit(tenant_a, draft, "Agent's revision.", agent_token=token)
        person = threading.Thread(target=person_saves)
        person.start()
        assert blocked_on_a_lock(), "the person's save never waited for the draft's lock"
    person.join(30)

    assert len(outcome) == 1
    assert isinstance(outcome[0], errors.VersionConflict)
    current = draft.versions.get(number=2)
    assert current.text == "Agent's revision."
    assert draft.versions.count() == 2


def test_a_rejection_of_the_version_seen_waits_for_an_agent_revision_and_is_refused(
    tenant_a, new_draft, approver
):
    """The reviewer's reason was about version 1; the agent's version 2 landed while the
    rejection waited for the draft: it was rejected unread, and the journal did not say which
    version. Now the rejection is refused as stale, and one that goes through names its version."""
    draft = new_draft()
    token = _agent_token(tenant_a)
    outcome: list = []

    with transaction.atomic():
        _edit(tenant_a, draft, "Agent's revision.", agent_token=token)
        reviewer = in_thread(
            lambda: services.draft_reject(
                tenant=tenant_a, draft_id=draft.pk, reason="Wrong amount", actor=approver, version=1
            ),
            outcome,
        )
        assert blocked_on_a_lock(), "the rejection never waited for the draft's lock"
    reviewer.join(30)

    assert isinstance(outcome[0], errors.StaleVersion), outcome[0]
    assert "version 2 is current" in outcome[0].message
    draft.refresh_from_db()
    assert (draft.status, draft.current_version) == ("pending", 2)
    services.draft_reject(
        tenant=tenant_a, draft_id=draft.pk, reason="Still wrong", actor=approver, version=2
    )
    rejected = IntentEvent.objects.get(draft=draft, action="draft.rejected")
    assert rejected.data["version"] == 2
    assert rejected.data["content_hash"] == draft.versions.get(number=2).content_hash


def _agent_token(tenant):
    token, _ = token_create(tenant=tenant, name="agent", scopes=["drafts:write"], actor=None)
    return token


def _agent_draft(tenant, mailbox, token):
    return services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["a@example.com"],
        subject="Hi",
        text="x",
        agent_token=token,
    )


def test_a_revocation_waits_for_an_agent_write_that_already_checked_its_token(
    tenant_a, local_mailbox
):
    token = _agent_token(tenant_a)
    revoked: list = []

    def admin_revokes() -> None:
        try:
            revoked.append(token_revoke(tenant=tenant_a, token_id=token.pk, actor=None))
        except Exception as exc:
            revoked.append(exc)
        finally:
            connections.close_all()

    with transaction.atomic():
        # The agent's request: its draft written, its transaction not committed yet.
        draft = _agent_draft(tenant_a, local_mailbox, token)
        admin = threading.Thread(target=admin_revokes)
        admin.start()
        assert blocked_on_a_lock(), "the revocation did not wait for the write in flight"
    admin.join(30)

    assert [type(r) for r in revoked] == [AgentToken]
    assert revoked[0].revoked_at > Draft.objects.get(pk=draft.pk).created_at


def test_an_agent_write_waits_for_a_running_revocation_and_is_refused(tenant_a, local_mailbox):
    token = _agent_token(tenant_a)
    outcome: list = []

    def agent_writes() -> None:
        try:
            outcome.append(_agent_draft(tenant_a, local_mailbox, token))
        except Exception as exc:
            outcome.append(exc)
        finally:
            connections.close_all()

    with transaction.atomic():
        token_revoke(tenant=tenant_a, token_id=token.pk, actor=None)
        agent = threading.Thread(target=agent_writes)
        agent.start()
        assert blocked_on_a_lock(), "the write did not wait for the revocation in flight"
    agent.join(30)

    assert [type(r) for r in outcome] == [errors.TokenRevoked]
    assert not Draft.objects.exists()


# --- broadcasts: the sandbox's ledger is counted ---------------------------------------------------


def _approved_broadcast(live, n):
    b = broadcast_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        subject="Hi {{ name }}",
        text="Hello {{ name }}",
        recipients=[
            {"address": f"P{i}@Example.com", "variables": {"name": f"N{i}"}} for i in range(n)
        ],
    )
    return broadcast_approve(
        tenant=live.tenant, broadcast_id=b.pk, content_hash=b.content_hash, actor=live.approver
    )


def _ledger_of(live, broadcast):
    keys = set(
        SendIntent.objects.filter(broadcast=broadcast).values_list("idempotency_key", flat=True)
    )
    return [s for s in live.sandbox.ledger() if s.get("idempotency_key") in keys]


def test_fan_out_runs_racing_send_rounds_send_each_recipient_once(live, settings):
    settings.BROADCAST_FANOUT_PAGE = 3
    settings.BROADCAST_RATE_PER_SECOND = 1000
    b = _approved_broadcast(live, 20)

    def work(i):
        if i < 3:
            broadcast_run(b.pk)
        for _ in range(5):
            nudge_queued()
            sending.run_once(worker=f"w{i}", limit=20)

    results = run_concurrently(work, 6)
    drain_sends(60)
    broadcast_run(b.pk)

    assert [r for r in results if isinstance(r, BaseException)] == []
    sends = _ledger_of(live, b)
    assert len(sends) == 20
    assert len({s["to"][0] for s in sends}) == 20
    assert Broadcast.objects.get(pk=b.pk).state == "completed"


def test_pause_cancel_and_resume_racing_senders_end_cancelled_and_send_nothing_more(live, settings):
    settings.BROADCAST_RATE_PER_SECOND = 1000
    b = _approved_broadcast(live, 10)
    broadcast_run(b.pk)
    decisions = {
        0: lambda: broadcast_pause(tenant=live.tenant, broadcast_id=b.pk, actor=live.approver),
        1: lambda: broadcast_cancel(tenant=live.tenant, broadcast_id=b.pk, actor=live.approver),
        2: lambda: broadcast_resume(tenant=live.tenant, broadcast_id=b.pk, actor=live.approver),
    }

    run_concurrently(
        lambda i: decisions[i]() if i in decisions else sending.run_once(worker=f"w{i}", limit=20),
        5,
    )
    broadcast_run(b.pk)
    drain_sends(60)
    sent_before = len(_ledger_of(live, b))
    # Whatever order the three decisions ran in, a cancelled broadcast sends nothing more.
    broadcast_run(b.pk)
    drain_sends(30)

    assert Broadcast.objects.get(pk=b.pk).state == "cancelled"
    assert len(_ledger_of(live, b)) == sent_before
    states = set(SendIntent.objects.filter(broadcast=b).values_list("state", flat=True))
    assert states <= {"accepted", "cancelled", "blocked"}, states


# --- an earlier send proven sent, and a new approval of the reopened draft, at the same moment ------


def _reopened_after_a_lost_answer(live, reviewer):
    """A send that went out (the sandbox holds it) whose answer was lost (needs attention), its
    draft reopened by ``reviewer``: what a second reviewer may approve again. Returns the earlier
    send, the provider's record of it and the new version's approve arguments."""
    earlier = live.approved()
    drain_sends()
    [sent] = live.sandbox.ledger(idempotency_key=earlier.idempotency_key)
    # Data setup: the worker's answer was lost and the window passed without proof.
    SendIntent.objects.filter(pk=earlier.pk).update(state="needs_attention", provider_message_id="")
    services.draft_reopen(tenant=live.tenant, draft_id=earlier.draft_id, actor=reviewer, reason="r")
    current = DraftVersion.objects.filter(draft_id=earlier.draft_id).order_by("-number").first()
    approve = {
        "tenant": live.tenant,
        "draft_id": earlier.draft_id,
        "version": current.number,
        "content_hash": current.content_hash,
    }
    return earlier, sent, approve


def _sent_for_draft(live, draft_id) -> list:
    keys = SendIntent.objects.filter(draft_id=draft_id).values_list("idempotency_key", flat=True)
    return [s for key in keys for s in live.sandbox.ledger(idempotency_key=key)]


def test_a_send_marked_sent_while_its_reopened_draft_is_approved_again_goes_out_once(
    live, member_of
):
    """Found by an outside probe: the approval found no accepted send (the mark was not
    committed) and the mark found no newer send (the approval was not committed): both
    committed, and the reply went out a second time. They now meet on the draft's lock."""
    second = member_of(live.tenant, "approver").user
    earlier, sent, approve = _reopened_after_a_lost_answer(live, live.approver)
    approval: list = []

    with transaction.atomic():
        # The reviewer's evidence is being recorded; the colleague's approval arrives.
        services.intent_resolve_accepted(
            tenant=live.tenant,
            intent_id=earlier.pk,
            actor=live.approver,
            provider_message_id=sent["message_id"],
            evidence="The customer quoted our reply.",
        )
        approving = in_thread(lambda: services.draft_approve(**approve, actor=second), approval)
        blocked_on_a_lock()
    approving.join(30)
    drain_sends()

    assert [type(r) for r in approval] == [errors.NotPending]
    # The mark closed the reopened draft (approved again on the version that went out).
    assert approval[0].code == "not_pending"
    assert len(_sent_for_draft(live, earlier.draft_id)) == 1


def test_an_approval_of_a_reopened_draft_while_its_earlier_send_is_marked_sent_goes_out_once(
    live, member_of
):
    second = member_of(live.tenant, "approver").user
    earlier, sent, approve = _reopened_after_a_lost_answer(live, live.approver)
    marking: list = []

    def mark_sent():
        return services.intent_resolve_accepted(
            tenant=live.tenant,
            intent_id=earlier.pk,
            actor=live.approver,
            provider_message_id=sent["message_id"],
            evidence="The customer quoted our reply.",
        )

    with transaction.atomic():
        newer = services.draft_approve(**approve, actor=second)
        resolving = in_thread(mark_sent, marking)
        blocked_on_a_lock()
    resolving.join(30)

    assert [type(r) for r in marking] == [errors.IntentError]
    assert marking[0].code == "superseded"
    # What the refusal says to do when the earlier send went out: cancel the newer one first.
    services.intent_cancel(tenant=live.tenant, intent_id=newer.pk, actor=live.approver)
    assert mark_sent().state == "accepted"
    drain_sends()
    assert len(_sent_for_draft(live, earlier.draft_id)) == 1


def test_a_cancel_and_a_reopen_of_the_same_send_at_once_do_not_deadlock(
    tenant_a, new_draft, approver, member_of
):
    """Found by an outside probe: the cancel holds the send's row and, committing, checks its
    journal row's draft (a KEY SHARE lock); the reopen held the draft FOR UPDATE and waited for
    the send's row. PostgreSQL killed one of them (a 500). The reopen now takes the draft FOR NO
    KEY UPDATE, as the undo does: the cancel commits, then the reopen goes on."""
    colleague = member_of(tenant_a, "approver").user
    draft = new_draft()
    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get().content_hash,
        actor=approver,
    )
    SendIntent.objects.filter(pk=intent.pk).update(state="needs_attention")
    reopening: list = []

    with transaction.atomic():
        services.intent_cancel(tenant=tenant_a, intent_id=intent.pk, actor=approver, reason="x")
        reopen = in_thread(
            lambda: services.draft_reopen(
                tenant=tenant_a, draft_id=draft.pk, actor=colleague, reason="send it again"
            ),
            reopening,
        )
        assert blocked_on_a_lock(), "the reopen did not wait for the cancel"
    reopen.join(30)

    assert [type(r) for r in reopening] == [Draft]
    draft.refresh_from_db()
    assert (draft.status, draft.current_version) == ("pending", 2)
    intent.refresh_from_db()
    assert intent.state == "cancelled"
