"""The webhook backfill against the sandbox over real HTTP: with the sandbox's webhooks switched
off, a delivered send and a received message are found by asking AgentMail, applied once through
the batch applier, and the real webhooks arriving later (switched back on) change nothing. Its
bounds, its failures and another tenant's mailboxes."""

from __future__ import annotations

import uuid
from datetime import timedelta
from urllib.parse import unquote

import httpx
import pytest
from django.db import connections
from django.utils import timezone

from console import services as console_services
from intents import sending
from intents import services as intent_services
from intents.models import IntentEvent, SendIntent, Suppression
from mailboxes import provisioning, recovery
from tenants import onboarding
from tests.webhooks.conftest import Hook, apply_stored
from webhooks import registration
from webhooks.models import (
    InboundBackfillMark,
    InboundMessage,
    RecipientDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from webhooks.services.backfill import webhooks_backfill


@pytest.fixture
def short_lived_connections(monkeypatch):
    """The sandbox keeps its HTTP connections to the live server alive: close the request
    thread's database connection after each request (see test_end_to_end)."""
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)


@pytest.fixture
def webhooks_off(sandbox):
    sandbox.config(webhooks_enabled=False)
    yield sandbox
    sandbox.config(webhooks_enabled=True)


@pytest.fixture
def no_delay(settings):
    settings.WEBHOOK_BACKFILL_AFTER_SECONDS = 0
    settings.WEBHOOK_BACKFILL_CALLS_PER_SECOND = 0


def accepted_send(tenant, mailbox, approver, to=("jane@customer.test", "ops@customer.test")):
    draft = intent_services.draft_create(
        tenant=tenant,
        mailbox=mailbox,
        to=list(to),
        subject="Your refund",
        text="We refunded your order.",
        actor_user=approver,
    )
    version = draft.versions.get(number=1)
    intent = intent_services.draft_approve(
        tenant=tenant,
        draft_id=draft.pk,
        version=1,
        content_hash=version.content_hash,
        actor=approver,
    )
    sending.run_once(intent_id=intent.pk)
    intent.refresh_from_db()
    assert intent.state == SendIntent.State.ACCEPTED
    return intent


def delivery_rows():
    return sorted(RecipientDelivery.objects.values_list("address", "state", "updated_at"))


