"""An outsider's probe of membership management as two admins acting at the same moment hit it:
self-demotion against a removal, three admins acting in a ring, an invitation accepted while its
inviter is removed, and a removed or demoted reviewer's next POST from a page still open. Threads
on separate connections, real locks; the test waits for sessions that wait on a lock, not for
time."""

import pytest
from django.db import transaction
from django.urls import reverse

from intents import errors
from intents import services as intent_services
from intents.models import Broadcast, Draft, DraftNote, DraftVersion, IntentEvent, SendIntent
from intents.services.broadcasts import broadcast_create
from mailboxes.models import Mailbox
from tenants import invitations, onboarding, services
from tenants.models import AuditEvent, Invitation, Membership, User
from tests.factories import make_local_mailbox
from tests.intents.helpers import blocked_on_a_lock, held_open, in_thread, until_done_or_waiting
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db(transaction=True)

MEMBER_CHANGES = ("member.role_changed", "member.deactivated")


def _together(tenant, *writes) -> list:
    """Run ``writes`` at once, each on its own connection: the test holds every membership of
    the tenant while they start, so each is waiting on the same rows before any goes on."""
    outcomes: list[list] = [[] for _ in writes]
    threads = []
    with transaction.atomic():
        list(Membership.objects.select_for_update().filter(tenant=tenant).order_by("pk"))
        for n, (write, outcome) in enumerate(zip(writes, outcomes, strict=True)):
            threads.append(in_thread(write, outcome))
            until_done_or_waiting(threads[-1], n + 1)
    for thread in threads:
        thread.join(20)
    return [outcome[0] for outcome in outcomes]


def _set_role(tenant, target, actor, role="viewer"):
    return lambda: (
        services.member_set_role(
            tenant=tenant, membership_id=target.pk, role=role, actor=actor.user
        ).changed
    )


def _deactivate(tenant, target, actor):
    return lambda: (
        services.member_deactivate(tenant=tenant, membership_id=target.pk, actor=actor.user).changed
    )


def _acting_admins(tenant) -> list[int]:
    return sorted(
        Membership.objects.filter(
            tenant=tenant, role="admin", is_active=True, user__is_active=True
        ).values_list("pk", flat=True)
    )


@pytest.mark.parametrize(
    "second",
    ["alice_removes_bob", "bob_leaves", "bob_demotes_himself"],
)
def test_an_admin_demoting_themselves_while_the_other_admin_goes_leaves_one_admin(
    tenant_a, member_of, second
):
    alice, bob = member_of(tenant_a, "admin"), member_of(tenant_a, "admin")
    other = {
        "alice_removes_bob": _deactivate(tenant_a, bob, alice),
        "bob_leaves": _deactivate(tenant_a, bob, bob),
        "bob_demotes_himself": _set_role(tenant_a, bob, bob),
    }[second]

    results = _together(tenant_a, _set_role(tenant_a, alice, alice), other)

    assert isinstance(results[0], Membership), results
    assert isinstance(results[1], services.AdminError) and results[1].code == "last_admin"
    assert _acting_admins(tenant_a) == [bob.pk]
    changes = AuditEvent.objects.filter(tenant=tenant_a, action__in=MEMBER_CHANGES)
    assert list(changes.values_list("object_id", flat=True)) == [str(alice.pk)]


def test_three_admins_demoting_each_other_in_a_ring_leave_an_admin_and_one_row_per_change(
    tenant_a, member_of
):
    a, b, c = (member_of(tenant_a, "admin") for _ in range(3))

    results = _together(
        tenant_a, _set_role(tenant_a, b, a), _set_role(tenant_a, c, b), _set_role(tenant_a, a, c)
    )

    won = [r for r in results if isinstance(r, Membership)]
    assert len(won) == 2, results
    # B's turn comes after A demoted B: B is no longer an admin and is told so.
    assert isinstance(results[1], services.NotAnAdmin), results
    assert _acting_admins(tenant_a) == [c.pk]
    changes = AuditEvent.objects.filter(tenant=tenant_a, action="member.role_changed")
    assert sorted(changes.values_list("object_id", flat=True)) == sorted(str(m.pk) for m in won)


