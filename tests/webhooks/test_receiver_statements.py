"""What the receiver and the batch applier send to PostgreSQL, and the lock behaviour that depends
on how those statements are split: the receiver is one INSERT (store first); the applier takes a
batch in one transaction of a few hand-written statements per event (the ORM's compile cost per
query was most of the CPU), the message locks in a statement that completes before any intent is
read, and a held message lock leaves the event pending instead of blocking the applier."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext

from intents.models import IntentEvent, SendIntent
from tests.webhooks.conftest import apply_stored, delivery_payload, new_svix_id
from webhooks.models import RecipientDelivery, WebhookEvent
from webhooks.services import applier, apply

_TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


@pytest.fixture
def hook(tenant_a, hook_for):
    return hook_for(tenant_a)


@pytest.fixture
def intent(tenant_a, mailbox_row, intent_row):
    return intent_row(mailbox_row(tenant_a), to=["jane@customer.test"], cc=["ops@customer.test"])


def captured_post(client, hook, payload) -> list[str]:
    """The SQL of one delivery, once the endpoint is cached and touched by an earlier one."""
    with CaptureQueriesContext(connection) as queries:
        response = hook.post(client, payload, apply=False)
    assert response.status_code == 200
    return [query["sql"] for query in queries.captured_queries]


def captured_apply() -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        apply_stored()
    return [query["sql"] for query in queries.captured_queries]


def work(statements: list[str]) -> list[str]:
    return [sql for sql in statements if not sql.startswith(_TRANSACTION_CONTROL)]


def own(statements: list[str]) -> list[str]:
    """Without the wake-up of the applier (django-q2's queue insert, once per WAKE_INTERVAL)."""
    return [sql for sql in statements if "django_q" not in sql]


@pytest.mark.django_db(transaction=True)
def test_the_receiver_stores_a_delivery_in_one_statement_and_applies_nothing(client, hook, intent):
    hook.post(client, delivery_payload("sent", intent))

    statements = own(captured_post(client, hook, delivery_payload("delivered", intent)))

    # Autocommit: the INSERT is its own transaction, durable before the answer.
    assert len(statements) == 1
    assert statements[0].startswith(f"INSERT INTO {WebhookEvent._meta.db_table}")
    assert WebhookEvent.objects.filter(state="pending").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_batch_is_one_transaction_of_a_few_statements_per_event_without_savepoint(
    client, hook, intent, tenant_a, mailbox_row, intent_row
):
    other = intent_row(mailbox_row(tenant_a, "sales"), to=["max@customer.test"])
    hook.post(client, delivery_payload("sent", intent))
    hook.post(client, delivery_payload("sent", other))
    for target in (intent, other, intent):
        hook.post(client, delivery_payload("delivered", target), apply=False)

    statements = captured_apply()

    outbox_reads = [sql for sql in statements if "agenteventendpoint" in sql.lower()]
    transactions = [sql for sql in statements if sql == "BEGIN"]
    # The batch, whatever its number of events: its locked read, the lock timeout, the message
    # locks; the mailbox and intent lookup of all three events; their intents' recipient rows
    # read (locked) and, once all three are applied in memory, written; the outcomes of all three
    # with their journal rows; the agent events outbox's one read of the tenant's endpoints (two
    # of the three moved a recipient). Then an empty look that ends the drain.
    assert len(transactions) == 2
    assert [sql for sql in statements if sql.startswith("SAVEPOINT")] == []
    assert len(outbox_reads) == 1
    assert len(work(statements)) == 3 + 1 + 2 + 1 + 1 + 1
    assert WebhookEvent.objects.filter(state="applied").count() == 5


def test_a_suppressing_event_adds_only_the_suppression_upsert(client, hook, intent):
    hook.post(client, delivery_payload("delivered", intent))
    hook.post(client, delivery_payload("sent", intent), apply=False)
    baseline = len(work(captured_apply()))
    hook.post(client, delivery_payload("bounced", intent), apply=False)

    statements = work(captured_apply())

    # The baseline's "sent" moved nobody, so it wrote no recipient row and read no outbox
    # endpoints; the bounce writes its rows, upserts the suppressions and reads the endpoints.
    assert len(statements) == baseline + 1 + 1 + 1


def test_the_message_lock_completes_before_the_statement_that_reads_the_intent(
    client, hook, intent
):
    hook.post(client, delivery_payload("sent", intent))
    hook.post(client, delivery_payload("delivered", intent), apply=False)

    statements = work(captured_apply())

    locking = [i for i, sql in enumerate(statements) if "pg_advisory_xact_lock" in sql]
    reading = [i for i, sql in enumerate(statements) if SendIntent._meta.db_table in sql]
    assert (len(locking), len(reading)) == (1, 1)
    assert locking[0] < reading[0]


def test_the_journal_row_is_what_the_orm_wrote(client, hook, intent):
    hook.post(client, delivery_payload("delivered", intent))
    hook.post(
        client,
        delivery_payload("bounced", intent, recipients=["ops@customer.test", "x@elsewhere.test"]),
    )
    svix_id = new_svix_id()
    payload = delivery_payload("bounced", intent)

    hook.post(client, payload, svix_id=svix_id)

    event = WebhookEvent.objects.get(svix_id=svix_id)
    row = IntentEvent.objects.get(actor_label=svix_id)
    assert {
        field.attname: getattr(row, field.attname)
        for field in IntentEvent._meta.concrete_fields
        if field.attname not in ("id", "created_at")
    } == {
        "tenant_id": intent.tenant_id,
        "draft_id": intent.draft_id,
        "intent_id": intent.pk,
        "broadcast_id": None,
        "actor_kind": "webhook",
        "actor_user_id": None,
        "actor_token_id": None,
        "actor_label": svix_id,
        "action": "delivery.bounced",
        "from_state": "",
        "to_state": "",
        "reason": "",
        "data": {
            "webhook_event_id": event.pk,
            "event_id": payload["event_id"],
            "moved": ["jane@customer.test"],
            "unchanged": ["ops@customer.test"],
            "suppressed": ["jane@customer.test"],
            "unknown_recipients": 0,
            "unapproved_recipients": [],
        },
    }
    assert event.received_at <= row.created_at <= event.applied_at
    assert event.outcome == "1 of 2 recipients moved to bounced; 1 suppressed"
    named_others = IntentEvent.objects.get(action="delivery.bounced", data__unknown_recipients=1)
    assert named_others.data["suppressed"] == ["ops@customer.test"]
    assert named_others.data["unapproved_recipients"] == ["x@elsewhere.test"]


def _wait_for_a_lock_waiter(timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            )
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.02)
    return False


