"""What a receiver's answer asks of the sender (Standard Webhooks, "Retry schedules"): a 410 Gone
says it wants no more events, so the endpoint is disabled at once, not posted to for a day; a
Retry-After (on a 429 or a 503) is honoured as the earliest next attempt, up to an hour, so a
hostile receiver cannot push its retries out past the day after which it is disabled."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime

import pytest

from config.clock import db_now
from intents.events.delivery import RETRY_AFTER_MAX, deliver_due
from intents.models import AgentEventDelivery, AgentEventEndpoint
from intents.services.event_endpoints import endpoint_enable
from tenants.models import AuditEvent
from tests.intents.events.test_delivery import reject_drafts


@pytest.mark.django_db(transaction=True)
def test_a_410_gone_disables_the_endpoint_at_once_and_its_events_wait_for_it_to_be_enabled(
    tenant_a, member_of, settings, receiver, subscribe
):
    settings.AGENT_EVENTS_RETRY_DELAYS = [0.0] * 8
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    endpoint = subscribe(tenant_a, receiver, types=["draft.rejected"])
    receiver.fail_next, receiver.fail_status = 1, 410
    drafts = reject_drafts(tenant_a, approver, 2)

    attempts = deliver_due()
    endpoint.refresh_from_db()
    waiting = list(AgentEventDelivery.objects.order_by("id").values_list("status", "attempts"))
    endpoint_enable(tenant=tenant_a, endpoint_id=endpoint.pk, actor=admin)
    after = deliver_due()

    assert attempts == 1
    assert (endpoint.enabled, endpoint.disabled_automatically, endpoint.disabled_reason) == (
        False,
        True,
        "HTTP 410",
    )
    assert endpoint.disabled_as_gone
    assert waiting == [("pending", 1), ("pending", 0)]
    assert AuditEvent.objects.filter(action="agent_events.endpoint_gone").count() == 1
    assert after == 2
    assert [e["data"]["draft"]["id"] for e in receiver.accepted] == drafts


def _in_a_minute() -> str:
    return format_datetime(db_now() + timedelta(seconds=60), usegmt=True)


@pytest.mark.parametrize(
    ("status", "retry_after", "least", "most"),
    [
        (429, "60", 50, 70),
        (503, "in a minute", 50, 70),
        (429, "99999999999999999999", RETRY_AFTER_MAX - 10, RETRY_AFTER_MAX + 10),
        # Leading zeros are digits of the same number (RFC 9110 delay-seconds is 1*DIGIT): read
        # from its first 12 characters, this was 3 s.
        (429, "0000000000003600", RETRY_AFTER_MAX - 10, RETRY_AFTER_MAX + 10),
        (429, "soon", -5, 5),
        (429, "-30", -5, 5),
        (500, "", -5, 5),
    ],
)
@pytest.mark.django_db(transaction=True)
def test_retry_after_is_the_earliest_next_attempt_up_to_an_hour(
    tenant_a, member_of, settings, receiver, subscribe, status, retry_after, least, most
):
    settings.AGENT_EVENTS_RETRY_DELAYS = [0.0] * 8
    approver = member_of(tenant_a, "approver").user
    subscribe(tenant_a, receiver, types=["draft.rejected"])
    value = _in_a_minute() if retry_after == "in a minute" else retry_after
    receiver.fail_next, receiver.fail_status = 1, status
    receiver.fail_headers = {"Retry-After": value} if value else {}
    reject_drafts(tenant_a, approver, 1)

    first = deliver_due(limit=1)
    delivery = AgentEventDelivery.objects.get()
    wait = (delivery.next_attempt_at - db_now()).total_seconds()

    assert first == 1
    assert (delivery.status, delivery.last_status_code) == ("pending", status)
    assert least <= wait <= most
    assert AgentEventEndpoint.objects.get().enabled
