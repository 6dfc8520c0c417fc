"""The webhook backfill against answers a broken or hostile provider may give, played by the
sandbox's faults over real HTTP: a listing whose next page token never changes, a page with far
more messages than asked, a message id repeated across pages, NUL, lone surrogates and a 10 MB
subject in listed messages, an inbox that answers slowly. Every run stays bounded (calls, items,
time), stores nothing wrong, logs a specific reason, and another tenant's mailboxes are still
backfilled."""

from __future__ import annotations

import json
import logging
import time

import httpx
import pytest

from intents.models import Suppression
from mailboxes.key_health import mailbox_key_refused
from tests.webhooks.conftest import apply_stored
from tests.webhooks.test_backfill import accepted_send
from webhooks import registration
from webhooks.models import InboundMessage, WebhookEvent
from webhooks.services.backfill import webhooks_backfill


@pytest.fixture
def quiet_sandbox(sandbox, settings):
    """Webhooks off (what the backfill is for), no backfill delay, no pacing."""
    sandbox.config(webhooks_enabled=False)
    settings.WEBHOOK_BACKFILL_AFTER_SECONDS = 0
    settings.WEBHOOK_BACKFILL_CALLS_PER_SECOND = 0
    yield sandbox
    sandbox.clear_faults()
    sandbox.config(webhooks_enabled=True)


@pytest.fixture
def two_tenants(tenant_a, tenant_b, mailbox_factory):
    """A mailbox of tenant A and one of tenant B, each tenant with its webhook endpoint: the
    hostile one and the other, which must be backfilled all the same."""
    registration.webhook_register(tenant=tenant_a)
    registration.webhook_register(tenant=tenant_b)
    return mailbox_factory(tenant_a), mailbox_factory(tenant_b)


def listing_of(sandbox, mailbox) -> dict:
    """The inbox's real listing, as AgentMail's JSON, to be played back altered."""
    return httpx.get(
        f"{sandbox.base_url}/v0/inboxes/{mailbox.inbox_id}/messages",
        headers={"Authorization": f"Bearer {mailbox.api_key()}"},
        params={"ascending": "true"},
    ).json()


def list_calls(sandbox, mailbox, seen: set) -> int:
    return calls_to(sandbox, mailbox, "list_messages", seen)


def calls_to(sandbox, mailbox, route: str, seen: set) -> int:
    return sum(
        1
        for r in sandbox.requests(route=route)
        if r["id"] not in seen and f"/inboxes/{mailbox.inbox_id}/" in r["path"]
    )


def request_ids(sandbox) -> set:
    return {r["id"] for r in sandbox.requests()}


@pytest.mark.django_db(transaction=True)
def test_a_next_page_token_that_never_changes_ends_the_listing_and_says_why(
    quiet_sandbox, two_tenants, caplog
):
    """The same page again and again (the same token, the same message): stored once, the
    listing stops at the repeated token, and the other tenant is backfilled in the same run."""
    sandbox = quiet_sandbox
    hostile, other = two_tenants
    sandbox.inbound(
        hostile.inbox_id, from_="kim@customer.test", subject="Again", message_id="<a@c>"
    )
    sandbox.inbound(other.inbox_id, from_="max@customer.test", subject="Hello", message_id="<b@c>")
    page = {**listing_of(sandbox, hostile), "next_page_token": "page-2"}
    sandbox.fault(
        "list_messages", "json_2xx_before", times=0, inbox_id=hostile.inbox_id, answer=page
    )
    seen = request_ids(sandbox)

    with caplog.at_level(logging.WARNING, logger="webhooks.backfill"):
        report = webhooks_backfill()
    apply_stored()

    assert list_calls(sandbox, hostile, seen) == 2
    assert (report.inbound, report.errors) == (2, 1)
    assert "webhooks.backfill.page_token_repeated" in [r.getMessage() for r in caplog.records]
    assert InboundMessage.objects.filter(mailbox=hostile, message_id="<a@c>").count() == 1
    assert InboundMessage.objects.filter(mailbox=other, message_id="<b@c>").count() == 1


def answer_listing(sandbox, mailbox, page: dict, *, times: int = 1) -> None:
    """A fault answering the inbox's listings with ``page``; sent as escaped JSON, since a lone
    surrogate exists only as an escape (the sandbox client's UTF-8 JSON cannot carry it)."""
    spec = {"route": "list_messages", "mode": "json_2xx_before", "times": times}
    spec |= {"inbox_id": mailbox.inbox_id, "answer": page}
    body = json.dumps(spec).encode()
    headers = {"Content-Type": "application/json"}
    httpx.post(
        f"{sandbox.base_url}/_sandbox/faults", content=body, headers=headers
    ).raise_for_status()