def inbound_rows():
    return sorted(
        InboundMessage.objects.values_list("message_id", "thread_id", "sender", "received_at")
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_backfill_finds_what_switched_off_webhooks_missed_and_the_late_webhooks_change_nothing(
    live_server,
    short_lived_connections,
    webhooks_off,
    no_delay,
    settings,
    tenant_a,
    member_of,
    mailbox_factory,
):
    sandbox = webhooks_off
    settings.PUBLIC_BASE_URL = live_server.url
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    endpoint = registration.webhook_register(tenant=tenant_a)
    intent = accepted_send(tenant_a, mailbox, approver)
    reply = sandbox.inbound(
        mailbox.inbox_id,
        from_="Jane Doe <jane@customer.test>",
        subject="Re: Your refund",
        text="Thanks! One more question.",
        in_reply_to=intent.provider_message_id,
    )
    stored_before = WebhookEvent.objects.count()

    report = webhooks_backfill(tenant_id=tenant_a.pk)
    # The applier loop that runs beside every live server (tests/conftest.py) may apply them
    # first; driving it here as well must not apply anything twice.
    apply_stored()
    applied = sandbox.wait_for(
        lambda: set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    )
    again = webhooks_backfill(tenant_id=tenant_a.pk)

    assert stored_before == 0
    assert (report.deliveries, report.inbound, report.errors, applied) == (1, 1, 0, True)
    assert (again.deliveries, again.inbound) == (0, 0)
    assert sorted(
        WebhookEvent.objects.filter(endpoint=endpoint).values_list("event_type", "state")
    ) == [("message.delivered", "applied"), ("message.received", "applied")]
    assert dict(RecipientDelivery.objects.values_list("address", "state")) == {
        "jane@customer.test": "delivered",
        "ops@customer.test": "delivered",
    }
    recorded = InboundMessage.objects.get()
    assert (recorded.message_id, recorded.thread_id) == (
        reply["message_id"],
        intent.provider_thread_id,
    )
    journal = IntentEvent.objects.get(intent=intent, action="delivery.delivered")
    assert (journal.actor_kind, journal.data["source"], journal.data["moved"]) == (
        "sweep",
        "backfill",
        ["jane@customer.test", "ops@customer.test"],
    )
    deliveries, inbound = delivery_rows(), inbound_rows()
    suppressions = Suppression.objects.count()

    sandbox.config(webhooks_enabled=True)
    arrived = sandbox.wait_for(
        lambda: WebhookEvent.objects.exclude(svix_id__startswith="backfill:").count() == 3,
        timeout=15,
    )
    apply_stored()
    late = sandbox.wait_for(
        lambda: set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    )

    assert (arrived, late) == (True, True)
    assert sorted(
        WebhookEvent.objects.exclude(svix_id__startswith="backfill:").values_list(
            "event_type", "state"
        )
    ) == [
        ("message.delivered", "applied"),
        ("message.received", "applied"),
        ("message.sent", "applied"),
    ]
    assert (delivery_rows(), inbound_rows()) == (deliveries, inbound)
    assert Suppression.objects.count() == suppressions
    assert [
        row.data["moved"] for row in IntentEvent.objects.filter(intent=intent, actor_kind="webhook")
    ] == [[], []]
    assert WebhookEvent.objects.get(event_type="message.received", svix_id__startswith="msg_")
    assert (
        WebhookEvent.objects.get(event_type="message.received", svix_id__startswith="msg_").outcome
        == "inbound message already recorded"
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_rejection_the_backfill_applied_is_not_applied_again_by_its_late_webhook(
    live_server,
    short_lived_connections,
    webhooks_off,
    no_delay,
    settings,
    tenant_a,
    member_of,
    mailbox_factory,
):
    """Found by the backfill, the rejection suppressed both recipients; an admin let jane receive
    mail again. AgentMail's own webhook of that rejection, arriving hours later (Svix retries for
    a day), is the same news: it suppressed jane again, undoing the admin's decision."""
    sandbox = webhooks_off
    settings.PUBLIC_BASE_URL = live_server.url
    approver = member_of(tenant_a, "approver").user
    admin = member_of(tenant_a, "admin").user
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    # New addresses: the sandbox keeps what it suppressed for the tests after this one.
    jane, ops = (f"{who}-{uuid.uuid4().hex[:6]}@customer.test" for who in ("jane", "ops"))
    intent = accepted_send(tenant_a, mailbox, approver, to=(jane, ops))
    sandbox.trigger(intent.provider_message_id, "message.rejected")
    webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()
    # The applier loop beside the live server may hold the batch: wait for its commit.
    backfilled = sandbox.wait_for(
        lambda: set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    )
    suppressed_by_backfill = sorted(Suppression.objects.values_list("address", "reason"))
    console_services.suppression_remove(
        tenant=tenant_a,
        suppression_id=Suppression.objects.get(address=jane).pk,
        reason="The customer fixed their mailbox",
        actor=admin,
    )

    sandbox.config(webhooks_enabled=True)
    arrived = sandbox.wait_for(
        lambda: WebhookEvent.objects.filter(
            event_type="message.rejected", svix_id__startswith="msg_"
        ).exists(),
        timeout=15,
    )
    apply_stored()
    settled = sandbox.wait_for(
        lambda: not WebhookEvent.objects.filter(state__in=["pending", "deferred"]).exists()
    )

    assert (backfilled, arrived, settled) == (True, True, True)
    assert suppressed_by_backfill == [(jane, "rejected"), (ops, "rejected")]
    assert list(Suppression.objects.values_list("address", flat=True)) == [ops]
    assert dict(RecipientDelivery.objects.values_list("address", "state")) == {
        jane: "rejected",
        ops: "rejected",
    }


@pytest.mark.django_db(transaction=True)
def test_backfill_is_bounded_per_key_and_says_which_mailbox_it_cut_short(
    webhooks_off, no_delay, settings, tenant_a, member_of, mailbox_factory
):
    sandbox = webhooks_off
    settings.WEBHOOK_BACKFILL_CALLS_PER_KEY = 2
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    for n in range(3):
        accepted_send(tenant_a, mailbox, approver, to=[f"c{n}@customer.test"])
    before = len(sandbox.requests(route="get_message")) + len(
        sandbox.requests(route="list_messages")
    )

    report = webhooks_backfill(tenant_id=tenant_a.pk)
    calls = (
        len(sandbox.requests(route="get_message"))
        + len(sandbox.requests(route="list_messages"))
        - before
    )

    assert (report.calls, calls, report.deliveries, report.limited) == (2, 2, 2, [mailbox.pk])
    assert WebhookEvent.objects.filter(state="pending").count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_failing_lookup_stores_nothing_and_another_tenant_is_not_asked(
    webhooks_off, no_delay, tenant_a, tenant_b, member_of, mailbox_factory
):
    sandbox = webhooks_off
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    other = mailbox_factory(tenant_b)
    registration.webhook_register(tenant=tenant_a)
    registration.webhook_register(tenant=tenant_b)
    accepted_send(tenant_a, mailbox, approver)
    sandbox.fault("get_message", "500_before", times=0, inbox_id=mailbox.inbox_id)
    sandbox.inbound(other.inbox_id, from_="max@customer.test", subject="Hi", text="Hello")
    seen = {r["id"] for r in sandbox.requests()}

    report = webhooks_backfill(tenant_id=tenant_a.pk)
    asked = [r for r in sandbox.requests() if r["id"] not in seen]
    sandbox.clear_faults()

    assert (report.deliveries, report.inbound, report.errors) == (0, 0, 1)
    assert [r["status"] for r in asked if r["route"] == "get_message"] == [500]
    assert {r["route"] for r in asked} == {"get_message", "list_messages"}
    assert all(other.inbox_id not in r["path"] for r in asked)
    assert WebhookEvent.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_one_search_for_unconfirmed_sends_per_tenant_however_many_mailboxes(
    webhooks_off, no_delay, tenant_a, member_of, mailbox_factory
):
    # Each mailbox's search would read the tenant's whole window of accepted sends: with many
    # mailboxes a run would cost mailboxes x sends. One search serves every mailbox of a tenant,
    # and each mailbox still gets only its own sends, looked up with its own key.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    sandbox = webhooks_off
    approver = member_of(tenant_a, "approver").user
    boxes = [mailbox_factory(tenant_a) for _ in range(3)]
    registration.webhook_register(tenant=tenant_a)
    sent = {box.inbox_id: accepted_send(tenant_a, box, approver) for box in boxes}
    seen = {r["id"] for r in sandbox.requests()}

    with CaptureQueriesContext(connection) as queries:
        report = webhooks_backfill(tenant_id=tenant_a.pk)

    searches = [
        q
        for q in queries
        if q["sql"].startswith("SELECT") and 'FROM "intents_sendintent"' in q["sql"]
    ]
    asked = [r for r in sandbox.requests(route="get_message") if r["id"] not in seen]
    assert (report.mailboxes, report.deliveries, len(searches)) == (3, 3, 1)
    assert sorted(r["path"].split("/")[3] for r in asked) == sorted(sent)
    for box in boxes:
        lookup = next(r for r in asked if f"/inboxes/{box.inbox_id}/" in r["path"])
        assert sent[box.inbox_id].provider_message_id in unquote(lookup["path"])


@pytest.mark.django_db(transaction=True)
def test_a_message_id_too_long_for_an_index_is_backfilled_and_the_next_tenant_too(
    webhooks_off, no_delay, tenant_a, tenant_b, mailbox_factory
):
    """900 CJK characters of Message-ID (2,700 bytes) made the ledger's insert fail, which ended
    the whole run: the tenants after it were never asked, on every run after."""
    sandbox = webhooks_off
    first, second = mailbox_factory(tenant_a), mailbox_factory(tenant_b)
    registration.webhook_register(tenant=tenant_a)
    registration.webhook_register(tenant=tenant_b)
    long_id = "<" + "訂" * 900 + "@customer.test>"
    sandbox.inbound(first.inbox_id, from_="kim@customer.test", subject="Hi", message_id=long_id)
    sandbox.inbound(second.inbox_id, from_="max@customer.test", subject="Hello")

    report = webhooks_backfill()
    again = webhooks_backfill()

    assert (report.inbound, report.errors) == (2, 0)
    assert again.inbound == 0
    assert WebhookEvent.objects.filter(event_type="message.received").count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_message_whose_webhook_was_lost_behind_a_newer_recorded_one_is_backfilled(
    webhooks_off, no_delay, tenant_a, mailbox_factory
):
    """Found by a reader of the code: the listing started at the newest message recorded (less
    15 minutes of clock margin). A message whose webhook was lost, followed 16 minutes later by
    one whose webhook arrived, was before every listing from then on: lost for good. The
    listing now starts where the last complete listing reached (the mailbox's mark)."""
    sandbox = webhooks_off
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    sandbox.inbound(mailbox.inbox_id, from_="kim@customer.test", subject="Lost", message_id=LOST)
    InboundMessage.objects.create(  # a newer message, recorded by its webhook
        tenant=tenant_a,
        mailbox=mailbox,
        thread_id="thr_newer",
        message_id="<newer@customer.test>",
        sender="max@customer.test",
        received_at=timezone.now() + timedelta(minutes=16),
    )
    started = timezone.now()

    report = webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()
    again = webhooks_backfill(tenant_id=tenant_a.pk)

    assert (report.inbound, report.errors, again.inbound) == (1, 0, 0)
    assert InboundMessage.objects.filter(mailbox=mailbox, message_id=LOST).count() == 1
    mark = InboundBackfillMark.objects.get(mailbox=mailbox)
    assert started <= mark.covered_until <= timezone.now()


LOST = "<lost@customer.test>"


@pytest.mark.django_db(transaction=True)
def test_one_message_id_in_two_mailboxes_of_a_tenant_is_backfilled_in_both(
    webhooks_off, no_delay, tenant_a, mailbox_factory
):
    """Found by a reader of the code: the found event's ledger id named the Message-ID only, so
    one customer's message to two mailboxes of a tenant (or a sender reusing a Message-ID) was
    backfilled in the first mailbox and refused as a copy in the second, on every run."""
    sandbox = webhooks_off
    boxes = [mailbox_factory(tenant_a), mailbox_factory(tenant_a)]
    registration.webhook_register(tenant=tenant_a)
    for box in boxes:
        sandbox.inbound(box.inbox_id, from_="kim@customer.test", subject="Both", message_id=LOST)

    report = webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()

    assert report.inbound == 2
    assert sorted(
        InboundMessage.objects.filter(message_id=LOST).values_list("mailbox_id", flat=True)
    ) == sorted(box.pk for box in boxes)


@pytest.mark.django_db(transaction=True)
def test_a_listing_that_names_another_inbox_records_nothing_from_it(
    webhooks_off, no_delay, tenant_a, mailbox_factory
):
    """The backfill records what it found in the inbox it asked about, never in the one an answer
    names: a listing of A's inbox holding B's message records nothing from that answer (B's own
    listing records it in B)."""
    sandbox = webhooks_off
    first, second = mailbox_factory(tenant_a), mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    sandbox.inbound(second.inbox_id, from_="kim@customer.test", subject="For B", message_id=LOST)
    listing = httpx.get(
        f"{sandbox.base_url}/v0/inboxes/{second.inbox_id}/messages",
        headers={"Authorization": f"Bearer {second.api_key()}"},
    ).json()
    assert [m["inbox_id"] for m in listing["messages"]] == [second.inbox_id]
    sandbox.fault("list_messages", "json_2xx_before", inbox_id=first.inbox_id, answer=listing)

    report = webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()
    sandbox.clear_faults()

    assert (report.inbound, report.errors) == (1, 1)
    assert not InboundMessage.objects.filter(mailbox=first).exists()
    assert InboundMessage.objects.filter(mailbox=second, message_id=LOST).count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_inbox_busier_than_a_runs_budget_is_listed_further_on_every_run(
    webhooks_off, no_delay, settings, tenant_a, mailbox_factory
):
    """Found by a reviewer: a run cut short by its budget marked where it got to, and the next
    run listed from 15 minutes before that mark (the clock margin), so an inbox with more
    messages in 15 minutes than a run lists (a broadcast's sends count) never got further. A run
    cut short now resumes from AgentMail's time of the last message it got through."""
    sandbox = webhooks_off
    settings.WEBHOOK_BACKFILL_CALLS_PER_KEY = 2
    settings.AGENTMAIL_LOOKUP_PAGE_SIZE = 2
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    for n in range(9):
        sandbox.inbound(
            mailbox.inbox_id, from_=f"c{n}@customer.test", subject="Hi", message_id=f"<m{n}@c.test>"
        )

    found: list[int] = []
    while not found or (found[-1] and len(found) < 6):
        found.append(webhooks_backfill(tenant_id=tenant_a.pk).inbound)
    apply_stored()

    # 2 pages of 2 a run: 4 the first time; each run after it lists the last message got
    # through again (a millisecond of overlap, and the sandbox's messages may share one), so it
    # finds 2 or 3 new, until a run finds nothing left. Before, every run after the first found 0.
    assert found[0] == 4 and all(found[:-1]) and found[-1] == 0
    assert sum(found) == 9
    assert InboundMessage.objects.filter(mailbox=mailbox).count() == 9
    # A run got to the end and covered the inbox up to its horizon.
    assert InboundBackfillMark.objects.get(mailbox=mailbox).covered_until > mailbox.created_at


@pytest.mark.django_db(transaction=True)
def test_a_backfilled_message_gets_its_reply_to_from_its_late_webhook(
    webhooks_off, no_delay, client, tenant_a, mailbox_factory, hook_for
):
    """Found by an outside probe: AgentMail's listing of an inbox leaves out a message's
    Reply-To (``MessageItem``, reference §2.4), so a message the backfill recorded had none,
    and its real webhook, arriving later with it, was "already recorded": the draft page never
    said where the customer asked replies to go. The late webhook now fills it in."""
    sandbox = webhooks_off
    mailbox = mailbox_factory(tenant_a)
    hook = hook_for(tenant_a)
    sent = sandbox.inbound(
        mailbox.inbox_id,
        from_="Jane <jane@customer.test>",
        subject="Refund",
        text="Refund me",
        reply_to=["Refunds <refunds@elsewhere.test>"],
    )

    report = webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()
    backfilled = InboundMessage.objects.get().reply_to
    [event] = [e for e in sandbox.events() if e["event_id"] == sent["event_id"]]
    hook.post(client, event["payload"])
    apply_stored()

    assert (report.inbound, backfilled) == (1, [])
    assert InboundMessage.objects.get().reply_to == ["refunds@elsewhere.test"]
    assert WebhookEvent.objects.get(svix_id__startswith="msg_").state == "applied"


def _disable(tenant, mailbox, admin) -> None:
    provisioning.mailbox_set_status(
        tenant=tenant, mailbox_id=mailbox.pk, status="disabled", actor=admin
    )


@pytest.mark.django_db(transaction=True)
def test_a_disabled_mailboxs_inbox_is_listed_and_its_late_webhook_changes_nothing(
    webhooks_off, no_delay, client, tenant_a, member_of, mailbox_factory
):
    """Found by a probe: the backfill listed active mailboxes only, while a disabled mailbox
    still receives mail at AgentMail (its webhooks are applied: test_inbox_window). With the
    receiver down, a customer's message to it was recorded by nothing, and once the mailbox
    had been disabled longer than WEBHOOK_BACKFILL_MAX_AGE_HOURS, by nothing ever."""
    sandbox = webhooks_off
    mailbox = mailbox_factory(tenant_a)
    endpoint = WebhookEndpoint.objects.get(tenant=tenant_a)
    hook = Hook(endpoint, endpoint.secrets.get(retired_at=None).plaintext())
    _disable(tenant_a, mailbox, member_of(tenant_a, "admin").user)
    sent = sandbox.inbound(
        mailbox.inbox_id, from_="Jane <jane@customer.test>", subject="Refund", text="Refund me"
    )

    report = webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()
    again = webhooks_backfill(tenant_id=tenant_a.pk)
    recorded = inbound_rows()
    [event] = [e for e in sandbox.events() if e["event_id"] == sent["event_id"]]
    hook.post(client, event["payload"])

    assert (report.inbound, report.errors, again.inbound) == (1, 0, 0)
    assert InboundMessage.objects.get(mailbox=mailbox).message_id == sent["message_id"]
    assert inbound_rows() == recorded
    late = WebhookEvent.objects.get(svix_id__startswith="msg_")
    assert (late.state, late.outcome) == ("applied", "inbound message already recorded")


@pytest.mark.django_db(transaction=True)
def test_a_disabled_mailbox_of_a_recovered_pod_is_listed_with_its_new_key(
    webhooks_off, no_delay, tenant_a, member_of, mailbox_factory
):
    """A disabled mailbox stays disabled through the recovery of its tenant's deleted pod, with
    a new inbox and a new key of its own: the backfill lists that inbox with that key."""
    sandbox = webhooks_off
    mailbox = mailbox_factory(tenant_a)
    _disable(tenant_a, mailbox, member_of(tenant_a, "admin").user)
    tenant_a.refresh_from_db()
    old_key = mailbox.api_key()
    sdk = sandbox.sdk()
    sdk.inboxes.delete(mailbox.inbox_id, request_options={"max_retries": 0})
    sdk.pods.delete(tenant_a.agentmail_pod_id, request_options={"max_retries": 0})
    [recovered] = recovery.tenant_pod_recover(tenant=tenant_a)
    sent = sandbox.inbound(recovered.inbox_id, from_="kim@customer.test", subject="After")

    report = webhooks_backfill(tenant_id=tenant_a.pk)
    apply_stored()

    assert (recovered.status, recovered.key_refused, recovered.api_key() != old_key) == (
        "disabled",
        False,
        True,
    )
    assert (report.inbound, report.errors) == (1, 0)
    assert InboundMessage.objects.get(mailbox=mailbox).message_id == sent["message_id"]


@pytest.mark.django_db(transaction=True)
def test_a_suspended_tenants_mail_is_backfilled_as_its_webhooks_are_applied(
    webhooks_off, no_delay, tenant_a, member_of, mailbox_factory
):
    """Found by a probe: the backfill skipped suspended tenants, while their webhooks are stored
    and applied (README, "A suspended tenant is read-only": what already happened is still
    told). With the receiver down during a suspension, a customer's message and the delivery of
    a send accepted before it were recorded by nothing, and once the suspension had lasted
    longer than WEBHOOK_BACKFILL_MAX_AGE_HOURS, by nothing ever. The backfill only reads, with
    the mailbox's own key; it sends nothing."""
    sandbox = webhooks_off
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    intent = accepted_send(tenant_a, mailbox, member_of(tenant_a, "approver").user)
    onboarding.tenant_suspend(slug=tenant_a.slug, reason="Unpaid invoice")
    sent = sandbox.inbound(
        mailbox.inbox_id, from_="Jane <jane@customer.test>", subject="Refund", text="Refund me"
    )
    sends_before = len(sandbox.ledger())

    report = webhooks_backfill()
    apply_stored()

    assert (report.deliveries, report.inbound, report.errors) == (1, 1, 0)
    assert InboundMessage.objects.get(mailbox=mailbox).message_id == sent["message_id"]
    assert set(RecipientDelivery.objects.filter(intent=intent).values_list("state", flat=True)) == {
        "delivered"
    }
    assert len(sandbox.ledger()) == sends_before
