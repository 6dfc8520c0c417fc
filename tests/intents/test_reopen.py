"""Re-approve as a new intent (DESIGN.md, send intent lifecycle: "a resend is a new approval and a
new intent"): draft_reopen puts the draft back in review as a new version, and only a fresh
approval of that version sends it, under a new idempotency key."""

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from intents import errors, selectors, services
from intents.models import Draft, DraftVersion, IntentEvent, SendIntent
from tests.intents.helpers import run_concurrently, set_state, unproven

pytestmark = pytest.mark.django_db


def approve_current(tenant, draft_id, actor):
    draft = Draft.objects.get(pk=draft_id)
    version = draft.versions.get(number=draft.current_version)
    return services.draft_approve(
        tenant=tenant,
        draft_id=draft_id,
        version=version.number,
        content_hash=version.content_hash,
        actor=actor,
    )


@pytest.mark.parametrize("state", ["needs_attention", "failed", "blocked", "cancelled", "expired"])
def test_reopen_puts_a_copy_keeping_its_author_back_in_review(tenant_a, intent, member_of, state):
    reopener = member_of(tenant_a, "admin").user
    set_state(intent, state)
    draft = services.draft_reopen(
        tenant=tenant_a, draft_id=intent.draft_id, actor=reopener, reason="customer asked again"
    )
    assert (draft.status, draft.current_version, draft.decided_by_id) == ("pending", 2, None)
    old, new = DraftVersion.objects.filter(draft=draft).order_by("number")
    assert new.pk != old.pk
    # The person reopening wrote nothing: the copy keeps the approved version's author (four-eyes
    # must keep whoever wrote it from approving it alone, not the person who brought it back).
    assert (new.author_kind, new.author_user_id, new.author_token_id) == (
        old.author_kind,
        old.author_user_id,
        old.author_token_id,
    )
    assert (new.recipients, new.subject, new.text, new.html) == (
        old.recipients,
        old.subject,
        old.text,
        old.html,
    )
    assert new.content_hash == old.content_hash
    assert SendIntent.objects.get(draft=draft).draft_version_id == old.pk
    event = IntentEvent.objects.get(draft=draft, action="draft.reopened")
    assert (event.from_state, event.to_state, event.reason, event.intent_id) == (
        "approved",
        "pending",
        "customer asked again",
        intent.pk,
    )
    assert event.data["earlier_intent_state"] == state
    assert event.data["version"] == 2
    intent.refresh_from_db()
    assert intent.state == state


def test_the_new_approval_makes_a_new_intent_with_a_new_key(tenant_a, intent, approver):
    set_state(intent, "failed")
    services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="r")
    second = approve_current(tenant_a, intent.draft_id, approver)
    assert second.pk != intent.pk
    assert second.idempotency_key != intent.idempotency_key
    assert second.idempotency_key.startswith(f"cs-{tenant_a.pk}-")
    assert (second.state, second.draft_version.number) == ("queued", 2)
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"
    detail = selectors.draft_detail(tenant=tenant_a, draft_id=intent.draft_id)
    assert detail.intent.pk == second.pk
    assert [i.pk for i in detail.earlier_intents] == [intent.pk]


def test_the_old_version_cannot_be_approved_again(tenant_a, intent, approver):
    set_state(intent, "failed")
    services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="r")
    with pytest.raises(errors.StaleVersion):
        services.draft_approve(
            tenant=tenant_a,
            draft_id=intent.draft_id,
            version=1,
            content_hash=intent.content_hash,
            actor=approver,
        )
    assert SendIntent.objects.filter(draft_id=intent.draft_id).count() == 1


@pytest.mark.parametrize(
    ("state", "code"),
    [
        ("accepted", "intent_accepted"),
        ("queued", "intent_live"),
        ("sending", "intent_live"),
        ("uncertain", "intent_live"),
    ],
)
def test_reopen_refused_while_the_send_went_out_or_may_still_go(
    tenant_a, intent, approver, state, code
):
    set_state(intent, state)
    with pytest.raises(errors.IntentError) as caught:
        services.draft_reopen(
            tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="again"
        )
    assert caught.value.code == code
    assert f"#{intent.pk}" in caught.value.message
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"
    assert DraftVersion.objects.filter(draft_id=intent.draft_id).count() == 1
    assert not IntentEvent.objects.filter(action="draft.reopened").exists()


