"""An outsider's probe of the admin console as two admins of one tenant see it at the same moment:
each acts from a page opened before the other's action."""

import pytest
from django.contrib.messages import get_messages
from django.db import transaction

from console import services as console_services
from intents.models import AgentEvent, AgentEventDelivery, AgentEventEndpoint
from intents.services import event_endpoints
from tenants.models import AuditEvent
from tenants.services import AdminError
from tenants.tokens import token_create
from tests.intents.helpers import in_thread, until_done_or_waiting
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db

EVENTS = "/t/tenant-a/admin/agent-events/"


def _client(user):
    client = RoutedClient()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return client


@pytest.fixture
def failed_delivery(tenant_a, member_of):
    """(the delivery, the clients of two admins of tenant A): an event the endpoint never took."""
    alice, bob = member_of(tenant_a, "admin").user, member_of(tenant_a, "admin").user
    endpoint, _secret = event_endpoints.endpoint_create(
        tenant=tenant_a,
        url="https://a.example.com/hook",
        event_types=["draft.approved"],
        actor=alice,
    )
    event = AgentEvent.objects.create(
        tenant=tenant_a, public_id="evt_a_1", type="draft.approved", payload={}
    )
    delivery = AgentEventDelivery.objects.create(
        tenant=tenant_a, endpoint=endpoint, event=event, status="failed"
    )
    return delivery, _client(alice), _client(bob)


def test_a_delivery_resent_by_one_admin_is_not_queued_again_by_the_other(failed_delivery):
    """Found by this probe: both admins' pages offered Resend for the failed delivery; each
    click queued the event again, so the receiver got it twice more (and as often again as the
    button was pressed while the first resend waited). The second is told it is already queued
    again, and queues nothing."""
    delivery, alice, bob = failed_delivery

    first = alice.post(f"{EVENTS}deliveries/{delivery.pk}/resend/")
    second = bob.post(f"{EVENTS}deliveries/{delivery.pk}/resend/")

    said = [str(m) for m in get_messages(second.wsgi_request)]
    assert (first.status_code, second.status_code) == (302, 302)
    assert AgentEventDelivery.objects.filter(resend_of=delivery).count() == 1
    assert said == ["This event is already queued again for this endpoint; it goes out once."]
    assert AuditEvent.objects.filter(action="agent_events.delivery_resent").count() == 1


def test_a_delivery_may_be_resent_again_once_its_resend_finished(failed_delivery):
    delivery, alice, bob = failed_delivery
    alice.post(f"{EVENTS}deliveries/{delivery.pk}/resend/")
    AgentEventDelivery.objects.filter(resend_of=delivery).update(status="failed")

    again = bob.post(f"{EVENTS}deliveries/{delivery.pk}/resend/")

    assert again.status_code == 302
    assert AgentEventDelivery.objects.filter(resend_of=delivery).count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_resends_of_one_delivery_at_once_queue_it_once(tenant_a, member_of):
    """Both wait on the endpoint's row, which the test holds while they start; one queues the
    event, the other is refused."""
    alice, bob = member_of(tenant_a, "admin").user, member_of(tenant_a, "admin").user
    endpoint, _secret = event_endpoints.endpoint_create(
        tenant=tenant_a,
        url="https://a.example.com/hook",
        event_types=["draft.approved"],
        actor=alice,
    )
    event = AgentEvent.objects.create(
        tenant=tenant_a, public_id="evt_a_2", type="draft.approved", payload={}
    )
    delivery = AgentEventDelivery.objects.create(
        tenant=tenant_a, endpoint=endpoint, event=event, status="failed"
    )
    outcomes: list[list] = [[], []]
    threads = []
    with transaction.atomic():
        AgentEventEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        for n, (actor, outcome) in enumerate(zip((alice, bob), outcomes, strict=True)):
            threads.append(
                in_thread(
                    lambda actor=actor: event_endpoints.delivery_resend(
                        tenant=tenant_a, delivery_id=delivery.pk, actor=actor
                    ),
                    outcome,
                )
            )
            until_done_or_waiting(threads[-1], n + 1)
    for thread in threads:
        thread.join(20)

    refused = [o[0].code for o in outcomes if isinstance(o[0], AdminError)]
    assert refused == ["already_queued"]
    assert AgentEventDelivery.objects.filter(resend_of=delivery).count() == 1


@pytest.fixture
def suppressed(tenant_a, member_of):
    """(the suppression, the clients of two admins of tenant A)."""
    alice, bob = member_of(tenant_a, "admin").user, member_of(tenant_a, "admin").user
    stopped = console_services.suppression_add(
        tenant=tenant_a, address="gone@example.com", note="asked us to stop", actor=alice
    )
    return stopped.changed, _client(alice), _client(bob)


def test_an_address_removed_by_one_admin_is_said_so_to_the_other(suppressed):
    """Found by this probe: both admins' lists offered Remove for the address; the second, with
    the reason typed, got a bare 404 page, as if the address had never been listed, where the
    service had the words for it."""
    suppression, alice, bob = suppressed
    url = f"/t/tenant-a/admin/suppressions/{suppression.pk}/remove/"

    first = alice.post(url, {"reason": "they wrote to us again"})
    second = bob.post(url, {"reason": "customer asked"})

    said = [str(m) for m in get_messages(second.wsgi_request)]
    assert (first.status_code, second.status_code) == (302, 302)
    assert said == [
        "gone@example.com was removed from the suppression list already; nothing was changed."
    ]
    assert AuditEvent.objects.filter(action="suppression.removed").count() == 1


def test_an_address_never_listed_or_another_tenants_is_still_a_404(suppressed, tenant_b, member_of):
    suppression, alice, _bob = suppressed
    admin_b = member_of(tenant_b, "admin").user
    other = console_services.suppression_add(
        tenant=tenant_b, address="b@example.com", note="b's", actor=admin_b
    ).changed
    console_services.suppression_remove(
        tenant=tenant_b, suppression_id=other.pk, reason="b's", actor=admin_b
    )
    base = "/t/tenant-a/admin/suppressions/"

    missing = alice.post(f"{base}{suppression.pk + 100}/remove/", {"reason": "x"})
    foreign = alice.post(f"{base}{other.pk}/remove/", {"reason": "x"})

    assert (missing.status_code, foreign.status_code) == (404, 404)


def test_a_token_revoked_by_one_admin_is_said_so_to_the_other(tenant_a, member_of):
    """Found by this probe: the token list opened before showed Revoke…; its question page for
    the token another admin had revoked meanwhile was a bare 404, as if it had never existed. It
    is the list again, saying so, as a member already deactivated is their page again."""
    alice, bob = member_of(tenant_a, "admin").user, member_of(tenant_a, "admin").user
    token, _plaintext = token_create(
        tenant=tenant_a, name="agent", scopes=["drafts:write"], actor=alice
    )
    url = f"/t/tenant-a/admin/tokens/{token.pk}/revoke/"
    _client(alice).post(url)

    question = _client(bob).get(url)

    said = [str(m) for m in get_messages(question.wsgi_request)]
    assert (question.status_code, question["Location"]) == (302, "/t/tenant-a/admin/tokens/")
    assert said == ["This token is already revoked."]