@pytest.mark.django_db(transaction=True)
def test_an_intent_committed_while_the_applier_waits_for_the_message_lock_is_seen(
    client, hook, tenant_a, mailbox_row, intent_row
):
    """The worker records a message id and takes the message lock before its commit; an applier
    that waited for that lock must then find the intent (applied), not defer the event."""
    intent = intent_row(
        mailbox_row(tenant_a), to=["jane@customer.test"], message_id=None, state="uncertain"
    )
    message_id = "<recorded-while-waiting@sandbox.test>"
    locked = threading.Event()
    saw_waiter: list[bool] = []

    def record_and_commit_while_the_webhook_waits():
        try:
            with transaction.atomic():
                SendIntent.objects.filter(pk=intent.pk).update(
                    state="accepted", provider_message_id=message_id, updated_at=Now()
                )
                apply._lock_message(intent.tenant_id, message_id)
                locked.set()
                saw_waiter.append(_wait_for_a_lock_waiter())
        finally:
            connections.close_all()

    worker = threading.Thread(target=record_and_commit_while_the_webhook_waits)
    worker.start()
    locked.wait(5)
    payload = delivery_payload(
        "delivered", (intent.mailbox.inbox_id, message_id, "thr_w", ["jane@customer.test"])
    )
    response = hook.post(client, payload)
    worker.join()

    assert saw_waiter == [True]
    assert (response.status_code, response.json()["state"]) == (200, "pending")
    assert WebhookEvent.objects.get().state == "applied"
    assert RecipientDelivery.objects.get(intent=intent).state == "delivered"


@pytest.mark.django_db(transaction=True)
def test_a_held_message_lock_leaves_the_event_pending_and_a_redelivery_is_a_duplicate(
    client, hook, intent, caplog, monkeypatch
):
    monkeypatch.setattr(applier, "APPLY_LOCK_TIMEOUT_MS", 200)
    locked, release = threading.Event(), threading.Event()
    held_until_released = []

    def hold_the_message_lock():
        try:
            with transaction.atomic():
                apply._lock_message(intent.tenant_id, intent.provider_message_id)
                locked.set()
                held_until_released.append(release.wait(60))
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_message_lock)
    holder.start()
    locked.wait(5)
    payload, svix_id = delivery_payload("delivered", intent), new_svix_id()
    first = hook.post(client, payload, svix_id=svix_id, apply=False)
    again = hook.post(client, payload, svix_id=svix_id, apply=False)
    finished_while_locked = apply_stored()
    pending = WebhookEvent.objects.get().state
    release.set()
    holder.join()

    moved = apply.events_replay_pending()

    assert (first.status_code, first.json()["state"], pending) == (200, "pending", "pending")
    assert (again.status_code, again.json()["duplicate"]) == (200, True)
    # Both answers, and the applier's give-up, came while the lock was still held (the holder was
    # let go by us, not by its own timeout): neither waits for the lock.
    assert finished_while_locked == 0
    assert held_until_released == [True]
    assert "webhooks.event.apply_postponed" in [record.getMessage() for record in caplog.records]
    assert moved == 1
    assert set(RecipientDelivery.objects.values_list("state", flat=True)) == {"delivered"}
