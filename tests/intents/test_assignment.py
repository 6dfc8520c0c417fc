"""Ownership of drafts: take, hand, release, lapsed claims, automatic assignment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from config.clock import db_now
from intents import errors, services
from intents.models import Draft, IntentEvent
from intents.services.assignment import (
    CLAIM_DURATION,
    drafts_release_lapsed_claims,
    drafts_release_undecidable_holds,
)
from mailboxes.models import Mailbox
from tenants.models import User
from tests.factories import make_local_mailbox
from tests.intents.helpers import run_concurrently


def _claim_ends_in(draft, left: timedelta) -> None:
    """As if time passed: the claim ends ``left`` from now by the database clock, which decides."""
    Draft.objects.filter(pk=draft.pk).update(claim_expires_at=db_now() + left)


def _events(draft, action):
    return list(IntentEvent.objects.filter(draft=draft, action=action).order_by("id"))


def test_take_records_the_holder_and_a_claim_with_expiry(tenant_a, new_draft, approver):
    draft = new_draft()
    taken = services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    assert taken.assignee == approver
    assert taken.assigned_how == "taken"
    assert taken.claim_expires_at > timezone.now() + CLAIM_DURATION - timedelta(minutes=1)
    [event] = _events(draft, "draft.taken")
    assert event.actor_user == approver
    assert event.data == {"holder": approver.pk, "previous_holder": None}


def test_taking_again_renews_without_a_second_journal_row(tenant_a, new_draft, approver):
    draft = new_draft()
    first = services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    _claim_ends_in(draft, CLAIM_DURATION - timedelta(minutes=10))
    again = services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    assert again.claim_expires_at > first.claim_expires_at
    assert len(_events(draft, "draft.taken")) == 1


def test_taking_a_draft_handed_to_you_keeps_the_hand_from_lapsing(
    tenant_a, new_draft, approver, member_of
):
    """A stale page: its Take button was shown while nobody held the draft; meanwhile an admin
    handed it to this person (an assignment with no expiry), who then clicks Take."""
    admin = member_of(tenant_a, "admin").user
    draft = new_draft()
    services.draft_hand(tenant=tenant_a, draft_id=draft.pk, actor=admin, to_user=approver)
    taken = services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    assert (taken.assignee, taken.assigned_how, taken.claim_expires_at) == (
        approver,
        "handed",
        None,
    )
    later = timezone.now() + CLAIM_DURATION + timedelta(seconds=1)
    assert drafts_release_lapsed_claims(now=later) == 0
    draft.refresh_from_db()
    assert draft.assignee == approver
    assert not _events(draft, "draft.claim_lapsed")


def test_take_held_by_someone_else_is_refused_naming_them(tenant_a, new_draft, approver, member_of):
    other = member_of(tenant_a, "approver", user__full_name="Olga Other").user
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=other)
    with pytest.raises(errors.HeldByOther, match="Olga Other holds this draft"):
        services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    draft.refresh_from_db()
    assert draft.assignee == other


def test_a_lapsed_claim_can_be_taken_over(tenant_a, new_draft, approver, member_of):
    other = member_of(tenant_a, "approver").user
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=other)
    _claim_ends_in(draft, -timedelta(seconds=1))
    taken = services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    assert taken.assignee == approver
    assert _events(draft, "draft.taken")[-1].data["previous_holder"] == other.pk


def test_a_claim_just_before_it_lapses_still_holds(tenant_a, new_draft, approver, member_of):
    other = member_of(tenant_a, "approver").user
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=other)
    _claim_ends_in(draft, timedelta(seconds=5))
    with pytest.raises(errors.HeldByOther):
        services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)


def test_the_sweep_returns_lapsed_claims_to_the_queue(tenant_a, new_draft, approver):
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    assert drafts_release_lapsed_claims() == 0
    later = timezone.now() + CLAIM_DURATION + timedelta(seconds=1)
    assert drafts_release_lapsed_claims(now=later) == 1
    assert drafts_release_lapsed_claims(now=later) == 0
    draft.refresh_from_db()
    assert draft.assignee is None
    assert len(_events(draft, "draft.claim_lapsed")) == 1


def test_take_refuses_a_draft_that_is_not_pending(tenant_a, new_draft, approver):
    draft = new_draft()
    services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="no", actor=approver)
    with pytest.raises(errors.NotPending):
        services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)


def test_take_needs_the_approve_right_on_the_mailbox(tenant_a, new_draft, member_of):
    draft = new_draft()
    viewer = member_of(tenant_a, "viewer").user
    narrow = member_of(tenant_a, "approver", approve_all_mailboxes=False).user
    for person in (viewer, narrow):
        with pytest.raises(errors.NoRight):
            services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=person)
    assert not _events(draft, "draft.taken")


def test_take_by_an_inactive_member_is_refused(tenant_a, new_draft, member_of):
    draft = new_draft()
    gone = member_of(tenant_a, "approver", is_active=False).user
    with pytest.raises(errors.NoRight):
        services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=gone)


def test_an_outsider_tenant_sees_no_such_draft(tenant_a, tenant_b, new_draft, member_of):
    draft = new_draft()
    outsider = member_of(tenant_b, "admin").user
    for action in (services.draft_take, services.draft_release):
        with pytest.raises(errors.NotFound):
            action(tenant=tenant_b, draft_id=draft.pk, actor=outsider)
    with pytest.raises(errors.NotFound):
        services.draft_hand(tenant=tenant_b, draft_id=draft.pk, actor=outsider, to_user=outsider)


def test_hand_to_a_colleague_with_the_right(tenant_a, new_draft, approver, member_of):
    colleague = member_of(tenant_a, "approver").user
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    handed = services.draft_hand(
        tenant=tenant_a, draft_id=draft.pk, actor=approver, to_user=colleague
    )
    assert handed.assignee == colleague
    assert handed.assigned_how == "handed"
    assert handed.claim_expires_at is None
    [event] = _events(draft, "draft.handed")
    assert event.data == {"holder": colleague.pk, "previous_holder": approver.pk}


def test_hand_refuses_a_colleague_without_the_right_inactive_or_outside(
    tenant_a, tenant_b, new_draft, approver, member_of
):
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    viewer = member_of(tenant_a, "viewer").user
    narrow = member_of(tenant_a, "approver", approve_all_mailboxes=False).user
    inactive = member_of(tenant_a, "approver", is_active=False).user
    outsider = member_of(tenant_b, "approver").user
    for person, error in (
        (viewer, errors.NoRight),
        (narrow, errors.NoRight),
        (inactive, errors.InvalidInput),
        (outsider, errors.InvalidInput),
    ):
        with pytest.raises(error):
            services.draft_hand(tenant=tenant_a, draft_id=draft.pk, actor=approver, to_user=person)
    draft.refresh_from_db()
    assert draft.assignee == approver
    assert not _events(draft, "draft.handed")


def test_only_the_holder_or_an_admin_hands_or_releases(tenant_a, new_draft, approver, member_of):
    other = member_of(tenant_a, "approver").user
    admin = member_of(tenant_a, "admin").user
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    with pytest.raises(errors.NotHolder):
        services.draft_release(tenant=tenant_a, draft_id=draft.pk, actor=other)
    with pytest.raises(errors.NotHolder):
        services.draft_hand(tenant=tenant_a, draft_id=draft.pk, actor=other, to_user=other)
    released = services.draft_release(tenant=tenant_a, draft_id=draft.pk, actor=admin)
    assert released.assignee is None
    [event] = _events(draft, "draft.released")
    assert event.actor_user == admin


def test_release_of_an_unheld_draft_is_refused(tenant_a, new_draft, approver):
    draft = new_draft()
    with pytest.raises(errors.NotHolder):
        services.draft_release(tenant=tenant_a, draft_id=draft.pk, actor=approver)


def test_any_approver_may_still_decide_and_the_claim_is_dropped(
    tenant_a, new_draft, approver, member_of
):
    other = member_of(tenant_a, "approver").user
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=other)
    services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="wrong", actor=approver)
    draft.refresh_from_db()
    assert draft.status == "rejected"
    assert draft.assignee is None
    assert draft.claim_expires_at is None


pytestmark_race = pytest.mark.django_db(transaction=True)


@pytestmark_race
def test_two_takes_at_once_exactly_one_wins(tenant_a, new_draft, member_of):
    people = [member_of(tenant_a, "approver").user for _ in range(2)]
    draft = new_draft()
    results = run_concurrently(
        lambda i: services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=people[i]), 2
    )
    won = [r for r in results if isinstance(r, Draft)]
    lost = [r for r in results if isinstance(r, errors.HeldByOther)]
    assert (len(won), len(lost)) == (1, 1)
    draft.refresh_from_db()
    assert draft.assignee == won[0].assignee
    assert len(_events(draft, "draft.taken")) == 1


# --- automatic assignment ------------------------------------------------------------------------


@pytest.fixture
def auto_mailbox(tenant_a):
    mailbox = make_local_mailbox(tenant_a, username="auto")
    Mailbox.objects.filter(pk=mailbox.pk).update(auto_assign=True)
    mailbox.refresh_from_db()
    return mailbox


def test_auto_assign_round_robin_skips_the_absent_and_the_unentitled(
    tenant_a, auto_mailbox, new_draft, approver, member_of
):
    # approver (the fixture) exists first; two more approvers, one away, a viewer, an outsider.
    present = member_of(tenant_a, "approver").user
    member_of(tenant_a, "approver", is_away=True)
    member_of(tenant_a, "viewer")
    member_of(tenant_a, "approver", approve_all_mailboxes=False)
    holders = [new_draft(mailbox=auto_mailbox).assignee for _ in range(4)]
    assert holders == [approver, present, approver, present]
    draft = Draft.objects.filter(mailbox=auto_mailbox).order_by("id").first()
    [event] = _events(draft, "draft.assigned")
    assert event.data["holder"] == approver.pk


def test_auto_assign_off_leaves_drafts_unassigned(tenant_a, new_draft):
    assert new_draft().assignee is None


def test_auto_assign_with_everyone_away_leaves_it_unassigned(
    tenant_a, auto_mailbox, new_draft, approver
):
    approver.memberships.update(is_away=True)
    assert new_draft(mailbox=auto_mailbox).assignee is None


@pytestmark_race
def test_auto_assign_takes_turns_when_drafts_arrive_at_once(
    tenant_a, auto_mailbox, new_draft, approver, member_of
):
    second = member_of(tenant_a, "approver").user
    results = run_concurrently(lambda i: new_draft(mailbox=auto_mailbox), 4)
    assert all(isinstance(r, Draft) for r in results)
    holders = sorted(r.assignee_id for r in results)
    assert holders == sorted([approver.pk, approver.pk, second.pk, second.pk])


@pytest.mark.parametrize("change", ["deactivated", "made a viewer", "lost the mailbox right"])
def test_a_holder_who_may_no_longer_decide_holds_nothing(
    tenant_a, new_draft, approver, member_of, change
):
    """Found by an outside probe: a draft handed, assigned or escalated to someone later
    deactivated (or demoted) was refused to everyone for good, naming them."""
    holder = member_of(tenant_a, "approver", user__full_name="Bo Gone")
    draft = new_draft()
    admin = member_of(tenant_a, "admin").user
    services.draft_hand(tenant=tenant_a, draft_id=draft.pk, to_user=holder.user, actor=admin)
    if change == "deactivated":
        holder.is_active = False
    elif change == "made a viewer":
        holder.role = "viewer"
    else:
        holder.approve_all_mailboxes = False
    holder.save()

    taken = services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)

    assert taken.assignee == approver
    [event] = _events(draft, "draft.taken")
    assert event.data == {"holder": approver.pk, "previous_holder": holder.user_id}


@pytest.mark.parametrize(
    "change", ["deactivated", "made a viewer", "lost the mailbox right", "account disabled"]
)
def test_the_sweep_gives_back_a_hold_whose_holder_may_no_longer_decide(
    tenant_a, new_draft, local_mailbox, member_of, change
):
    """Found by an outside probe: a handed (or assigned, or escalated) hold never lapses, so a
    draft held by a member later deactivated or demoted stayed theirs for good: off the
    Unassigned view, and offered to nobody to take. Colleagues who still may decide keep
    theirs: one with every mailbox, one restricted to this mailbox."""
    admin = member_of(tenant_a, "admin").user
    gone = member_of(tenant_a, "approver")
    every = member_of(tenant_a, "approver")
    kept = member_of(tenant_a, "approver", approve_all_mailboxes=False)
    kept.approve_mailboxes.set([local_mailbox])
    drafts = {}
    for member in (gone, every, kept):
        drafts[member.pk] = new_draft()
        services.draft_hand(
            tenant=tenant_a, draft_id=drafts[member.pk].pk, to_user=member.user, actor=admin
        )
    if change == "deactivated":
        gone.is_active = False
    elif change == "made a viewer":
        gone.role = "viewer"
    elif change == "lost the mailbox right":
        gone.approve_all_mailboxes = False
    gone.save()
    if change == "account disabled":
        User.objects.filter(pk=gone.user_id).update(is_active=False)

    assert drafts_release_undecidable_holds() == 1
    assert drafts_release_undecidable_holds() == 0

    released = Draft.objects.get(pk=drafts[gone.pk].pk)
    assert (released.assignee, released.assigned_how) == (None, "")
    for member in (every, kept):
        assert Draft.objects.get(pk=drafts[member.pk].pk).assignee == member.user
    [event] = _events(released, "draft.holder_cannot_decide")
    assert event.actor_kind == IntentEvent.Actor.SWEEP
    assert event.data == {"previous_holder": gone.user_id}


def test_a_holder_made_a_viewer_does_not_keep_the_claim_alive_by_opening_the_draft(
    tenant_a, new_draft, member_of
):
    holder = member_of(tenant_a, "approver")
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=holder.user)
    before = Draft.objects.get(pk=draft.pk).claim_expires_at
    holder.role = "viewer"
    holder.save()

    with time_machine.travel(timezone.now() + timedelta(minutes=20)):
        renewed = services.draft_claim_renew(tenant=tenant_a, draft_id=draft.pk, actor=holder.user)

    assert renewed is False
    assert Draft.objects.get(pk=draft.pk).claim_expires_at == before


# Claims between hosts whose clocks disagree: the expiry was set on the web host's clock and
# read on whichever host took over or swept, so a skew moved every claim by its size. The
# database clock decides.
SKEW = timedelta(minutes=10)


def test_a_claim_taken_on_a_host_behind_runs_its_full_time(tenant_a, new_draft, approver):
    draft = new_draft()
    with time_machine.travel(datetime.now(UTC) - SKEW):
        taken = services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    assert taken.claim_expires_at - db_now() == pytest.approx(
        CLAIM_DURATION, abs=timedelta(seconds=5)
    )


def test_a_claim_renewed_on_a_host_behind_runs_its_full_time(tenant_a, new_draft, approver):
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    with time_machine.travel(datetime.now(UTC) - SKEW):
        assert services.draft_claim_renew(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    assert Draft.objects.get(pk=draft.pk).claim_expires_at - db_now() == pytest.approx(
        CLAIM_DURATION, abs=timedelta(seconds=5)
    )


def test_a_running_claim_is_not_taken_over_on_a_host_ahead(
    tenant_a, new_draft, approver, member_of
):
    other = member_of(tenant_a, "approver").user
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=other)
    with (
        time_machine.travel(datetime.now(UTC) + CLAIM_DURATION + SKEW),
        pytest.raises(errors.HeldByOther),
    ):
        services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)


def test_a_sweep_on_a_host_ahead_does_not_release_a_running_claim(tenant_a, new_draft, approver):
    draft = new_draft()
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=approver)
    with time_machine.travel(datetime.now(UTC) + CLAIM_DURATION + SKEW):
        assert drafts_release_lapsed_claims() == 0
    assert Draft.objects.get(pk=draft.pk).assignee == approver
