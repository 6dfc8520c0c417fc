"""A customer who writes again while the reply waits for review. A send approved before the new
message is held for a person when it arrives (intents_hold_stale); one approved after it must have
been approved on a page that showed it. The approve form carries the ids of the customer's messages
its page showed, and an approval that did not see a newer one is refused; bulk approval, whose rows
show no messages, refuses such a draft with "open the draft". The message's store and an approval
at the same moment meet on the draft's lock: either the approval sees the message or the message's
hold finds the send."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
import time_machine
from django.db import connections, transaction
from django.urls import reverse
from django.utils import timezone

from intents import errors, sending, services
from intents.models import DraftVersion, SendIntent
from review.forms import MESSAGES_SEEN_MOST
from tests.factories import make_local_mailbox
from tests.intents.conftest import fast_send  # noqa: F401
from tests.intents.helpers import blocked_on_a_lock
from tests.review import wrote_again
from tests.review.wrote_again import approve_form, customer_wrote, draft_answering
from tests.webhooks.conftest import hook_for, received_payload  # noqa: F401
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


@pytest.mark.django_db(transaction=True)
def test_a_message_that_arrives_after_the_page_loaded_refuses_the_approval_and_nothing_is_sent(
    tenant_a,
    member_of,
    mailbox_factory,
    sandbox,
    fast_send,  # noqa: F811
    client,
    hook_for,  # noqa: F811
):
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)

    def customer_writes(subject: str, in_reply_to: str | None = None) -> dict:
        return wrote_again.customer_writes(sandbox, hook, client, mailbox, subject, in_reply_to)

    first = customer_writes("Refund?")
    writer = member_of(tenant_a, "approver").user
    draft = services.draft_create(
        tenant=tenant_a,
        mailbox=mailbox,
        to=["jane@customer.test"],
        text="We refunded it.",
        thread_id=first["thread_id"],
        in_reply_to=first["message_id"],
        actor_user=writer,
    )
    reviewer = member_of(tenant_a, "admin").user
    client.force_login(reviewer, backend="django.contrib.auth.backends.ModelBackend")
    page_url = reverse("draft", args=[tenant_a.slug, draft.pk])
    seen = approve_form(client.get(page_url).content.decode())

    # "Stop, do not refund: I found it." The applier stores it; no send exists yet to hold.
    customer_writes("Cancel that", in_reply_to=first["message_id"])
    refused = client.post(reverse("draft_approve", args=[tenant_a.slug, draft.pk]), seen)

    body = refused.content.decode()
    assert refused.status_code == 409
    assert 'data-refusal="customer_wrote_again"' in body and "Cancel that" in body
    assert not SendIntent.objects.filter(draft=draft).exists()
    sending.run_once(worker="t", limit=5)
    assert sandbox.ledger(inbox_id=mailbox.inbox_id) == []

    # The reviewer reads it and approves again (the reply still fits): it goes out once.
    again = approve_form(client.get(page_url).content.decode())
    assert again["messages_seen"] != seen["messages_seen"]
    client.post(reverse("draft_approve", args=[tenant_a.slug, draft.pk]), again)
    intent = SendIntent.objects.get(draft=draft)
    assert intent.held_reason == ""
    sending.run_once(worker="t", limit=5)
    intent.refresh_from_db()
    assert intent.state == "accepted"
    assert len(sandbox.ledger(inbox_id=mailbox.inbox_id)) == 1
    assert len(sandbox.ledger(intent.idempotency_key)) == 1


def test_a_newer_message_the_page_showed_does_not_refuse_the_approval(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-shown")
    customer_wrote(tenant_a, mailbox_a, "thr-shown", 2, draft.created_at + timedelta(minutes=5))
    client = signed_in(admin_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    assert "The customer wrote again" in page and "Message 2" in page

    client.post(reverse("draft_approve", args=[tenant_a.slug, draft.pk]), approve_form(page))

    assert SendIntent.objects.filter(draft=draft, held_reason="").count() == 1


def page_then_approve(client, tenant, draft):
    page = client.get(reverse("draft", args=[tenant.slug, draft.pk]))
    answer = client.post(
        reverse("draft_approve", args=[tenant.slug, draft.pk]), approve_form(page.content.decode())
    )
    return page, answer


def test_eleven_follow_ups_are_all_on_the_page_and_the_draft_can_be_approved(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The page showed the thread's ten newest messages, and the approval refused any newer
    message the page did not show: a customer who wrote eleven follow-ups made the draft
    impossible to approve, its page saying "read the new message below" where it never was."""
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-many")
    first, *_ = [
        customer_wrote(tenant_a, mailbox_a, "thr-many", n, draft.created_at + timedelta(minutes=n))
        for n in range(2, 13)
    ]

    page, answer = page_then_approve(signed_in(admin_a.user), tenant_a, draft)

    assert first in page.context["newer_inbound"]
    assert answer.status_code == 302 and SendIntent.objects.filter(draft=draft).exists()