def hostile_page(sandbox, mailbox, **changes) -> dict:
    """The inbox's one real listed message, altered by ``changes``, as a one-page listing."""
    page = listing_of(sandbox, mailbox)
    [message] = page["messages"]
    return {**page, "messages": [{**message, **changes}]}


@pytest.mark.django_db(transaction=True)
def test_a_page_with_far_more_messages_than_asked_stores_nothing_and_says_why(
    quiet_sandbox, settings, two_tenants, caplog
):
    settings.AGENTMAIL_LOOKUP_PAGE_SIZE = 2
    sandbox = quiet_sandbox
    hostile, other = two_tenants
    sandbox.inbound(hostile.inbox_id, from_="kim@customer.test", subject="Hi", message_id="<a@c>")
    sandbox.inbound(other.inbox_id, from_="max@customer.test", subject="Hello", message_id="<b@c>")
    page = listing_of(sandbox, hostile)
    [message] = page["messages"]
    flood = [{**message, "message_id": f"<flood-{n}@c>"} for n in range(500)]
    page = {**page, "count": 10**18, "messages": flood}
    sandbox.fault(
        "list_messages", "json_2xx_before", times=0, inbox_id=hostile.inbox_id, answer=page
    )

    with caplog.at_level(logging.WARNING, logger="webhooks.backfill"):
        report = webhooks_backfill()

    assert (report.inbound, report.errors) == (1, 1)
    assert "webhooks.backfill.page_oversized" in [r.getMessage() for r in caplog.records]
    assert not WebhookEvent.objects.filter(inbox_id=hostile.inbox_id).exists()
    assert WebhookEvent.objects.filter(inbox_id=other.inbox_id).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "changes",
    [
        {"message_id": "<nul\x00@c>"},
        {"message_id": "<lone\ud800@c>"},
        {"subject": "nul \x00 here", "from": "Kim\x00 <kim@customer.test>"},
        {"subject": "lone \udfff here", "thread_id": "thr\ud800"},
    ],
    ids=["nul in id", "surrogate in id", "nul in subject and sender", "surrogate in subject"],
)
def test_listed_messages_with_nul_or_lone_surrogates_are_stored_replaced_and_the_listing_goes_on(
    quiet_sandbox, tenant_a, mailbox_factory, changes
):
    sandbox = quiet_sandbox
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    sandbox.inbound(mailbox.inbox_id, from_="kim@customer.test", subject="Hi", message_id="<a@c>")
    answer_listing(sandbox, mailbox, hostile_page(sandbox, mailbox, **changes))

    report = webhooks_backfill()
    apply_stored()
    again = webhooks_backfill()
    apply_stored()

    assert report.errors == 0
    assert (report.inbound, again.inbound) == (1, 1 if "message_id" in changes else 0)
    assert InboundMessage.objects.filter(mailbox=mailbox).count() == (
        2 if "message_id" in changes else 1
    )


@pytest.mark.django_db(transaction=True)
def test_a_listed_message_of_ten_megabytes_is_refused_and_the_listing_goes_on(
    quiet_sandbox, tenant_a, mailbox_factory, caplog
):
    sandbox = quiet_sandbox
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    sandbox.inbound(mailbox.inbox_id, from_="kim@customer.test", subject="Hi", message_id="<a@c>")
    sandbox.inbound(mailbox.inbox_id, from_="max@customer.test", subject="Ok", message_id="<b@c>")
    page = listing_of(sandbox, mailbox)
    big, fine = page["messages"]
    page = {**page, "messages": [{**big, "subject": "x" * 10_000_000}, fine]}
    sandbox.fault(
        "list_messages", "json_2xx_before", times=1, inbox_id=mailbox.inbox_id, answer=page
    )

    with caplog.at_level(logging.WARNING, logger="webhooks.backfill"):
        report = webhooks_backfill()
    apply_stored()

    sizes = [len(str(p)) for p in WebhookEvent.objects.values_list("payload", flat=True)]
    assert (report.inbound, report.errors) == (1, 1)
    assert max(sizes) < 10_000
    assert "webhooks.backfill.message_oversized" in [r.getMessage() for r in caplog.records]
    assert InboundMessage.objects.filter(mailbox=mailbox).count() == 1


