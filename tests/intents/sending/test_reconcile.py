"""Past the idempotency window an uncertain intent is looked up by its label. The lookup must not
depend on how the provider reads the label filter: these tests play a provider that ignores it,
and one that reads only repeated query keys, and count what the sandbox really sent."""

from datetime import timedelta

import pytest
import time_machine
from django.db.models.functions import Now
from django.utils import timezone

from intents import sending
from intents.models import IntentEvent, SendAttempt, SendIntent

pytestmark = pytest.mark.django_db(transaction=True)


def sends(sandbox, intent):
    return sandbox.ledger(idempotency_key=intent.idempotency_key)


def calls(sandbox, intent):
    return sandbox.requests(idempotency_key=intent.idempotency_key)


def step():
    return sending.run_once(worker="w", limit=1)


def reconcile(intent):
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
    step()
    intent.refresh_from_db()


def last_request_id(sandbox):
    return max((r["id"] for r in sandbox.requests()), default=0)


def kinds(intent):
    return list(
        SendAttempt.objects.filter(intent=intent).order_by("number").values_list("kind", flat=True)
    )


@pytest.fixture
def label_filter(live):
    """label_filter("ignored" | "repeated"): the provider reads the labels query that way."""

    def use(mode):
        live.sandbox.config(labels_query=mode)

    yield use
    live.sandbox.config(labels_query="both")


@pytest.fixture
def day_later(live):
    """Our clock and the provider's clock 24 h ahead (the provider forgets completed keys)."""
    live.sandbox.advance_clock(24 * 3600 + 60)
    with time_machine.travel(timezone.now() + timedelta(hours=24, minutes=1), tick=True):
        yield
    live.sandbox.advance_clock(-(24 * 3600 + 60))


def sent_but_unanswered(live):
    """An intent whose send went out while its answer was lost: uncertain, one send."""
    intent = live.approved()
    live.sandbox.fault("sends", "timeout_after_accept", delay=2)
    step()
    intent.refresh_from_db()
    assert intent.state == "uncertain"
    return intent


def never_sent(live):
    """An intent whose request was dropped before the provider processed it: uncertain."""
    intent = live.approved()
    live.sandbox.fault("sends", "drop_before")
    step()
    intent.refresh_from_db()
    assert intent.state == "uncertain"
    return intent


def busy_inbox(live, count=1):
    """Newer mail in the same inbox: another intent's send, and customers' messages."""
    other = live.approved(to=["someone.else@example.com"], subject="Another case")
    step()
    other.refresh_from_db()
    assert other.state == "accepted"
    for n in range(count):
        live.sandbox.inbound(
            live.mailbox.inbox_id, from_="customer@example.com", subject=f"Thanks {n}", text="Hi"
        )
    return other


def test_filter_ignored_the_sent_message_is_still_found_and_accepted(live, label_filter, request):
    intent = sent_but_unanswered(live)
    other = busy_inbox(live)
    label_filter("ignored")
    request.getfixturevalue("day_later")

    reconcile(intent)

    [sent] = sends(live.sandbox, intent)
    assert intent.state == "accepted"
    assert intent.provider_message_id == sent["message_id"]
    assert intent.provider_message_id != other.provider_message_id
    assert len(calls(live.sandbox, intent)) == 1
    assert kinds(intent) == ["send", "lookup"]


def test_filter_read_as_repeated_keys_only_the_scan_finds_the_sent_message(
    live, label_filter, request
):
    intent = sent_but_unanswered(live)
    busy_inbox(live)
    label_filter("repeated")
    request.getfixturevalue("day_later")

    reconcile(intent)

    [sent] = sends(live.sandbox, intent)
    assert intent.state == "accepted"
    assert intent.provider_message_id == sent["message_id"]
    assert len(calls(live.sandbox, intent)) == 1
    accepted = IntentEvent.objects.get(intent=intent, action="intent.accepted")
    assert "inbox scan" in accepted.reason


def test_filter_ignored_a_message_of_another_intent_is_never_taken(live, label_filter, request):
    intent = never_sent(live)
    other = busy_inbox(live)
    label_filter("ignored")
    request.getfixturevalue("day_later")

    reconcile(intent)

    assert intent.state == "needs_attention"
    assert intent.provider_message_id == ""
    assert sends(live.sandbox, intent) == []
    assert len(sends(live.sandbox, other)) == 1
    assert len(calls(live.sandbox, intent)) == 1
    assert kinds(intent) == ["send", "lookup"]


def test_filter_read_as_repeated_keys_only_nothing_sent_needs_attention(
    live, label_filter, request
):
    intent = never_sent(live)
    busy_inbox(live)
    label_filter("repeated")
    request.getfixturevalue("day_later")

    reconcile(intent)

    assert intent.state == "needs_attention"
    assert sends(live.sandbox, intent) == []
    assert len(calls(live.sandbox, intent)) == 1
    assert SendAttempt.objects.get(intent=intent, kind="lookup").outcome == "not_found"


