"""An outsider's probe of people's writes, and agents', while a tenant is suspended or a mailbox
disabled in the middle of the request: the request read the tenant and the mailbox before its
transaction, and the change commits while it waits. Real concurrent transactions, each thread on
its own connection.

Approvals are not probed here: they take the births lock before reading anything, which every
change that stops sends holds (tests/intents/sending/test_stops.py)."""

from __future__ import annotations

import pytest
from django.db import transaction

from intents import errors, services
from intents.models import Broadcast, Draft, DraftNote, DraftVersion
from intents.services.broadcasts import broadcast_approve, broadcast_create, broadcast_reject
from mailboxes.models import Mailbox
from mailboxes.provisioning import mailbox_set_status
from tenants.onboarding import tenant_suspend
from tenants.tokens import token_create
from tests.factories import approve_new_draft
from tests.intents.helpers import blocked_on_a_lock, in_thread, set_state

pytestmark = pytest.mark.django_db(transaction=True)


def _while_committing(change, write) -> list:
    """``write`` run in a thread while ``change`` runs, uncommitted, in this one: the write reads
    the tenant and the mailbox as they were, then its transaction meets the change's locks. The
    write's result, or the refusal it got."""
    outcome: list = []
    with transaction.atomic():
        change()
        writer = in_thread(write, outcome)
        assert blocked_on_a_lock(), "the write never waited for the change in flight"
    writer.join(30)
    return outcome


def _suspend(tenant):
    return lambda: tenant_suspend(slug=tenant.slug, reason="Unpaid invoices")


def _new_draft(tenant, mailbox, approver, agent_token=None):
    who = {"agent_token": agent_token} if agent_token else {"actor_user": approver}
    return services.draft_create(
        tenant=tenant, mailbox=mailbox, to=["customer@example.com"], subject="Hi", text="x", **who
    )


def _agent_token(tenant, admin):
    token, _plaintext = token_create(
        tenant=tenant, name="agent", scopes=["drafts:write"], actor=admin
    )
    return token


@pytest.mark.parametrize("by", ["person", "agent"])
def test_a_draft_posted_while_its_mailbox_is_disabled_is_refused(
    tenant_a, local_mailbox, approver, member_of, by
):
    """Found by this probe: the mailbox was read active before the transaction; its draft's
    insert then waited for the disable in flight (the foreign key's lock on the mailbox) and
    went in after it committed: 201 for a draft of a mailbox disabled before it was written."""
    admin = member_of(tenant_a, "admin").user
    token = _agent_token(tenant_a, admin) if by == "agent" else None

    outcome = _while_committing(
        lambda: mailbox_set_status(
            tenant=tenant_a, mailbox_id=local_mailbox.pk, status="disabled", actor=admin
        ),
        lambda: _new_draft(tenant_a, local_mailbox, approver, token),
    )

    assert [type(r) for r in outcome] == [errors.MailboxInactive]
    assert not Draft.objects.exists()


def test_a_draft_posted_to_an_auto_assigning_mailbox_being_disabled_is_refused(
    tenant_a, local_mailbox, approver, member_of
):
    """The same with auto-assignment on, whose turn-taking locks the mailbox's row."""
    Mailbox.objects.filter(pk=local_mailbox.pk).update(auto_assign=True)
    local_mailbox.refresh_from_db()
    admin = member_of(tenant_a, "admin").user

    outcome = _while_committing(
        lambda: mailbox_set_status(
            tenant=tenant_a, mailbox_id=local_mailbox.pk, status="disabled", actor=admin
        ),
        lambda: _new_draft(tenant_a, local_mailbox, approver),
    )

    assert [type(r) for r in outcome] == [errors.MailboxInactive]
    assert not Draft.objects.exists()


def _reject(tenant, draft, person):
    return services.draft_reject(
        tenant=tenant, draft_id=draft.pk, reason="Wrong tone", actor=person
    )


def _edit(tenant, draft, person):
    return services.draft_add_version(
        tenant=tenant,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Hi",
        text="Better",
        html="",
        actor_user=person,
        base_version=1,
    )


