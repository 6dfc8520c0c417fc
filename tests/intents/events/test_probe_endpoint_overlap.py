"""An outside probe of endpoint registration: one URL registered for every mailbox and again for
one of them (either way round) took that mailbox's events twice. Each copy carries the same
``webhook-id`` but is signed with its own endpoint's secret, and a receiver keeps one secret per
URL: it refused one copy of every event for a day until that endpoint was switched off
automatically (the double-click case of the same defect is tests/console/test_views_events.py)."""

from __future__ import annotations

import pytest

from intents import services as intent_services
from intents.events.delivery import deliver_due
from intents.models import AgentEventDelivery, AgentEventEndpoint
from intents.services.event_endpoints import endpoint_create
from tenants.services import AdminError
from tests.factories import make_local_mailbox


def _register(tenant, admin, url, mailbox=None, types=("draft.rejected",)):
    return endpoint_create(
        tenant=tenant,
        url=url,
        event_types=list(types),
        mailbox_id=mailbox.pk if mailbox else None,
        actor=admin,
    )


@pytest.mark.django_db
@pytest.mark.parametrize("every_mailbox_first", [True, False])
def test_a_url_taking_every_mailbox_is_not_registered_again_for_one_of_them(
    tenant_a, member_of, every_mailbox_first
):
    admin = member_of(tenant_a, "admin").user
    billing = make_local_mailbox(tenant_a, username="billing")
    url = "https://agent.example.com/hooks"
    first, second = (None, billing) if every_mailbox_first else (billing, None)
    _register(tenant_a, admin, url, first)

    with pytest.raises(AdminError) as refused:
        _register(tenant_a, admin, url, second)

    assert (refused.value.code, refused.value.field) == ("duplicate_endpoint", "url")
    assert AgentEventEndpoint.objects.filter(url=url).count() == 1


@pytest.mark.django_db
def test_other_events_of_that_mailbox_may_still_go_to_the_url(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    billing = make_local_mailbox(tenant_a, username="billing")
    url = "https://agent.example.com/hooks"
    _register(tenant_a, admin, url)

    _register(tenant_a, admin, url, billing, types=("draft.approved",))

    assert AgentEventEndpoint.objects.filter(url=url).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_mailboxs_event_reaches_a_url_once_signed_with_the_secret_it_was_shown(
    tenant_a, member_of, receiver, subscribe
):
    admin = member_of(tenant_a, "admin").user
    approver = member_of(tenant_a, "approver").user
    billing = make_local_mailbox(tenant_a, username="billing")
    subscribe(tenant_a, receiver, types=["draft.rejected"])
    with pytest.raises(AdminError):
        _register(tenant_a, admin, receiver.url, billing)
    draft = intent_services.draft_create(
        tenant=tenant_a,
        mailbox=billing,
        to=["jane@customer.test"],
        subject="Hi",
        text="Hello",
        actor_user=approver,
    )
    intent_services.draft_reject(tenant=tenant_a, draft_id=draft.pk, reason="No", actor=approver)

    deliver_due()

    assert AgentEventDelivery.objects.count() == 1
    assert [e["data"]["draft"]["id"] for e in receiver.accepted] == [draft.pk]
    assert receiver.refused == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "again",
    [
        "https://Agent.Example.COM/hooks",
        "https://agent.example.com:443/hooks",
        "HTTPS://agent.example.com/hooks",
        "https://agent.example.com./hooks",
    ],
)
def test_the_same_receiver_spelled_otherwise_is_not_registered_again(tenant_a, member_of, again):
    """One receiver, its host in capitals, its default port written out, or its name ending in
    the root's dot: the same URL to every HTTP client, and each copy of an event signed with a
    secret of its own, as above."""
    admin = member_of(tenant_a, "admin").user
    _register(tenant_a, admin, "https://agent.example.com/hooks")

    with pytest.raises(AdminError) as refused:
        _register(tenant_a, admin, again)

    assert (refused.value.code, refused.value.field) == ("duplicate_endpoint", "url")
    assert AgentEventEndpoint.objects.filter(tenant=tenant_a).count() == 1


@pytest.mark.django_db
def test_another_path_or_port_of_the_host_is_another_receiver(tenant_a, member_of):
    admin = member_of(tenant_a, "admin").user
    _register(tenant_a, admin, "https://agent.example.com/hooks")
    _register(tenant_a, admin, "https://agent.example.com/Hooks")
    _register(tenant_a, admin, "https://agent.example.com:8443/hooks")

    assert AgentEventEndpoint.objects.filter(tenant=tenant_a).count() == 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("first", "again"),
    [
        ("https://[2606:4700::1111]/hooks", "https://[2606:4700:0:0:0:0:0:1111]/hooks"),
        ("https://[2606:4700::1111]/hooks", "https://[2606:4700:0::1111]:443/hooks"),
        ("https://1.1.1.1/hooks", "https://16843009/hooks"),
        ("https://1.1.1.1/hooks", "https://0x01010101/hooks"),
        ("https://1.1.1.1/hooks", "https://1.1.257/hooks"),
        ("https://1.1.1.1/hooks", "https://[::ffff:1.1.1.1]/hooks"),
        ("https://xn--bcher-kva.example/hooks", "https://bücher.example/hooks"),
        ("https://bücher.example/hooks", "https://BÜCHER.example/hooks"),
        ("https://agent.example.com/hooks", "https://agent.example\u3002com/hooks"),
    ],
)
def test_the_same_address_or_name_written_otherwise_is_not_registered_again(
    tenant_a, member_of, first, again
):
    """Found by an outside probe: an IPv6 address with its zeros written out, an IPv4 address
    written as one number, in hex or with a short last part, an IPv4 address mapped into IPv6,
    an international name in Unicode and in its xn-- form, a name with an ideographic full stop
    for a dot. The HTTP client and the system's resolver reach one receiver for each pair, which
    the duplicate check counted as two, so each event went there twice, signed with two
    secrets."""
    admin = member_of(tenant_a, "admin").user
    _register(tenant_a, admin, first)

    with pytest.raises(AdminError) as refused:
        _register(tenant_a, admin, again)

    assert (refused.value.code, refused.value.field) == ("duplicate_endpoint", "url")
    assert AgentEventEndpoint.objects.filter(tenant=tenant_a).count() == 1
