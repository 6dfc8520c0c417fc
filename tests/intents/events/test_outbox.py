"""The outbox: an event exactly when its state change commits, only to the endpoints of the
draft's tenant (and mailbox, when filtered), none for a replayed or repeated provider webhook,
none for a change that rolled back; two racing rejections write one event. The webhook side
(a replayed bounce emits nothing) is tests/webhooks/test_agent_events.py."""

from __future__ import annotations

import importlib
import threading
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.db import connection, transaction

from config.clock import db_now
from intents import errors
from intents import services as intent_services
from intents.models import AgentEvent, AgentEventDelivery, Draft, EventType, SendIntent
from intents.sending.sweep import intents_expire_not_after
from intents.services.event_endpoints import endpoint_create, endpoint_disable
from intents.services.intents import intent_cancel
from intents.services.undo import intent_undo
from tenants.models import Tenant
from tenants.tokens import token_create
from tests.factories import make_local_mailbox

NEW_EVENTS_MIGRATION = importlib.import_module(
    "intents.migrations.0024_agent_events_reopened_cancelled_expired"
)
NEW_EVENTS = NEW_EVENTS_MIGRATION.ADDED


def endpoint(tenant, admin, url="https://a.example.com/", **kwargs):
    kwargs.setdefault("event_types", ["draft.rejected", "send.bounced", "send.delivered"])
    created, _ = endpoint_create(tenant=tenant, url=url, actor=admin, **kwargs)
    return created


def pending_draft(tenant, mailbox, author, **extra):
    return intent_services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=author,
        **extra,
    )


def rejection(tenant, mailbox, approver, reason="No"):
    draft = pending_draft(tenant, mailbox, approver)
    return intent_services.draft_reject(
        tenant=tenant, draft_id=draft.pk, reason=reason, actor=approver
    )


@pytest.mark.django_db
def test_events_of_tenant_b_never_go_to_tenant_a(tenant_a, tenant_b, member_of):
    a = endpoint(tenant_a, member_of(tenant_a, "admin").user)
    b = endpoint(tenant_b, member_of(tenant_b, "admin").user)
    approver_b = member_of(tenant_b, "approver").user

    draft = rejection(tenant_b, make_local_mailbox(tenant_b), approver_b)

    assert list(AgentEventDelivery.objects.values_list("endpoint_id", "tenant_id")) == [
        (b.pk, tenant_b.pk)
    ]
    assert a.deliveries.count() == 0
    event = AgentEvent.objects.get()
    assert (event.tenant_id, event.draft_id, event.payload["reason"]) == (
        tenant_b.pk,
        draft.pk,
        "No",
    )