@pytest.mark.parametrize("how", ["demoted", "deactivated"])
def test_an_acceptance_while_the_inviter_is_being_removed_waits_and_makes_nobody_a_member(
    tenant_a, tenant_b, member_of, how
):
    inviter, other = member_of(tenant_a, "admin"), member_of(tenant_a, "admin")
    invitee = member_of(tenant_b, "viewer").user
    invitation, _link = invitations.invitation_create(
        tenant=tenant_a, email=invitee.email, role="admin", actor=inviter.user
    )
    change = (_set_role if how == "demoted" else _deactivate)(tenant_a, inviter, other)
    accepting: list = []
    with held_open(change, []):
        accept = in_thread(
            lambda: invitations.invitation_accept(invitation_id=invitation.pk, user=invitee),
            accepting,
        )
        waited = blocked_on_a_lock()
    accept.join(20)

    assert waited
    assert isinstance(accepting[0], services.AdminError), accepting
    assert not Membership.objects.filter(tenant=tenant_a, user=invitee).exists()
    assert Invitation.objects.get(pk=invitation.pk).state == "revoked"
    assert not AuditEvent.objects.filter(tenant=tenant_a, action="invitation.accepted").exists()


def test_an_acceptance_under_way_when_the_inviter_is_removed_is_kept_and_not_revoked(
    tenant_a, tenant_b, member_of
):
    """The other order: the acceptance holds the inviter's row (FOR SHARE) and commits first; the
    removal waits, then finds nothing pending to withdraw. One outcome each, both audited."""
    inviter, other = member_of(tenant_a, "admin"), member_of(tenant_a, "admin")
    invitee = member_of(tenant_b, "viewer").user
    invitation, _link = invitations.invitation_create(
        tenant=tenant_a, email=invitee.email, role="approver", actor=inviter.user
    )
    holder: list = []
    removing: list = []
    with held_open(
        lambda: invitations.invitation_accept(invitation_id=invitation.pk, user=invitee), holder
    ):
        remove = in_thread(_deactivate(tenant_a, inviter, other), removing)
        waited = blocked_on_a_lock()
    remove.join(20)

    assert waited
    assert isinstance(holder[0], Membership) and isinstance(removing[0], Membership)
    assert Membership.objects.get(tenant=tenant_a, user=invitee).is_active
    assert Invitation.objects.get(pk=invitation.pk).state == "accepted"
    actions = AuditEvent.objects.filter(tenant=tenant_a).values_list("action", flat=True)
    assert sorted(actions) == ["invitation.accepted", "invitation.invited", "member.deactivated"]


def _reviewer_with_open_page(tenant_a, tenant_b, member_of):
    """An approver of tenant A who also belongs to tenant B (so a deactivation in A leaves
    their session alive), signed in, with a pending draft of A open."""
    reviewer = member_of(tenant_a, "approver")
    Membership.objects.create(tenant=tenant_b, user=reviewer.user, role="viewer")
    mailbox = make_local_mailbox(tenant_a)
    author = member_of(tenant_a, "approver").user
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["customer@example.com"],
        subject="Your refund",
        text="We refunded your order.",
        actor_user=author,
    )
    client = RoutedClient()
    client.force_login(reviewer.user, backend="django.contrib.auth.backends.ModelBackend")
    assert client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).status_code == 200
    return reviewer, draft, client


def _posts(tenant, draft):
    version = draft.versions.get()
    slug = tenant.slug
    return {
        "approve": (
            reverse("draft_approve", args=[slug, draft.pk]),
            {"version": 1, "content_hash": version.content_hash},
        ),
        "reject": (reverse("draft_reject", args=[slug, draft.pk]), {"reason": "no"}),
        "edit": (
            reverse("draft_edit", args=[slug, draft.pk]),
            {"base_version": 1, "to": "customer@example.com", "subject": "S", "text": "New"},
        ),
        "note": (reverse("draft_note_add", args=[slug, draft.pk]), {"text": "a note"}),
        "take": (reverse("draft_take", args=[slug, draft.pk]), {}),
    }


