"""The outbox: an event exactly when its state change commits, only to the endpoints of the
draft's tenant (and mailbox, when filtered), none for a replayed or repeated provider webhook,
none for a change that rolled back; two racing rejections write one event. The webhook side
(a replayed bounce emits nothing) is tests/webhooks/test_agent_events.py."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from intents import errors
from intents import services as intent_services
from intents.models import AgentEvent, AgentEventDelivery
from intents.services.event_endpoints import endpoint_create, endpoint_disable
from tests.factories import make_local_mailbox


def endpoint(tenant, admin, url="https://a.example.com/", **kwargs):
    kwargs.setdefault("event_types", ["draft.rejected", "send.bounced", "send.delivered"])
    created, _ = endpoint_create(tenant=tenant, url=url, actor=admin, **kwargs)
    return created


def rejection(tenant, mailbox, approver, reason="No"):
    draft = intent_services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
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
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
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
