"""An outside probe of broadcasts: what a person who pauses or cancels one is told about the
sends already past their pre-call check, which go out after the decision."""

import pytest

from intents.models import Broadcast, IntentEvent, SendAttempt, SendIntent
from intents.sending.claim import intent_claim
from intents.sending.fanout import broadcast_run
from intents.sending.precheck import intent_begin_attempts
from intents.services.broadcast_controls import broadcast_pause
from intents.services.broadcasts import broadcast_approve, broadcast_create

pytestmark = pytest.mark.django_db(transaction=True)


def _fanned_out(live):
    """An approved broadcast of two recipients, its two sends queued."""
    broadcast = broadcast_create(
        tenant=live.tenant,
        mailbox=live.mailbox,
        subject="Order {{ order }}",
        text="Hello {{ name }}",
        recipients=[
            {"address": f"customer{i}@example.com", "variables": {"name": "Ana", "order": i}}
            for i in range(2)
        ],
    )
    broadcast_approve(
        tenant=live.tenant,
        broadcast_id=broadcast.pk,
        content_hash=broadcast.content_hash,
        actor=live.approver,
    )
    broadcast_run(broadcast.pk)
    return broadcast


def _one_send_in_flight(live):
    """``_fanned_out`` with its first send as the worker leaves it between its pre-call check and
    the provider call: leased, its attempt row committed, no answer yet."""
    broadcast = _fanned_out(live)
    claims = intent_claim(worker="t", limit=1)
    assert len(claims) == 1
    prepared = intent_begin_attempts(claims)
    assert prepared[claims[0].intent_id] is not None
    return broadcast


@pytest.mark.parametrize(
    ("action", "said", "journaled"),
    [
        ("cancel", "Cancelled: the rest will not be sent.", "broadcast.cancelled"),
        ("pause", "Paused: no new message goes out.", "broadcast.paused"),
    ],
)
def test_a_send_in_flight_at_a_pause_or_cancel_is_told_and_journaled(
    live, signed_in, action, said, journaled
):
    """The worker's call goes out after the decision (the decision waited for its attempt row,
    ``hold_broadcasts``); the page said only that nothing more would be sent, and the journal
    row did not count it, unlike every other change that stops sends."""
    broadcast = _one_send_in_flight(live)
    client = signed_in(live.approver)

    response = client.post(
        f"/t/{live.tenant.slug}/broadcasts/{broadcast.pk}/{action}/", follow=True
    )

    page = response.content.decode()
    assert said in page
    assert "1 send of this broadcast was already on its way and will go out" in page
    decided = IntentEvent.objects.get(broadcast=broadcast, action=journaled)
    assert decided.data["sends_in_flight"] == 1


def test_a_cancel_with_no_send_in_flight_says_nothing_more(live, signed_in):
    broadcast = _fanned_out(live)
    client = signed_in(live.approver)

    response = client.post(f"/t/{live.tenant.slug}/broadcasts/{broadcast.pk}/cancel/", follow=True)

    page = response.content.decode()
    assert "Cancelled: the rest will not be sent." in page
    assert "on its way" not in page


@pytest.mark.parametrize("action", ["pause", "cancel", "resume"])
def test_outsiders_cannot_pause_cancel_or_resume(live, signed_in, member_of, tenant_b, action):
    """A viewer and an approver without the right for the broadcast's mailbox are refused
    (403); another tenant's admin, and a user of both tenants through the other tenant's
    address, get the 404 of a missing broadcast. Nothing changes, nothing is journaled."""
    broadcast = _fanned_out(live)
    if action == "resume":
        broadcast_pause(tenant=live.tenant, broadcast_id=broadcast.pk, actor=live.approver)
    before = Broadcast.objects.get(pk=broadcast.pk).state
    journaled = IntentEvent.objects.filter(broadcast=broadcast).count()
    viewer = member_of(live.tenant, "viewer").user
    narrow = member_of(live.tenant, "approver", approve_all_mailboxes=False).user
    foreign_admin = member_of(tenant_b, "admin").user
    both = member_of(tenant_b, "admin").user
    member_of(live.tenant, "viewer", user=both)
    here = f"/t/{live.tenant.slug}/broadcasts/{broadcast.pk}/{action}/"
    there = f"/t/{tenant_b.slug}/broadcasts/{broadcast.pk}/{action}/"

    answers = [
        signed_in(viewer).post(here).status_code,
        signed_in(narrow).post(here).status_code,
        signed_in(foreign_admin).post(there).status_code,
        signed_in(both).post(there).status_code,
    ]

    assert answers == [403, 403, 404, 404]
    assert Broadcast.objects.get(pk=broadcast.pk).state == before
    assert IntentEvent.objects.filter(broadcast=broadcast).count() == journaled


def test_a_label_lookup_in_flight_at_a_pause_is_not_a_send_that_goes_out(live):
    """A reconciliation's lookup only reads at AgentMail; the pause said one send would go out."""
    broadcast = _one_send_in_flight(live)
    SendIntent.objects.filter(broadcast=broadcast, state="sending").update(state="uncertain")
    SendAttempt.objects.filter(intent__broadcast=broadcast).update(kind=SendAttempt.Kind.LOOKUP)

    stopped = broadcast_pause(tenant=live.tenant, broadcast_id=broadcast.pk, actor=live.approver)

    assert stopped.sends_in_flight == 0


def _resume_form(client, live, broadcast) -> dict:
    """The Resume form of the broadcast's page as it is now (its hidden fields)."""
    from tests.review.wrote_again import hidden_fields

    page = client.get(f"/t/{live.tenant.slug}/broadcasts/{broadcast.pk}/").content.decode()
    return hidden_fields(page, 'action="[^"]*/resume/"')