def _draft_state(draft):
    return (
        Draft.objects.filter(pk=draft.pk).values_list("status", "assignee_id").get(),
        DraftVersion.objects.filter(draft=draft).count(),
        DraftNote.objects.filter(draft=draft).count(),
        SendIntent.objects.filter(draft=draft).count(),
        IntentEvent.objects.filter(draft=draft).count(),
    )


@pytest.mark.parametrize("post", ["approve", "reject", "edit", "note", "take"])
@pytest.mark.parametrize(
    ("change", "status", "said"),
    [
        ("deactivated", 404, "There is nothing here, or it is not yours to see."),
        ("demoted", 403, "Your role does not allow this."),
    ],
)
def test_a_reviewer_removed_with_the_page_open_is_refused_with_a_message_and_nothing_changes(
    tenant_a, tenant_b, member_of, post, change, status, said
):
    reviewer, draft, client = _reviewer_with_open_page(tenant_a, tenant_b, member_of)
    admin = member_of(tenant_a, "admin")
    if change == "deactivated":
        _deactivate(tenant_a, reviewer, admin)()
    else:
        _set_role(tenant_a, reviewer, admin)()
    before = _draft_state(draft)
    url, data = _posts(tenant_a, draft)[post]

    page = client.post(url, data)

    assert page.status_code == status
    assert said in page.content.decode()
    assert _draft_state(draft) == before


@pytest.mark.parametrize("post", ["approve", "note", "take", "edit"])
def test_a_reviewer_removed_while_their_post_is_under_way_is_refused_by_the_service(
    tenant_a, tenant_b, member_of, post
):
    """The request passed the membership check as it began; the deactivation committed before
    its write: the service reads the membership again and refuses, saying why."""
    reviewer, draft, _client = _reviewer_with_open_page(tenant_a, tenant_b, member_of)
    admin = member_of(tenant_a, "admin")
    _deactivate(tenant_a, reviewer, admin)()
    version = draft.versions.get()
    user = reviewer.user
    write = {
        "approve": lambda: intent_services.draft_approve(
            tenant=tenant_a,
            draft_id=draft.pk,
            version=1,
            content_hash=version.content_hash,
            actor=user,
        ),
        "note": lambda: intent_services.draft_note_add(
            tenant=tenant_a, draft_id=draft.pk, author=user, text="a note"
        ),
        "take": lambda: intent_services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=user),
        "edit": lambda: intent_services.draft_add_version(
            tenant=tenant_a,
            draft_id=draft.pk,
            to=["customer@example.com"],
            cc=[],
            bcc=[],
            subject="S",
            text="New",
            html="",
            actor_user=user,
            base_version=1,
        ),
    }[post]
    before = _draft_state(draft)

    with pytest.raises(errors.NoRight) as refused:
        write()

    assert "Viewers" not in refused.value.message
    assert _draft_state(draft) == before