def test_reopen_refused_for_a_pending_or_rejected_draft(tenant_a, new_draft, approver, intent):
    set_state(intent, "failed")
    services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="r")
    with pytest.raises(errors.NotPending) as again:
        services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="r")
    assert again.value.code == "already_pending"
    rejected = new_draft()
    services.draft_reject(tenant=tenant_a, draft_id=rejected.pk, reason="no", actor=approver)
    with pytest.raises(errors.NotPending) as never:
        services.draft_reopen(tenant=tenant_a, draft_id=rejected.pk, actor=approver, reason="r")
    assert never.value.code == "not_approved"
    assert DraftVersion.objects.filter(draft_id=intent.draft_id).count() == 2


def test_reopen_needs_a_reason_a_right_and_the_tenant(tenant_a, tenant_b, intent, member_of):
    set_state(intent, "failed")
    admin = member_of(tenant_a, "admin").user
    with pytest.raises(errors.InvalidInput) as no_reason:
        services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=admin, reason=" ")
    assert no_reason.value.code == "reason_required"
    viewer = member_of(tenant_a, "viewer").user
    with pytest.raises(errors.NoRight):
        services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=viewer, reason="r")
    limited = member_of(tenant_a, "approver", approve_all_mailboxes=False).user
    with pytest.raises(errors.NoRight):
        services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=limited, reason="r")
    admin_b = member_of(tenant_b, "admin").user
    with pytest.raises(errors.NotFound):
        services.draft_reopen(tenant=tenant_b, draft_id=intent.draft_id, actor=admin_b, reason="r")
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"
    assert DraftVersion.objects.filter(draft_id=intent.draft_id).count() == 1


def test_reopen_gives_a_fresh_review_deadline_and_clears_a_passed_send_before(
    tenant_a, intent, approver
):
    past = timezone.now() - timedelta(days=3)
    Draft.objects.filter(pk=intent.draft_id).update(review_deadline=past, not_after=past)
    set_state(intent, "expired", last_error_code="not_after_passed")
    draft = services.draft_reopen(
        tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="still useful"
    )
    assert draft.review_deadline > timezone.now() + timedelta(hours=1)
    assert draft.not_after is None
    event = IntentEvent.objects.get(draft=draft, action="draft.reopened")
    assert event.data["not_after_cleared"] == past.isoformat()
    assert approve_current(tenant_a, draft.pk, approver).not_after is None


def test_journal_says_whether_the_earlier_send_may_have_gone_out(tenant_a, new_draft, approver):
    unknown = approve_current(tenant_a, new_draft().pk, approver)
    unproven(unknown)
    failed = approve_current(tenant_a, new_draft().pk, approver)
    set_state(failed, "failed")
    for i in (unknown, failed):
        services.draft_reopen(tenant=tenant_a, draft_id=i.draft_id, actor=approver, reason="r")
    flags = {
        e.intent_id: e.data["earlier_may_have_gone_out"]
        for e in IntentEvent.objects.filter(action="draft.reopened")
    }
    assert flags == {unknown.pk: True, failed.pk: False}


def test_an_earlier_send_proven_sent_stops_the_new_approval(tenant_a, intent, approver):
    set_state(intent, "needs_attention")
    services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="r")
    services.intent_resolve_accepted(
        tenant=tenant_a,
        intent_id=intent.pk,
        actor=approver,
        provider_message_id="<found@agentmail.test>",
        evidence="the customer's copy",
    )
    with pytest.raises(errors.NotPending) as caught:
        services.draft_approve(
            tenant=tenant_a,
            draft_id=intent.draft_id,
            version=2,
            content_hash=intent.content_hash,
            actor=approver,
        )
    assert caught.value.code == "not_pending"
    assert SendIntent.objects.filter(draft_id=intent.draft_id).count() == 1


