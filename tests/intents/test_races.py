"""Every transition has a race: threads on separate connections, exactly one wins."""

import threading

import pytest
from django.db import connections, transaction

from intents import errors, services
from intents.models import Draft, DraftVersion, IntentEvent, SendIntent
from tenants.tokens import token_create
from tests.intents.helpers import blocked_on_a_lock, run_concurrently

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
        tenant=tenant_a, name="agent", scopes=["drafts:write"], mailbox_ids=[], actor=approver
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