def test_scan_is_bounded_in_pages_and_an_unfinished_scan_proves_nothing(
    live, label_filter, request, settings
):
    settings.AGENTMAIL_LOOKUP_PAGE_SIZE = 2
    settings.AGENTMAIL_LOOKUP_SCAN_PAGES = 2
    intent = never_sent(live)
    busy_inbox(live, count=4)
    label_filter("ignored")
    request.getfixturevalue("day_later")
    since = last_request_id(live.sandbox)

    reconcile(intent)

    lists = [r for r in live.sandbox.requests(since_id=since) if r["route"] == "list_messages"]
    assert intent.state == "uncertain"
    assert intent.last_error_code == "scan_incomplete"
    assert len(lists) == 1 + 2
    assert sends(live.sandbox, intent) == []
    assert SendAttempt.objects.get(intent=intent, kind="lookup").outcome == "uncertain"


def test_scan_starts_at_the_first_attempt_not_at_older_mail(live, label_filter, request, settings):
    settings.AGENTMAIL_LOOKUP_PAGE_SIZE = 2
    settings.AGENTMAIL_LOOKUP_SCAN_PAGES = 1
    live.sandbox.advance_clock(-3600)
    for n in range(4):
        live.sandbox.inbound(
            live.mailbox.inbox_id, from_="customer@example.com", subject=f"Old {n}", text="Hi"
        )
    live.sandbox.advance_clock(3600)
    intent = sent_but_unanswered(live)
    busy_inbox(live)
    label_filter("ignored")
    request.getfixturevalue("day_later")

    reconcile(intent)

    [sent] = sends(live.sandbox, intent)
    assert intent.state == "accepted"
    assert intent.provider_message_id == sent["message_id"]


def test_a_lookup_made_while_the_first_call_is_in_flight_does_not_hand_it_to_a_person(
    live, settings
):
    """Found by an outside probe: a call outlived its lease, the sweep made the intent uncertain,
    and, past its not_after, the next worker looked its label up before the call had landed:
    nothing found, needs attention; the call's late acceptance was fenced off, and a person
    reopening the send sent it twice. Now the lookup waits for the call, and the call's own
    answer settles the intent."""
    import threading
    import time

    settings.SEND_LEASE_SECONDS = 2
    settings.AGENTMAIL_READ_TIMEOUT = 10
    intent = live.approved(not_after=timezone.now() + timedelta(seconds=3))
    live.sandbox.fault("sends", "delay", delay=4)
    first = threading.Thread(target=lambda: sending.run_once(worker="slow", limit=1))
    first.start()

    time.sleep(2.4)
    sending.intents_release_expired_leases()
    time.sleep(1.0)  # past not_after: the next worker may only look the label up
    reconcile(intent)
    looked_up_early = intent.state
    first.join(20)
    intent.refresh_from_db()

    assert looked_up_early == "uncertain"
    assert intent.state == "accepted"
    [sent] = sends(live.sandbox, intent)
    assert intent.provider_message_id == sent["message_id"]
    assert IntentEvent.objects.filter(
        intent=intent, action="intent.accepted", reason__startswith="AgentMail's answer"
    ).exists()


def test_two_messages_carrying_the_label_are_both_kept_as_evidence(live, request):
    """AgentMail holds two messages with the intent's label (it sent the reply twice): the lookup
    proves the send with one and the journal names the other, so a person can see that the
    customer got it twice (only the first id was kept, and the duplicate left no trace)."""
    intent = never_sent(live)
    client = live.sandbox.sdk(live.mailbox.api_key())
    copies = [
        client.inboxes.messages.send(
            live.mailbox.inbox_id,
            to=["customer@example.com"],
            subject="Your refund",
            text="We refunded your order.",
            labels=[intent.label],
        ).message_id
        for _ in range(2)
    ]
    request.getfixturevalue("day_later")

    reconcile(intent)

    accepted = IntentEvent.objects.get(intent=intent, action="intent.accepted")
    assert intent.state == "accepted"
    assert sorted([intent.provider_message_id, *accepted.data["also_found"]]) == sorted(copies)
    assert "1 other message(s) carry it too" in accepted.reason
    assert calls(live.sandbox, intent) and sends(live.sandbox, intent) == []


def test_a_label_lookup_refused_for_the_key_keeps_the_send_uncertain_and_holds_the_mailbox(
    live, settings
):
    """Past its replays, an uncertain send (it did go out) is looked up with a key AgentMail has
    since deleted: the 401 marks the mailbox and the send stays uncertain with nothing due, the
    fact that it may have gone out kept for the lookup once the key works again."""
    from mailboxes import provider
    from mailboxes.models import Mailbox

    intent = live.approved()
    live.sandbox.fault("sends", "drop_after")
    step()
    SendIntent.objects.filter(pk=intent.pk).update(attempts=settings.SEND_MAX_ATTEMPTS + 1)
    provider.delete_inbox_key(
        inbox_id=live.mailbox.inbox_id, api_key_id=live.mailbox.provider_api_key_id
    )

    reconcile(intent)
    assert (intent.state, intent.last_error_code) == ("uncertain", "key_refused")
    assert kinds(intent) == ["send", "lookup"]
    assert Mailbox.objects.get(pk=live.mailbox.pk).key_refused
    assert len(sends(live.sandbox, intent)) == 1
    assert sending.seconds_until_next_due() is None