def test_a_resume_from_a_page_older_than_the_last_pause_is_refused(live, signed_in, member_of):
    """A loads the paused broadcast's page; B resumes it, sees a problem and pauses it again.
    A's Resume, from the page of the first pause, resumed it over B's pause: the person who
    paused it for a reason had it undone by one who never saw that pause."""
    from intents.services.broadcast_controls import broadcast_resume

    broadcast = _fanned_out(live)
    broadcast_pause(tenant=live.tenant, broadcast_id=broadcast.pk, actor=live.approver)
    other = member_of(live.tenant, "approver").user
    first = signed_in(live.approver)
    old_page = _resume_form(first, live, broadcast)
    broadcast_resume(tenant=live.tenant, broadcast_id=broadcast.pk, actor=other)
    broadcast_pause(tenant=live.tenant, broadcast_id=broadcast.pk, actor=other)
    journaled = IntentEvent.objects.filter(broadcast=broadcast).count()
    here = f"/t/{live.tenant.slug}/broadcasts/{broadcast.pk}/resume/"

    stale = first.post(here, old_page, follow=True)
    assert Broadcast.objects.get(pk=broadcast.pk).state == Broadcast.State.PAUSED
    assert IntentEvent.objects.filter(broadcast=broadcast).count() == journaled
    assert "paused again since this page was loaded" in stale.content.decode()
    assert first.post(here, {}, follow=True).status_code == 200
    assert Broadcast.objects.get(pk=broadcast.pk).state == Broadcast.State.PAUSED

    first.post(here, _resume_form(first, live, broadcast))
    assert Broadcast.objects.get(pk=broadcast.pk).state != Broadcast.State.PAUSED


def test_the_progress_card_counts_the_sends_that_did_not_go_out(live, signed_in):
    """The card counted accepted, delivered, bounced and complained: a send blocked at the
    pre-call check (a suppression, a policy narrowed), failed, or waiting for a person showed
    nowhere, and "Accepted 0 / 2" read as "still on its way"."""
    import re

    broadcast = _fanned_out(live)
    first, second = SendIntent.objects.filter(broadcast=broadcast).order_by("id")
    SendIntent.objects.filter(pk=first.pk).update(state="blocked")
    SendIntent.objects.filter(pk=second.pk).update(state="needs_attention")

    page = signed_in(live.approver).get(f"/t/{live.tenant.slug}/broadcasts/{broadcast.pk}/")

    counts = dict(re.findall(r'data-count="([a-z_]+)">([^<]*)<', page.content.decode()))
    assert counts["not_sent"] == "1"
    assert counts["needs_attention"] == "1"
    assert counts["accepted"] == "0 / 2"


def test_the_progress_card_counts_add_up_to_the_sends_created(live, signed_in):
    """A send blocked at the pre-call check (here: its address suppressed after the fan-out) is
    counted as not sent; one still queued, sending or awaiting an answer was counted nowhere,
    so "Accepted 0 / 2" beside "Not sent 1" left one send unaccounted for."""
    import re

    from intents.models import Suppression

    broadcast = _fanned_out(live)
    Suppression.objects.create(
        tenant=live.tenant, address="customer0@example.com", reason=Suppression.Reason.MANUAL
    )
    prepared = intent_begin_attempts(intent_claim(worker="t", limit=2))
    blocked = SendIntent.objects.get(broadcast=broadcast, state="blocked")

    page = signed_in(live.approver).get(f"/t/{live.tenant.slug}/broadcasts/{broadcast.pk}/")

    counts = dict(re.findall(r'data-count="([a-z_]+)">([^<]*)<', page.content.decode()))
    assert prepared[blocked.pk] is None
    assert blocked.last_error_code == "recipient_suppressed"
    assert counts["accepted"] == "0 / 2"
    assert counts["not_sent"] == "1"
    assert counts["unsent"] == "1"
    assert "Not sent yet (queued, sending or awaiting an answer)" in page.content.decode()


def test_every_send_state_is_counted_once_on_the_progress_card():
    from intents.selectors.broadcasts import Progress

    states = SendIntent.State.values
    progress = Progress(
        recipients=len(states),
        created=len(states),
        by_state=dict.fromkeys(states, 1),
        deliveries={},
        skipped={},
    )

    parts = (progress.accepted, progress.unsent, progress.not_sent, progress.needs_attention)
    assert sum(parts) == progress.created


@pytest.mark.parametrize("action", ["cancel", "pause"])
def test_a_broadcast_whose_every_send_went_out_cannot_be_cancelled_or_paused(
    live, signed_in, action
):
    """Every message was accepted; the sweep had not yet marked it completed (up to its
    interval). "Cancel the rest" made it "Cancelled" and journaled a cancellation of a broadcast
    every customer had received; "Pause" left it paused with nothing to hold, never completed."""
    from django.urls import reverse

    from tests.intents.helpers import drain_sends

    broadcast = _fanned_out(live)
    drain_sends()
    assert set(SendIntent.objects.filter(broadcast=broadcast).values_list("state", flat=True)) == {
        "accepted"
    }
    client = signed_in(live.approver)
    page = client.post(
        reverse("broadcast_control", args=[live.tenant.slug, broadcast.pk, action]), follow=True
    )
    assert "every message of this broadcast" in page.content.decode()
    assert Broadcast.objects.get(pk=broadcast.pk).state == "sending"
    assert not IntentEvent.objects.filter(
        broadcast=broadcast, action__in=["broadcast.cancelled", "broadcast.paused"]
    ).exists()
    broadcast_run(broadcast.pk)
    assert Broadcast.objects.get(pk=broadcast.pk).state == "completed"