def test_sixty_follow_ups_do_not_make_the_draft_impossible_to_approve(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """The page showed every message the approval asks about (up to 100), but the approve
    form's field took at most 50 ids: a customer who wrote 51 follow-ups made every approval
    fail as a form that "did not say which version it approves"."""
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-sixty")
    for n in range(2, 62):
        customer_wrote(tenant_a, mailbox_a, "thr-sixty", n, draft.created_at + timedelta(seconds=n))

    page, answer = page_then_approve(signed_in(admin_a.user), tenant_a, draft)

    assert len(page.context["newer_inbound"]) == 60
    assert answer.status_code == 302 and SendIntent.objects.filter(draft=draft).exists()


def test_a_new_message_dated_weeks_back_is_on_the_page_and_marked_new(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    """Recorded after the draft but dated before the thread's ten newest (delivered late, or a
    Date its sender chose): the approval asked about it, the page neither showed nor marked it."""
    for n in range(2, 12):
        customer_wrote(tenant_a, mailbox_a, "thr-back", n, timezone.now() - timedelta(minutes=40))
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-back")
    backdated = customer_wrote(
        tenant_a, mailbox_a, "thr-back", 12, draft.created_at - timedelta(days=20)
    )

    page, answer = page_then_approve(signed_in(admin_a.user), tenant_a, draft)

    assert page.context["newer_inbound"] == [backdated]
    assert "The customer wrote again" in page.content.decode()
    assert answer.status_code == 302 and SendIntent.objects.filter(draft=draft).exists()


def test_messages_older_than_the_draft_and_the_one_it_answers_never_refuse(
    tenant_a, mailbox_a, make_draft, admin_a
):
    customer_wrote(tenant_a, mailbox_a, "thr-old", 0, timezone.now() - timedelta(hours=2))
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-old")
    version = DraftVersion.objects.get(draft=draft)

    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=version.content_hash,
        actor=admin_a.user,
    )

    assert intent.state == "queued"


def test_another_threads_or_mailboxes_message_does_not_refuse(
    tenant_a, mailbox_a, make_draft, admin_a
):
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-mine")
    later = draft.created_at + timedelta(minutes=1)
    customer_wrote(tenant_a, mailbox_a, "thr-other", 2, later)
    customer_wrote(tenant_a, make_local_mailbox(tenant_a, username="sales"), "thr-mine", 3, later)
    version = DraftVersion.objects.get(draft=draft)

    intent = services.draft_approve(
        tenant=tenant_a,
        draft_id=draft.pk,
        version=1,
        content_hash=version.content_hash,
        actor=admin_a.user,
    )

    assert intent.state == "queued"


def test_bulk_approval_refuses_a_draft_whose_customer_wrote_again_and_approves_the_rest(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    stale = draft_answering(tenant_a, mailbox_a, make_draft, "thr-bulk")
    customer_wrote(tenant_a, mailbox_a, "thr-bulk", 2, stale.created_at + timedelta(minutes=5))
    fresh = make_draft(mailbox_a)
    items = []
    for draft in (stale, fresh):
        version = DraftVersion.objects.get(draft=draft)
        items.append(f"{draft.pk}:{version.number}:{version.content_hash}")

    answer = signed_in(admin_a.user).post(
        reverse("bulk_approve", args=[tenant_a.slug]),
        {"item": items},
        headers={"X-Bulk-Progress": "1"},
    )

    assert answer.json()["approved"] == 1
    [refusal] = answer.json()["refused"]
    assert refusal["draft"] == stale.pk and "open the draft" in refusal["message"]
    assert not SendIntent.objects.filter(draft=stale).exists()
    assert SendIntent.objects.filter(draft=fresh).exists()


def test_the_queue_row_says_the_customer_wrote_again(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    stale = draft_answering(tenant_a, mailbox_a, make_draft, "thr-row")
    customer_wrote(tenant_a, mailbox_a, "thr-row", 2, stale.created_at + timedelta(minutes=5))
    customer_wrote(tenant_a, mailbox_a, "thr-quiet", 3, timezone.now() - timedelta(minutes=30))
    quiet = make_draft(
        mailbox_a, in_reply_to="<q3@customer.test>", to=["c@example.com"], subject=None
    )

    page = signed_in(admin_a.user).get(reverse("tenant_home", args=[tenant_a.slug]))

    rows = re.findall(r'<article class="qrow.*?</article>', page.content.decode(), re.S)
    flagged = {
        int(pk)
        for row in rows
        if "data-wrote-again" in row
        for pk in re.findall(r"/drafts/(\d+)/", row)
    }
    shown = {int(pk) for row in rows for pk in re.findall(r"/drafts/(\d+)/", row)}
    assert quiet.pk in shown  # the quiet draft's row is on the page, without the badge
    assert flagged == {stale.pk}


@pytest.mark.parametrize(
    "value", ["x", "1,,2", ",".join(["1"] * (MESSAGES_SEEN_MOST + 1)), "0", "-1", "1" * 20, "1;2"]
)
def test_a_malformed_list_of_seen_messages_is_refused_and_changes_nothing(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in, value
):
    draft = make_draft(mailbox_a)
    version = DraftVersion.objects.get(draft=draft)

    answer = signed_in(admin_a.user).post(
        reverse("draft_approve", args=[tenant_a.slug, draft.pk]),
        {"version": 1, "content_hash": version.content_hash, "messages_seen": value},
    )

    assert answer.status_code == 400
    assert not SendIntent.objects.filter(draft=draft).exists()


def _approve_in_thread(tenant, draft, actor, results: list) -> threading.Thread:
    version = DraftVersion.objects.get(draft=draft)

    def approve() -> None:
        try:
            results.append(
                services.draft_approve(
                    tenant=tenant,
                    draft_id=draft.pk,
                    version=1,
                    content_hash=version.content_hash,
                    actor=actor,
                )
            )
        except errors.DraftError as exc:
            results.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=approve)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_an_approval_at_the_moment_the_message_is_stored_waits_for_it_and_is_refused(
    tenant_a, mailbox_a, make_draft, admin_a
):
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-race")
    results: list = []
    with transaction.atomic():
        # The applier's transaction: the message stored, the thread's queued sends looked for
        # (none yet), not committed when the approval arrives.
        message = customer_wrote(tenant_a, mailbox_a, "thr-race", 2, timezone.now())
        services.intents_hold_stale(
            mailbox=mailbox_a,
            thread_id="thr-race",
            message_id=message.message_id,
            written_at=message.received_at,
            reason="customer wrote again",
        )
        approver = _approve_in_thread(tenant_a, draft, admin_a.user, results)
        assert blocked_on_a_lock(), "the approval did not wait for the message's transaction"
    approver.join(30)

    [outcome] = results
    assert isinstance(outcome, errors.CustomerWroteAgain)
    assert not SendIntent.objects.filter(draft=draft).exists()


@pytest.mark.django_db(transaction=True)
def test_a_message_stored_while_an_approval_commits_holds_that_send(
    tenant_a, mailbox_a, make_draft, admin_a
):
    draft = draft_answering(tenant_a, mailbox_a, make_draft, "thr-race2")
    version = DraftVersion.objects.get(draft=draft)
    results: list = []
    holds: list = []

    def store_message() -> None:
        try:
            with transaction.atomic():
                message = customer_wrote(tenant_a, mailbox_a, "thr-race2", 2, timezone.now())
                holds.append(
                    services.intents_hold_stale(
                        mailbox=mailbox_a,
                        thread_id="thr-race2",
                        message_id=message.message_id,
                        written_at=message.received_at,
                        reason="customer wrote again",
                    )
                )
        finally:
            connections.close_all()

    with transaction.atomic():
        # Something else holds the version row, so the approval, past its check of the
        # customer's messages (none newer yet) and holding the draft's lock, waits to insert
        # its send (the foreign key's share lock on the version).
        DraftVersion.objects.select_for_update().get(pk=version.pk)
        approver = _approve_in_thread(tenant_a, draft, admin_a.user, results)
        assert blocked_on_a_lock(), "the approval never reached the insert of its send"
        storer = threading.Thread(target=store_message)
        storer.start()
        assert _two_waiting(), "storing the message did not wait for the approval"
    approver.join(30)
    storer.join(30)

    [intent] = results
    assert isinstance(intent, SendIntent)
    intent.refresh_from_db()
    assert intent.held_reason == "customer wrote again"
    assert holds[0].held == [intent.pk]


def _two_waiting(timeout: float = 10.0) -> bool:
    """Whether two other sessions wait on locks at once."""
    import time

    from django.db import connection

    since = time.monotonic()
    with connection.cursor() as cursor:
        while time.monotonic() - since < timeout:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0] >= 2:
                return True
            time.sleep(0.02)
    return False


# --- clocks: the web host's may run ahead; a webhook may come late ------------------------------


@pytest.fixture
def thread_live(tenant_a, member_of, mailbox_factory, sandbox, fast_send, client, hook_for):  # noqa: F811
    """A sandbox mailbox whose customer wrote once (through the signed webhook); a writer and an
    approver. ``.writes(subject, timestamp=None)`` delivers another message of the thread."""
    import types

    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)

    def writes(subject: str, *, timestamp: str | None = None, deliver: bool = True):
        message = sandbox.inbound(
            mailbox.inbox_id,
            from_="jane@customer.test",
            subject=subject,
            text=subject,
            in_reply_to=first["message_id"] if first else None,
        )
        extra = {"timestamp": timestamp} if timestamp else {}
        payload = received_payload(
            mailbox,
            thread_id=message["thread_id"],
            message_id=message["message_id"],
            subject=subject,
            sender="jane@customer.test",
            **extra,
        )
        if deliver:
            hook.post(client, payload)
        return lambda: hook.post(client, payload)

    first: dict = {}
    writes("Refund?")
    first.update(InboundMessage.objects.values("thread_id", "message_id").get())

    def draft():
        return services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["jane@customer.test"],
            text="We refunded it.",
            thread_id=first["thread_id"],
            in_reply_to=first["message_id"],
            actor_user=member_of(tenant_a, "approver").user,
        )

    def approve(d, seen=()):
        version = DraftVersion.objects.get(draft=d)
        return services.draft_approve(
            tenant=tenant_a,
            draft_id=d.pk,
            version=1,
            content_hash=version.content_hash,
            actor=member_of(tenant_a, "admin").user,
            messages_seen=seen,
        )

    return types.SimpleNamespace(writes=writes, draft=draft, approve=approve, sandbox=sandbox)