@pytest.mark.django_db
def test_the_mailbox_filter_and_the_event_types_are_respected(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    support = make_local_mailbox(tenant_a, username="support")
    billing = make_local_mailbox(tenant_a, username="billing")
    only_billing = endpoint(tenant_a, admin, mailbox_id=billing.pk)
    only_approvals = endpoint(tenant_a, admin, event_types=["draft.approved"])

    rejection(tenant_a, support, approver)
    on_billing = rejection(tenant_a, billing, approver)

    assert [d.event.draft_id for d in only_billing.deliveries.all()] == [on_billing.pk]
    assert only_approvals.deliveries.count() == 0
    assert AgentEvent.objects.count() == 1


@pytest.mark.django_db
def test_a_disabled_endpoint_gets_nothing_and_no_endpoint_means_no_event(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    mailbox = make_local_mailbox(tenant_a)

    rejection(tenant_a, mailbox, approver)
    off = endpoint(tenant_a, admin)
    endpoint_disable(tenant=tenant_a, endpoint_id=off.pk, actor=admin)
    rejection(tenant_a, mailbox, approver)

    assert (AgentEvent.objects.count(), AgentEventDelivery.objects.count()) == (0, 0)


@pytest.mark.django_db
def test_a_change_that_rolls_back_leaves_no_event(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    endpoint(tenant_a, admin)
    mailbox = make_local_mailbox(tenant_a)

    with pytest.raises(RuntimeError), transaction.atomic():
        rejection(tenant_a, mailbox, approver)
        raise RuntimeError("the caller's transaction fails after the rejection")

    assert (AgentEvent.objects.count(), AgentEventDelivery.objects.count()) == (0, 0)


@pytest.mark.django_db(transaction=True)
def test_two_racing_rejections_write_one_event(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    endpoint(tenant_a, admin)
    draft = pending_draft(tenant_a, make_local_mailbox(tenant_a), approver)
    barrier = threading.Barrier(4)
    outcomes: list[str] = []

    def reject():
        barrier.wait()
        try:
            intent_services.draft_reject(
                tenant=tenant_a, draft_id=draft.pk, reason="No", actor=approver
            )
            outcomes.append("rejected")
        except errors.NotPending:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=reject) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(outcomes) == ["refused", "refused", "refused", "rejected"]
    assert AgentEvent.objects.filter(type="draft.rejected").count() == 1


def approved_agent_draft(tenant, mailbox, approver, admin, *, not_after=None):
    """An agent's draft that a person approved: (draft, intent)."""
    token, _ = token_create(tenant=tenant, name="agent", scopes=["drafts:write"], actor=admin)
    draft = pending_draft(tenant, mailbox, None, agent_token=token, not_after=not_after)
    intent = intent_services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=1,
        content_hash=draft.versions.get(number=1).content_hash,
        actor=approver,
    )
    return draft, intent


def told(*types):
    return [
        (e.type, e.payload["draft"]["version"], e.payload["draft"]["status"], e.payload["code"])
        for e in AgentEvent.objects.filter(type__in=types).order_by("id")
    ]


@pytest.mark.django_db
def test_a_cancelled_send_and_its_reopened_draft_tell_the_agent(tenant_a, member_of):
    """An agent told draft.approved heard nothing more when a person cancelled the send and
    reopened the draft: it waited for a send that never came, and never learnt that the draft
    was pending again (as version 2, the base_version to revise from)."""
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    endpoint(tenant_a, admin, event_types=["send.cancelled", "draft.reopened"])
    draft, intent = approved_agent_draft(tenant_a, make_local_mailbox(tenant_a), approver, admin)

    intent_cancel(tenant=tenant_a, intent_id=intent.pk, actor=approver, reason="Wrong order")
    intent_services.draft_reopen(
        tenant=tenant_a, draft_id=draft.pk, actor=approver, reason="Needs the new address"
    )

    assert told("send.cancelled", "draft.reopened") == [
        ("send.cancelled", 1, "approved", "cancelled"),
        ("draft.reopened", 2, "pending", "reopened"),
    ]
    cancelled, reopened = (e.payload for e in AgentEvent.objects.order_by("id"))
    assert cancelled["intent"] == reopened["intent"] == {"id": intent.pk, "state": "cancelled"}
    assert (cancelled["reason"], reopened["reason"]) == ("Wrong order", "Needs the new address")


@pytest.mark.django_db
def test_an_undone_approval_tells_the_agent_its_draft_is_pending_again(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    Tenant.objects.filter(pk=tenant_a.pk).update(send_hold_seconds=60)
    tenant_a.refresh_from_db()
    endpoint(tenant_a, admin, event_types=EventType.values)
    _, intent = approved_agent_draft(tenant_a, make_local_mailbox(tenant_a), approver, admin)

    intent_undo(tenant=tenant_a, intent_id=intent.pk, actor=approver)

    # One event for one change: the undo's send.cancelled would say the same thing again.
    assert told("draft.reopened", "send.cancelled") == [
        ("draft.reopened", 2, "pending", "approval_undone")
    ]


@pytest.mark.django_db
def test_a_reopened_draft_whose_earlier_send_is_proven_sent_tells_the_agent_it_is_closed(
    tenant_a, member_of
):
    """The agent was told draft.reopened (pending, version 2, revise from there); a person then
    proved the earlier send went out. The agent's send.accepted says the draft is approved again
    on the version that was sent, not pending on a version nobody can approve any more."""
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    endpoint(tenant_a, admin, event_types=EventType.values)
    draft, intent = approved_agent_draft(tenant_a, make_local_mailbox(tenant_a), approver, admin)
    SendIntent.objects.filter(pk=intent.pk).update(state="needs_attention")
    intent_services.draft_reopen(tenant=tenant_a, draft_id=draft.pk, actor=approver, reason="r")

    intent_services.intent_resolve_accepted(
        tenant=tenant_a,
        intent_id=intent.pk,
        actor=approver,
        provider_message_id="<found@agentmail.test>",
        evidence="the customer's copy",
    )

    [accepted] = AgentEvent.objects.filter(type="send.accepted")
    assert accepted.payload["draft"]["status"] == "approved"
    assert accepted.payload["draft"]["version"] == 1
    assert accepted.payload["intent"] == {"id": intent.pk, "state": "accepted"}


@pytest.mark.django_db
def test_a_send_past_its_send_by_time_tells_the_agent(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    endpoint(tenant_a, admin, event_types=["send.expired"])
    _, intent = approved_agent_draft(
        tenant_a,
        make_local_mailbox(tenant_a),
        approver,
        admin,
        not_after=db_now() + timedelta(hours=1),
    )
    # The hour passes before a worker takes the send.
    SendIntent.objects.filter(pk=intent.pk).update(not_after=db_now() - timedelta(seconds=1))

    assert intents_expire_not_after() == 1
    assert told("send.expired") == [("send.expired", 1, "approved", "not_after_passed")]


@pytest.mark.django_db
def test_endpoints_that_took_every_event_take_the_new_ones_too(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    earlier = [t for t in EventType.values if t not in NEW_EVENTS]
    every = endpoint(tenant_a, admin, event_types=earlier)
    some = endpoint(tenant_a, admin, url="https://b.example.com/", event_types=["draft.rejected"])

    NEW_EVENTS_MIGRATION.subscribe_all_to_the_new_events(django_apps, None)

    every.refresh_from_db()
    some.refresh_from_db()
    assert (sorted(every.event_types), some.event_types) == (
        sorted(EventType.values),
        ["draft.rejected"],
    )


@pytest.mark.django_db
def test_a_rejected_or_expired_draft_tells_the_agent_why_by_code(tenant_a, member_of):
    """The README says these events carry a code to branch on; they carried an empty one."""
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    endpoint(tenant_a, admin, event_types=["draft.rejected", "draft.expired"])
    mailbox = make_local_mailbox(tenant_a)
    rejection(tenant_a, mailbox, approver, reason="Wrong customer")
    late = pending_draft(tenant_a, mailbox, approver, not_after=db_now() + timedelta(hours=1))
    Draft.objects.filter(pk=late.pk).update(not_after=db_now() - timedelta(seconds=1))

    assert intent_services.draft_expire_due() == 1
    assert told("draft.rejected", "draft.expired") == [
        ("draft.rejected", 1, "rejected", "rejected"),
        ("draft.expired", 1, "expired", "not_after_passed"),
    ]