def test_the_admin_is_told_before_taking_away_the_last_approvers_right_what_it_stops(
    tenant_a, member_of
):
    """Found by this probe: the worker blocks a waiting send once its approver lost the right
    (DESIGN.md contract 1, as it should), and a mailbox whose last approver went has nobody to
    decide its drafts; the member page said neither before a lower role or fewer rights were
    saved, nor did the deactivation's confirm page name them (the flash afterwards counts only
    the sends already past their last check)."""
    admin = member_of(tenant_a, "admin", approve_all_mailboxes=False)
    approver = member_of(tenant_a, "approver")
    mailbox = make_local_mailbox(tenant_a)
    drafts = [
        intent_services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["customer@example.com"],
            subject=f"Reply {n}",
            text="Text.",
            actor_user=approver.user,
        )
        for n in range(2)
    ]
    version = drafts[0].versions.get()
    intent_services.draft_approve(
        tenant=tenant_a,
        draft_id=drafts[0].pk,
        version=1,
        content_hash=version.content_hash,
        actor=approver.user,
    )
    client = RoutedClient()
    client.force_login(admin.user, backend="django.contrib.auth.backends.ModelBackend")

    page = client.get(reverse("admin_member", args=[tenant_a.slug, approver.pk])).content.decode()
    confirm = client.get(
        reverse("admin_member_deactivate", args=[tenant_a.slug, approver.pk])
    ).content.decode()

    for text in (page, confirm):
        assert "1 send they approved has not gone out yet" in text
        assert f"Only they may approve drafts of {mailbox.address} (1 waiting)" in text


def test_nothing_is_said_when_someone_else_may_approve_and_nothing_of_theirs_waits(
    tenant_a, member_of
):
    admin = member_of(tenant_a, "admin")
    approver = member_of(tenant_a, "approver")
    mailbox = make_local_mailbox(tenant_a)
    intent_services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["customer@example.com"],
        subject="Reply",
        text="Text.",
        actor_user=approver.user,
    )
    client = RoutedClient()
    client.force_login(admin.user, backend="django.contrib.auth.backends.ModelBackend")

    page = client.get(reverse("admin_member", args=[tenant_a.slug, approver.pk])).content.decode()
    own = client.get(reverse("admin_member", args=[tenant_a.slug, admin.pk])).content.decode()

    assert "data-deciding-impact" not in page
    assert "data-deciding-impact" not in own


def _operator_switches_off(member):
    """What the operators' admin does in its one transaction when an account is switched off:
    the last-admin question under the lock of the tenants' admin memberships
    (``AccountChangeForm.clean``), then the account's save."""

    def switch_off():
        left = onboarding.tenants_left_without_admin(user=member.user, lock=True)
        User.objects.filter(pk=member.user_id).update(is_active=False)
        return left

    return switch_off


def test_an_admin_removing_the_other_while_an_operator_switches_them_off_leaves_one_admin(
    tenant_a, member_of
):
    """The operator's switch-off of Alice holds the admin memberships; Alice's removal of Bob
    waits for it. It used to read Alice's account as its locking statement's snapshot had it,
    enabled, and removed Bob: the tenant had no admin left and nobody was asked."""
    alice, bob = member_of(tenant_a, "admin"), member_of(tenant_a, "admin")
    operator: list = []
    removal: list = []

    with held_open(_operator_switches_off(alice), operator):
        remover = in_thread(_deactivate(tenant_a, bob, alice), removal)
        assert blocked_on_a_lock(), "the removal did not wait for the switch-off"
    remover.join(20)

    assert operator == [[]]  # Bob was an admin still: nobody to ask
    # Refused: Bob is the last admin who can act (Alice's account is off).
    assert isinstance(removal[0], services.AdminError), removal
    assert removal[0].code == "last_admin"
    assert _acting_admins(tenant_a) == [bob.pk]


def test_an_operator_switching_off_an_admin_while_they_remove_the_other_is_asked(
    tenant_a, member_of
):
    """The other order: Alice's removal of Bob commits first, and the operator's question then
    names the tenant (the switch-off reads the accounts and memberships after its lock)."""
    alice, bob = member_of(tenant_a, "admin"), member_of(tenant_a, "admin")
    operator: list = []
    removal: list = []

    def asks():
        with transaction.atomic():
            return onboarding.tenants_left_without_admin(user=alice.user, lock=True)

    with held_open(_deactivate(tenant_a, bob, alice), removal):
        switcher = in_thread(asks, operator)
        assert blocked_on_a_lock(), "the switch-off did not wait for the removal"
    switcher.join(20)

    assert [m.pk for m in removal] == [bob.pk]
    assert [t.pk for t in operator[0]] == [tenant_a.pk]