def test_an_earlier_send_proven_sent_closes_the_reopened_draft(tenant_a, intent, approver):
    """Reopened after its send needed attention, then that send proven sent: the reply went out,
    so the draft leaves the review queue as the approved draft it was (its sent version current,
    its approval's approver and time), with a journal row naming the move. Before, it stayed
    pending: approving and editing it were refused (already_sent), yet it sat in the queue until
    its deadline expired it, and the agent could still withdraw a draft whose reply went out."""
    set_state(intent, "needs_attention")
    services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="r")
    services.intent_resolve_accepted(
        tenant=tenant_a,
        intent_id=intent.pk,
        actor=approver,
        provider_message_id="<found@agentmail.test>",
        evidence="the customer's copy",
    )
    draft = Draft.objects.get(pk=intent.draft_id)
    assert (draft.status, draft.current_version, draft.decided_by_id, draft.decided_at) == (
        "approved",
        1,
        intent.approver_id,
        intent.approved_at,
    )
    closed = IntentEvent.objects.get(draft=draft, action="draft.closed_as_sent")
    assert (closed.from_state, closed.to_state, closed.intent_id, closed.data["version"]) == (
        "pending",
        "approved",
        intent.pk,
        1,
    )
    assert draft.pk not in [d.pk for d in selectors.draft_queue(tenant=tenant_a).items]
    with pytest.raises(errors.NotPending):
        services.draft_withdraw(tenant=tenant_a, draft_id=draft.pk, actor_user=approver)
    assert Draft.objects.get(pk=draft.pk).status == "approved"


def test_purged_body_cannot_be_reopened(tenant_a, intent, approver):
    set_state(intent, "failed")
    DraftVersion.objects.filter(pk=intent.draft_version_id).update(
        text="", html="", body_purged_at=Now()
    )
    with pytest.raises(errors.DraftError) as caught:
        services.draft_reopen(tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="r")
    assert caught.value.code == "body_purged"
    assert Draft.objects.get(pk=intent.draft_id).status == "approved"


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_reopens_one_wins(tenant_a, intent, member_of):
    set_state(intent, "failed")
    people = [member_of(tenant_a, "approver").user for _ in range(2)]
    results = run_concurrently(
        lambda i: services.draft_reopen(
            tenant=tenant_a, draft_id=intent.draft_id, actor=people[i], reason=f"person {i}"
        ),
        2,
    )
    won = [r for r in results if isinstance(r, Draft)]
    lost = [r for r in results if isinstance(r, errors.DraftError)]
    assert (len(won), len(lost)) == (1, 1)
    assert lost[0].code == "already_pending"
    assert DraftVersion.objects.filter(draft_id=intent.draft_id).count() == 2
    assert (
        IntentEvent.objects.filter(draft_id=intent.draft_id, action="draft.reopened").count() == 1
    )


@pytest.mark.django_db(transaction=True)
def test_failed_send_reopened_and_approved_goes_out_once_under_the_new_key(live):
    from intents import sending

    first = live.approved()
    live.sandbox.fault("sends", "422_unprocessable")
    assert sending.run_once(worker="w", limit=1) == 1
    first.refresh_from_db()
    assert first.state == "failed"

    services.draft_reopen(
        tenant=live.tenant,
        draft_id=first.draft_id,
        actor=live.approver,
        reason="the provider refused it; the address is fixed on their side",
    )
    second = approve_current(live.tenant, first.draft_id, live.approver)
    assert sending.run_once(worker="w", limit=1) == 1
    second.refresh_from_db()
    first.refresh_from_db()
    assert (first.state, second.state) == ("failed", "accepted")
    assert second.provider_message_id
    assert len(live.sandbox.ledger(idempotency_key=second.idempotency_key)) == 1
    assert live.sandbox.ledger(idempotency_key=first.idempotency_key) == []
    assert len(live.sandbox.requests(idempotency_key=first.idempotency_key)) == 1
