"""Order fuzz (reference §2.6 W3): whatever the order and duplication of sent / delivered /
bounced / complained events, each recipient ends in the same state as with the forward order."""

from __future__ import annotations

from itertools import count

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intents.models import Suppression
from tests.sizes import size
from tests.webhooks.conftest import delivery_payload, new_svix_id
from webhooks.models import RecipientDelivery

KINDS = ["sent", "delivered", "bounced", "complained"]
LOCALS = ["ann", "ben", "cat"]
FORWARD = {kind: rank for rank, kind in enumerate(KINDS)}
_example = count(1)


@st.composite
def scenarios(draw):
    events = draw(
        st.lists(
            st.tuples(
                st.sampled_from(KINDS),
                st.lists(st.sampled_from(LOCALS), min_size=1, max_size=3, unique=True),
            ),
            min_size=1,
            max_size=6,
        )
    )
    # Each event is delivered once, plus extra copies: a Svix retry (same svix-id) or the
    # same event sent again under a new svix-id.
    copies = draw(
        st.lists(
            st.tuples(st.integers(0, len(events) - 1), st.booleans()),
            max_size=6,
        )
    )
    deliveries = [(i, True) for i in range(len(events))] + copies
    return events, draw(st.permutations(deliveries))


def final_states(intent):
    return {
        address.partition("@")[0]: state
        for address, state in RecipientDelivery.objects.filter(intent=intent).values_list(
            "address", "state"
        )
    }


def suppressed(domain):
    return {
        (address.partition("@")[0], reason)
        for address, reason in Suppression.objects.filter(address__endswith=domain).values_list(
            "address", "reason"
        )
    }


@settings(
    max_examples=size(60, 300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_any_order_and_duplication_ends_in_the_forward_orders_state(
    client, tenant_a, hook_for, mailbox_row, intent_row, scenario
):
    events, deliveries = scenario
    n = next(_example)
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a, f"fuzz{n}")
    forward_domain, fuzz_domain = f"@fwd{n}.test", f"@fuzz{n}.test"
    forward = intent_row(mailbox, to=[f"{x}{forward_domain}" for x in LOCALS])
    fuzzed = intent_row(mailbox, to=[f"{x}{fuzz_domain}" for x in LOCALS])

    for kind, locals_ in sorted(events, key=lambda event: FORWARD[event[0]]):
        hook.post(
            client,
            delivery_payload(kind, forward, recipients=[f"{x}{forward_domain}" for x in locals_]),
        )
    payloads = [
        delivery_payload(kind, fuzzed, recipients=[f"{x}{fuzz_domain}" for x in locals_])
        for kind, locals_ in events
    ]
    svix_ids = [new_svix_id() for _ in events]
    statuses = {
        hook.post(client, payloads[i], svix_id=svix_ids[i] if same else new_svix_id()).status_code
        for i, same in deliveries
    }

    named = {x for _, locals_ in events for x in locals_}
    assert statuses == {200}
    assert set(final_states(forward)) == named
    assert final_states(fuzzed) == final_states(forward)
    assert suppressed(fuzz_domain) == suppressed(forward_domain)