def _withdraw(tenant, draft, person):
    return services.draft_withdraw(tenant=tenant, draft_id=draft.pk, actor_user=person)


def _note(tenant, draft, person):
    return services.draft_note_add(tenant=tenant, draft_id=draft.pk, author=person, text="Hm")


def _take(tenant, draft, person):
    return services.draft_take(tenant=tenant, draft_id=draft.pk, actor=person)


@pytest.mark.parametrize("write", [_reject, _edit, _withdraw, _note, _take])
def test_a_persons_write_during_a_suspension_waits_for_it_and_is_refused(
    tenant_a, local_mailbox, approver, member_of, write
):
    """Found by this probe: a person's write read the tenant active before its transaction,
    then waited (for the suspension's row lock, at its journal row's foreign key) and went in
    after the suspension committed: a draft rejected, edited, withdrawn, noted or taken in a
    tenant suspended before it, answered as done. An agent's write is refused there since
    1f1d053; a person's now too."""
    draft = _new_draft(tenant_a, local_mailbox, approver)
    colleague = member_of(tenant_a, "approver").user

    outcome = _while_committing(_suspend(tenant_a), lambda: write(tenant_a, draft, colleague))

    assert [type(r) for r in outcome] == [errors.TenantInactive]
    draft.refresh_from_db()
    assert (draft.status, draft.current_version, draft.assignee_id) == ("pending", 1, None)
    assert DraftVersion.objects.filter(draft=draft).count() == 1
    assert not DraftNote.objects.exists()


def test_a_persons_draft_during_a_suspension_is_refused(tenant_a, local_mailbox, approver):
    outcome = _while_committing(
        _suspend(tenant_a), lambda: _new_draft(tenant_a, local_mailbox, approver)
    )

    assert [type(r) for r in outcome] == [errors.TenantInactive]
    assert not Draft.objects.exists()


def _broadcast(tenant, mailbox, **who):
    return broadcast_create(
        tenant=tenant,
        mailbox=mailbox,
        subject="Order {{ order }} is delayed",
        text="Hello {{ name }}",
        recipients=[{"address": "customer@example.com", "variables": {"name": "Ana", "order": 1}}],
        **who,
    )


def _while_broadcast_held(broadcast, change, write) -> list:
    """``write`` run while this thread holds the broadcast's row (a colleague's action on it);
    ``change`` commits in a third thread meanwhile; then the row is let go. The write's result,
    or the refusal it got."""
    outcome: list = []
    with transaction.atomic():
        Broadcast.objects.select_for_update().filter(pk=broadcast.pk).values_list("pk").first()
        writer = in_thread(write, outcome)
        assert blocked_on_a_lock(), "the write never reached the broadcast's row"
        changed: list = []
        in_thread(change, changed).join(30)
        assert changed and not isinstance(changed[0], Exception), changed
    writer.join(30)
    return outcome


def _disable(tenant, mailbox, admin):
    return lambda: mailbox_set_status(
        tenant=tenant, mailbox_id=mailbox.pk, status="disabled", actor=admin
    )


@pytest.mark.parametrize(("change", "refusal"), [("suspend", "tenant"), ("disable", "mailbox")])
def test_a_broadcast_approved_while_a_change_commits_is_refused(
    tenant_a, local_mailbox, approver, member_of, change, refusal
):
    """Found by this probe: the approval read the tenant before its transaction and the mailbox
    with the broadcast's row, in the statement that then waited for that row; a suspension or a
    disable committed during the wait and the broadcast was approved after it (200), to fan out
    and send once the tenant is resumed or the mailbox enabled again."""
    admin = member_of(tenant_a, "admin").user
    broadcast = _broadcast(tenant_a, local_mailbox)
    changes = {"suspend": _suspend(tenant_a), "disable": _disable(tenant_a, local_mailbox, admin)}
    refusals = {"tenant": errors.TenantInactive, "mailbox": errors.MailboxInactive}

    outcome = _while_broadcast_held(
        broadcast,
        changes[change],
        lambda: broadcast_approve(
            tenant=tenant_a,
            broadcast_id=broadcast.pk,
            content_hash=broadcast.content_hash,
            actor=approver,
        ),
    )

    assert [type(r) for r in outcome] == [refusals[refusal]]
    broadcast.refresh_from_db()
    assert broadcast.state == Broadcast.State.PENDING_REVIEW