@pytest.mark.django_db(transaction=True)
def test_a_web_host_clock_ahead_does_not_let_a_queued_reply_escape_the_new_message(thread_live):
    with time_machine.travel(timezone.now() + timedelta(minutes=3), tick=True):
        draft = thread_live.draft()  # stamped by the database's clock all the same
    intent = thread_live.approve(draft)

    thread_live.writes("Cancel that")
    sending.run_once(worker="t", limit=5)

    intent.refresh_from_db()
    assert intent.held_reason and intent.state == "queued"
    assert thread_live.sandbox.ledger(intent.idempotency_key) == []


@pytest.mark.django_db(transaction=True)
def test_a_web_host_clock_ahead_does_not_let_an_approval_ignore_a_message_it_never_showed(
    thread_live,
):
    with time_machine.travel(timezone.now() + timedelta(minutes=3), tick=True):
        draft = thread_live.draft()
    thread_live.writes("Cancel that")

    with pytest.raises(errors.CustomerWroteAgain):
        thread_live.approve(draft)
    assert not SendIntent.objects.filter(draft=draft).exists()


@pytest.mark.django_db(transaction=True)
def test_a_message_written_before_the_draft_but_delivered_after_the_approval_holds_the_send(
    thread_live,
):
    """Svix delivered it late (an outage of the receiver): nobody here could have seen it."""
    written = (timezone.now() - timedelta(minutes=2)).isoformat().replace("+00:00", "Z")
    deliver_late = thread_live.writes("Cancel that", timestamp=written, deliver=False)
    draft = thread_live.draft()
    intent = thread_live.approve(draft)

    deliver_late()
    sending.run_once(worker="t", limit=5)

    intent.refresh_from_db()
    assert intent.held_reason and intent.state == "queued"
    assert thread_live.sandbox.ledger(intent.idempotency_key) == []