def inbound_of(sandbox, mailbox, n: int) -> None:
    for i in range(n):
        sandbox.inbound(
            mailbox.inbox_id, from_=f"c{i}@customer.test", subject="Hi", message_id=f"<m{i}@c>"
        )


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_budget_one_tenant_spends_starts_with_the_others_next_time(
    quiet_sandbox, settings, two_tenants
):
    """Tenant A's busy inbox spends the whole run's budget (2 calls here, 500 by default: 25
    such mailboxes). Runs went in tenant order, so tenant B, after it, was never asked while A
    had more to list (or, with lookups failing, for the 48 hours its sends are looked up)."""
    settings.AGENTMAIL_LOOKUP_PAGE_SIZE = 1
    settings.WEBHOOK_BACKFILL_MAX_CALLS = 2
    sandbox = quiet_sandbox
    busy, other = two_tenants
    inbound_of(sandbox, busy, 6)
    inbound_of(sandbox, other, 1)

    first = webhooks_backfill()
    second = webhooks_backfill()
    apply_stored()

    assert (first.inbound, first.limited) == (2, [busy.pk, other.pk])
    assert second.inbound >= 1
    assert InboundMessage.objects.filter(mailbox=other).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_slow_inbox_cannot_hold_a_run_past_the_tasks_time_limit(
    quiet_sandbox, settings, two_tenants
):
    """Calls start only while they can end inside 90 % of Q_TIMEOUT (here 3.6 s, less a call's
    connect and read timeouts, 2.5 s: 1.1 s). Tenant A's inbox answers each page in a second:
    the run stopped only at its call budget (8 pages, 8 s here; 20 calls of up to 18 s each per
    mailbox by default), past the task's limit, where django-q kills it mid-run, at the same
    place every time."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 4}
    settings.AGENTMAIL_CONNECT_TIMEOUT = 0.5
    settings.AGENTMAIL_READ_TIMEOUT = 2.0
    settings.AGENTMAIL_LOOKUP_PAGE_SIZE = 1
    settings.WEBHOOK_BACKFILL_CALLS_PER_KEY = 8
    sandbox = quiet_sandbox
    slow, other = two_tenants
    inbound_of(sandbox, slow, 8)
    inbound_of(sandbox, other, 1)
    sandbox.fault("list_messages", "delay", times=0, delay=1.0, inbox_id=slow.inbox_id)
    seen = request_ids(sandbox)

    started = time.monotonic()
    first = webhooks_backfill()
    took = time.monotonic() - started
    second = webhooks_backfill()
    apply_stored()

    assert took < 3.6
    assert 2 <= list_calls(sandbox, slow, seen) <= 4  # one or two calls in each run
    assert first.limited == [slow.pk, other.pk]
    assert other.pk not in second.limited
    assert InboundMessage.objects.filter(mailbox=other).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_looked_up_message_of_two_megabytes_is_refused_and_nothing_is_stored(
    quiet_sandbox, tenant_a, member_of, mailbox_factory, caplog
):
    """The delivery question: the lookup's answer names our message id, but its thread id and
    time were stored whole in the ledger, however large."""
    sandbox = quiet_sandbox
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    intent = accepted_send(tenant_a, mailbox, member_of(tenant_a, "approver").user)
    real = httpx.get(
        f"{sandbox.base_url}/v0/inboxes/{mailbox.inbox_id}/messages/{intent.provider_message_id}",
        headers={"Authorization": f"Bearer {mailbox.api_key()}"},
    ).json()
    answer = {**real, "labels": ["sent", "delivered"], "thread_id": "t" * 2_000_000}
    sandbox.fault("get_message", "json_2xx_before", inbox_id=mailbox.inbox_id, answer=answer)

    with caplog.at_level(logging.WARNING, logger="webhooks.backfill"):
        report = webhooks_backfill()

    assert (report.deliveries, report.errors) == (0, 1)
    assert "webhooks.backfill.message_oversized" in [r.getMessage() for r in caplog.records]
    assert not WebhookEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_refused_key_ends_its_mailboxs_questions_at_the_first_refusal(
    quiet_sandbox, tenant_a, member_of, mailbox_factory, caplog
):
    """AgentMail refuses the key (401): every other call with it would be refused the same way,
    so the run asks nothing more with it (it spent a call on every unconfirmed send, up to the
    key's budget, run after run). The mailbox is not marked refused here: a key may be refused
    the right to read and still send."""
    sandbox = quiet_sandbox
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    approver = member_of(tenant_a, "approver").user
    for _ in range(3):
        accepted_send(tenant_a, mailbox, approver)
    sandbox.fault("get_message", "401_unknown_key", times=0, inbox_id=mailbox.inbox_id)
    sandbox.fault("list_messages", "401_unknown_key", times=0, inbox_id=mailbox.inbox_id)
    seen = request_ids(sandbox)

    with caplog.at_level(logging.WARNING, logger="webhooks.backfill"):
        report = webhooks_backfill()

    assert calls_to(sandbox, mailbox, "get_message", seen) == 1
    assert calls_to(sandbox, mailbox, "list_messages", seen) == 1
    assert report.calls == 2
    assert "webhooks.backfill.key_refused" in [r.getMessage() for r in caplog.records]
    mailbox.refresh_from_db()
    assert mailbox.key_refused_at is None
    assert not WebhookEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_mailbox_whose_key_was_refused_is_not_asked_until_it_works_again(
    quiet_sandbox, two_tenants
):
    """As its sends wait (intents.sending.lease.mailbox_key_usable), its backfill waits: no
    call with a key AgentMail refused; the other tenant's mailbox is asked as before."""
    sandbox = quiet_sandbox
    refused, other = two_tenants
    sandbox.inbound(refused.inbox_id, from_="kim@customer.test", subject="Hi", message_id="<a@c>")
    sandbox.inbound(other.inbox_id, from_="max@customer.test", subject="Hello", message_id="<b@c>")
    assert mailbox_key_refused(
        mailbox_id=refused.pk, api_key_id=refused.provider_api_key_id, detail="401 unknown key"
    )
    seen = request_ids(sandbox)

    report = webhooks_backfill()
    apply_stored()

    assert list_calls(sandbox, refused, seen) == 0
    assert list_calls(sandbox, other, seen) == 1
    assert report.inbound == 1
    assert not InboundMessage.objects.filter(mailbox=refused).exists()
    assert InboundMessage.objects.filter(mailbox=other, message_id="<b@c>").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_rate_limited_key_ends_its_mailboxs_questions_for_the_run(
    quiet_sandbox, tenant_a, member_of, mailbox_factory, caplog
):
    """AgentMail answers 429: the key is over its rate limit, which its sends share (limits are
    per key). The run asks nothing more with it (it went on to every other unconfirmed send,
    up to the key's budget, and then listed the inbox, each call answered 429 again and each
    one more against the limit the mailbox's sends were waiting out); the next run asks again."""
    sandbox = quiet_sandbox
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    approver = member_of(tenant_a, "approver").user
    for _ in range(3):
        accepted_send(tenant_a, mailbox, approver)
    sandbox.fault("get_message", "429", times=0, retry_after=30, inbox_id=mailbox.inbox_id)
    sandbox.fault("list_messages", "429", times=0, retry_after=30, inbox_id=mailbox.inbox_id)
    seen = request_ids(sandbox)

    with caplog.at_level(logging.WARNING, logger="webhooks.backfill"):
        report = webhooks_backfill()

    assert calls_to(sandbox, mailbox, "get_message", seen) == 1
    assert calls_to(sandbox, mailbox, "list_messages", seen) == 0
    assert (report.calls, report.errors) == (1, 1)
    assert report.limited == [mailbox.pk]
    assert "webhooks.backfill.key_rate_limited" in [r.getMessage() for r in caplog.records]
    assert not WebhookEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_rate_limited_listing_is_reported_as_cut_short(quiet_sandbox, tenant_a, mailbox_factory):
    sandbox = quiet_sandbox
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    sandbox.fault("list_messages", "429", times=0, retry_after=30, inbox_id=mailbox.inbox_id)
    seen = request_ids(sandbox)

    report = webhooks_backfill()

    assert calls_to(sandbox, mailbox, "list_messages", seen) == 1
    assert report.limited == [mailbox.pk]


@pytest.mark.parametrize(
    "field, value",
    [("message_id", "<another-message@agentmail.to>"), ("inbox_id", "elsewhere@agentmail.to")],
)
@pytest.mark.django_db(transaction=True)
def test_a_looked_up_message_that_is_another_one_changes_nothing(
    quiet_sandbox, tenant_a, member_of, mailbox_factory, caplog, field, value
):
    """The delivery question asks for one message; an answer naming another message (or
    inbox) says nothing about ours: its 'rejected' label became our send's rejection and
    suppressed every one of its recipients."""
    sandbox = quiet_sandbox
    mailbox = mailbox_factory(tenant_a)
    registration.webhook_register(tenant=tenant_a)
    intent = accepted_send(tenant_a, mailbox, member_of(tenant_a, "approver").user)
    real = httpx.get(
        f"{sandbox.base_url}/v0/inboxes/{mailbox.inbox_id}/messages/{intent.provider_message_id}",
        headers={"Authorization": f"Bearer {mailbox.api_key()}"},
    ).json()
    answer = {**real, "labels": ["sent", "rejected"], field: value}
    sandbox.fault("get_message", "json_2xx_before", inbox_id=mailbox.inbox_id, answer=answer)

    with caplog.at_level(logging.WARNING, logger="webhooks.backfill"):
        report = webhooks_backfill()
    apply_stored()

    assert (report.deliveries, report.errors) == (0, 1)
    assert "webhooks.backfill.other_message" in [r.getMessage() for r in caplog.records]
    assert not WebhookEvent.objects.exists()
    assert not Suppression.objects.exists()