def test_a_broadcast_rejected_while_its_tenant_is_suspended_is_refused(
    tenant_a, local_mailbox, approver
):
    broadcast = _broadcast(tenant_a, local_mailbox)

    outcome = _while_broadcast_held(
        broadcast,
        _suspend(tenant_a),
        lambda: broadcast_reject(
            tenant=tenant_a, broadcast_id=broadcast.pk, actor=approver, reason="No"
        ),
    )

    assert [type(r) for r in outcome] == [errors.TenantInactive]
    broadcast.refresh_from_db()
    assert broadcast.state == Broadcast.State.PENDING_REVIEW


@pytest.mark.parametrize(("change", "refusal"), [("suspend", "tenant"), ("disable", "mailbox")])
def test_a_persons_broadcast_posted_while_a_change_commits_is_refused(
    tenant_a, local_mailbox, approver, member_of, change, refusal
):
    admin = member_of(tenant_a, "admin").user
    changes = {"suspend": _suspend(tenant_a), "disable": _disable(tenant_a, local_mailbox, admin)}
    refusals = {"tenant": errors.TenantInactive, "mailbox": errors.MailboxInactive}

    outcome = _while_committing(
        changes[change], lambda: _broadcast(tenant_a, local_mailbox, actor_user=approver)
    )

    assert [type(r) for r in outcome] == [refusals[refusal]]
    assert not Broadcast.objects.exists()


@pytest.mark.parametrize(("change", "refusal"), [("suspend", "tenant"), ("disable", "mailbox")])
def test_a_draft_reopened_while_a_change_commits_is_refused(
    tenant_a, local_mailbox, approver, member_of, change, refusal
):
    """Found by this probe: re-approval read the tenant before its transaction and the mailbox
    with the draft's row, in the statement that waited for that row; a suspension or a disable
    committed during the wait, and the draft went back to review (200) in the suspended tenant
    or the disabled mailbox."""
    admin = member_of(tenant_a, "admin").user
    intent = approve_new_draft(tenant_a, local_mailbox, approver)
    set_state(intent, "failed")
    changes = {"suspend": _suspend(tenant_a), "disable": _disable(tenant_a, local_mailbox, admin)}
    refusals = {"tenant": errors.TenantInactive, "mailbox": errors.MailboxInactive}
    outcome: list = []

    with transaction.atomic():
        Draft.objects.select_for_update().filter(pk=intent.draft_id).values_list("pk").first()
        writer = in_thread(
            lambda: services.draft_reopen(
                tenant=tenant_a, draft_id=intent.draft_id, actor=approver, reason="Send it again"
            ),
            outcome,
        )
        assert blocked_on_a_lock(), "the reopen never reached the draft's row"
        changed: list = []
        in_thread(changes[change], changed).join(30)
        assert changed and not isinstance(changed[0], Exception), changed
    writer.join(30)

    assert [type(r) for r in outcome] == [refusals[refusal]]
    draft = Draft.objects.get(pk=intent.draft_id)
    assert (draft.status, draft.current_version) == ("approved", 1)


@pytest.mark.parametrize("move", ["hand", "release"])
def test_a_held_draft_handed_or_released_during_a_suspension_is_refused(
    tenant_a, local_mailbox, approver, member_of, move
):
    draft = _new_draft(tenant_a, local_mailbox, approver)
    holder = member_of(tenant_a, "approver").user
    services.draft_take(tenant=tenant_a, draft_id=draft.pk, actor=holder)

    def write():
        if move == "hand":
            return services.draft_hand(
                tenant=tenant_a, draft_id=draft.pk, actor=holder, to_user=approver
            )
        return services.draft_release(tenant=tenant_a, draft_id=draft.pk, actor=holder)

    outcome = _while_committing(_suspend(tenant_a), write)

    assert [type(r) for r in outcome] == [errors.TenantInactive]
    draft.refresh_from_db()
    assert draft.assignee_id == holder.pk