def _take_away(tenant, reviewer, admin, change):
    if change == "deactivated":
        return services.member_deactivate(
            tenant=tenant, membership_id=reviewer.pk, actor=admin.user
        )
    if change == "demoted":
        return services.member_set_role(
            tenant=tenant, membership_id=reviewer.pk, role="viewer", actor=admin.user
        )
    return services.member_set_mailbox_rights(
        tenant=tenant,
        membership_id=reviewer.pk,
        approve_all_mailboxes=False,
        mailbox_ids=[],
        actor=admin.user,
    )


def _written_while_the_right_is_taken(tenant, mailbox, reviewer, admin, change, write):
    """What ``write`` (run in a thread) ended with, when the mailbox row is held so that it stops
    inside its transaction, after its early check, while ``change`` takes the right and commits."""
    outcome: list = []
    with transaction.atomic():
        list(Mailbox.objects.select_for_update().filter(pk=mailbox.pk))
        writing = in_thread(write, outcome)
        until_done_or_waiting(writing, 1)
        changed: list = []
        changing = in_thread(lambda: _take_away(tenant, reviewer, admin, change), changed)
        changing.join(20)
        assert not isinstance(changed[0], Exception), changed[0]
    writing.join(20)
    return outcome[0]


@pytest.mark.parametrize("change", ["deactivated", "demoted", "rights_removed"])
def test_a_broadcast_posted_while_its_author_loses_the_right_is_refused_and_nothing_is_saved(
    tenant_a, member_of, change
):
    """Found by this probe: a person's broadcast checked their right once, before its upload was
    read (seconds for a large list) and before its transaction; an admin taking the right away
    in between (deactivated, made a viewer, the mailbox's right removed) did not stop it, and a
    broadcast of someone who may not post from the mailbox waited for approval in their name.
    The mailbox row is held here so the post stops inside its transaction, after that check,
    while the change commits."""
    reviewer = member_of(tenant_a, "approver")
    admin = member_of(tenant_a, "admin")
    mailbox = make_local_mailbox(tenant_a)

    outcome = _written_while_the_right_is_taken(
        tenant_a,
        mailbox,
        reviewer,
        admin,
        change,
        lambda: broadcast_create(
            tenant=tenant_a,
            mailbox=mailbox,
            subject="Order {{ order }} is delayed",
            text="Hello {{ name }}",
            recipients=[{"address": "c1@example.com", "variables": {"name": "A", "order": 1}}],
            actor_user=reviewer.user,
        ),
    )

    assert isinstance(outcome, errors.NoRight), outcome
    assert not Broadcast.objects.filter(tenant=tenant_a).exists()
    assert not IntentEvent.objects.filter(tenant=tenant_a).exists()


@pytest.mark.parametrize("change", ["deactivated", "demoted", "rights_removed"])
def test_a_draft_written_while_its_author_loses_the_right_is_refused_and_nothing_is_saved(
    tenant_a, member_of, change
):
    """Found by this probe: ``draft_create`` checked a person's right to write for the mailbox
    before its transaction, then waited there for the mailbox's row; an admin who took the right
    away meanwhile did not stop it, and a draft in the name of someone who may no longer write
    for the mailbox waited in the review queue. The mailbox row is held here so the write stops
    inside its transaction, after that old check, while the change commits."""
    reviewer = member_of(tenant_a, "approver")
    admin = member_of(tenant_a, "admin")
    mailbox = make_local_mailbox(tenant_a)

    outcome = _written_while_the_right_is_taken(
        tenant_a,
        mailbox,
        reviewer,
        admin,
        change,
        lambda: intent_services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["customer@example.com"],
            subject="Your refund",
            text="We refunded your order.",
            actor_user=reviewer.user,
        ),
    )

    assert isinstance(outcome, errors.NoRight), outcome
    assert not Draft.objects.filter(tenant=tenant_a).exists()
    assert not IntentEvent.objects.filter(tenant=tenant_a).exists()
