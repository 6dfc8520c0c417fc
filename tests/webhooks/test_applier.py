"""The batch applier: pending events applied once each, whoever applies them and however it dies.

- an applier process killed (SIGKILL) in the middle of a batch has committed nothing of it: every
  event of the batch is still pending, and the next applier applies each exactly once;
- two appliers taking batches at the same moment (SKIP LOCKED) apply each event once;
- the task the receiver wakes drains until the ledger is empty, and a wake is enqueued on commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from django.db import connection, connections, transaction
from django_q.models import OrmQ

from intents.models import IntentEvent
from tests.servers import ROOT, server_database_url
from tests.webhooks.conftest import apply_stored, delivery_payload, new_svix_id, received_payload
from webhooks.models import RecipientDelivery, WebhookEvent
from webhooks.services import applier

KILLED_APP = "cs-test-applier-killed"


def journal_per_event() -> Counter:
    return Counter(
        IntentEvent.objects.filter(actor_kind="webhook").values_list("actor_label", flat=True)
    )


def _backend_waits_for_a_lock(application_name: str, timeout: float = 120) -> bool:
    # Long: on a loaded machine the subprocess's Django start-up alone has taken 20 s.
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE a.application_name = %s AND NOT l.granted",
                [application_name],
            )
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.01)
    return False


def _backend_gone(application_name: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                [application_name],
            )
            if not cursor.fetchone()[0]:
                return True
            time.sleep(0.05)
    return False


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_applier_killed_mid_batch_loses_nothing_and_applies_nothing_twice(
    client, tenant_a, hook_for, mailbox_row, intent_row
):
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a)
    first = intent_row(mailbox, to=["jane@customer.test"])
    last = intent_row(mailbox, to=["max@customer.test"])
    hook.post(client, delivery_payload("sent", last))
    # Oldest first: the batch applies both of `first`'s events, then waits for `last`'s row.
    hook.post(client, delivery_payload("sent", first), apply=False)
    hook.post(client, delivery_payload("delivered", first), apply=False)
    hook.post(client, delivery_payload("delivered", last), apply=False)
    locked, release = threading.Event(), threading.Event()

    def hold_the_last_row():
        try:
            with transaction.atomic():
                list(RecipientDelivery.objects.select_for_update().filter(intent=last))
                locked.set()
                release.wait(60)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_last_row)
    holder.start()
    locked.wait(5)
    env = {
        **os.environ,
        "COUNTERSIGN_ENV": "test",
        "DATABASE_URL": server_database_url(KILLED_APP),
        "LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "webhooks_apply", "--once", "--batch", "10"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        waited = _backend_waits_for_a_lock(KILLED_APP)
        # In the batch's transaction `first` has moved to delivered; nobody else can see it yet.
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        release.set()
        holder.join()
    gone = _backend_gone(KILLED_APP)
    after_kill = sorted(WebhookEvent.objects.values_list("state", flat=True))
    first_after_kill = RecipientDelivery.objects.filter(intent=first).count()

    finished = apply_stored()

    assert (waited, proc.returncode, gone) == (True, -signal.SIGKILL, True)
    assert after_kill == ["applied", "pending", "pending", "pending"]
    assert first_after_kill == 0
    assert finished == 3
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    assert set(journal_per_event().values()) == {1}
    assert len(journal_per_event()) == 4
    assert dict(RecipientDelivery.objects.values_list("address", "state")) == {
        "jane@customer.test": "delivered",
        "max@customer.test": "delivered",
    }


@pytest.mark.django_db(transaction=True)
def test_two_appliers_at_once_apply_each_event_once(
    client, tenant_a, hook_for, mailbox_row, intent_row
):
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a)
    intents = [intent_row(mailbox, to=[f"r{i}@customer.test"]) for i in range(12)]
    for intent in intents:
        for kind in ("sent", "delivered", "bounced"):
            hook.post(client, delivery_payload(kind, intent), apply=False)
    start = threading.Barrier(2)
    finished: list[int] = []
    taken: list[int] = []
    lock = threading.Lock()

    def run():
        try:
            start.wait(5)
            while True:
                got, done = applier.events_apply_batch(limit=4)
                with lock:
                    taken.append(got)
                    finished.append(done)
                if not got:
                    return
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert (sum(taken), sum(finished)) == (36, 36)
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}
    assert len(journal_per_event()) == 36
    assert set(journal_per_event().values()) == {1}
    assert set(RecipientDelivery.objects.values_list("state", flat=True)) == {"bounced"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("wake", "tasks"), [(True, 1), (False, 0)])
def test_the_receiver_wakes_the_applier_task_on_commit_unless_a_dedicated_applier_runs(
    client, tenant_a, hook_for, mailbox_row, settings, wake, tasks
):
    settings.WEBHOOK_APPLY_WAKE = wake
    hook = hook_for(tenant_a)
    intent_mailbox = mailbox_row(tenant_a)
    applier._last_wake = -applier.WAKE_INTERVAL
    payload = delivery_payload(
        "delivered", (intent_mailbox.inbox_id, "<m@x.test>", "thr", ["jane@customer.test"])
    )

    hook.post(client, payload, apply=False)

    queued = [task for task in OrmQ.objects.all() if task.func() == "webhooks.tasks.apply_pending"]
    assert len(queued) == tasks
    assert WebhookEvent.objects.get().state == "pending"
    assert applier.events_apply_batch() == (1, 1)  # what the task, or the dedicated loop, runs


@pytest.mark.django_db(transaction=True)
def test_the_dedicated_loop_gathers_a_stream_into_batches(
    client, tenant_a, hook_for, mailbox_row, intent_row
):
    """A steady stream of deliveries is applied in batches of about ``interval`` of events, not
    one or two at a time back to back: each batch is a transaction and a commit whatever its size
    (``applied_at`` is the batch statement's clock, so one value per batch).

    The batch limit is set above anything the stream can post, so no batch is full: a full batch
    is rightly followed by another at once, and on a fast machine (1,706 posts in 1.5 s) those
    back-to-back full batches broke the bound below although the loop waited as it should."""
    hook = hook_for(tenant_a)
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    interval, stop = 0.3, threading.Event()
    # The first request of a process loads the URLconf and its views (1.7 s on a cold run),
    # which would leave the timed stream a single post.
    hook.post(client, delivery_payload("delivered", intent))

    def loop():
        try:
            applier.events_apply_loop(stop=stop, interval=interval, limit=1_000_000)
        finally:
            connections.close_all()

    thread = threading.Thread(target=loop)
    thread.start()
    started, posted = time.monotonic(), 0
    try:
        while time.monotonic() - started < 1.5:
            hook.post(client, delivery_payload("delivered", intent), apply=False)
            posted += 1
        deadline = time.monotonic() + 60
        while WebhookEvent.objects.filter(state="pending").exists():
            assert time.monotonic() < deadline, "the loop stopped applying"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(30)
    elapsed = time.monotonic() - started

    batches = WebhookEvent.objects.values("applied_at").distinct().count() - 1  # the warm-up's
    assert WebhookEvent.objects.filter(state="applied").count() == posted + 1
    assert posted >= 20  # a stream, not a trickle
    assert batches <= elapsed / interval + 2, (batches, posted, elapsed)


def test_the_woken_task_drains_every_batch(client, tenant_a, hook_for, mailbox_row, intent_row):
    hook = hook_for(tenant_a)
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    for _ in range(5):
        hook.post(client, delivery_payload("delivered", intent), apply=False)

    finished = applier.events_apply_pending(settle=0, limit=2)

    assert finished == 5
    assert set(WebhookEvent.objects.values_list("state", flat=True)) == {"applied"}


def test_one_batch_of_mixed_events_gets_each_event_its_own_outcome(
    client, tenant_a, tenant_b, hook_for, mailbox_row, intent_row
):
    """The batch looks up every event's mailbox and intent in one statement and writes every
    outcome in one: each event still gets exactly what it would get alone."""
    hook = hook_for(tenant_a)
    box = mailbox_row(tenant_a)
    sent = intent_row(box, to=["jane@customer.test"])
    other = intent_row(mailbox_row(tenant_a, "sales"), to=["max@customer.test"])
    foreign = intent_row(mailbox_row(tenant_b), to=["eve@customer.test"])
    payloads = {
        "delivered": delivery_payload("delivered", sent),
        "other_sent": delivery_payload("sent", other),
        # Another tenant's inbox, posted to tenant A's endpoint: refused, nothing moved.
        "foreign": delivery_payload("delivered", foreign),
        # A message id no send has recorded yet: deferred until one does.
        "unrecorded": delivery_payload(
            "delivered", (box.inbox_id, "<later@x.test>", "thr", ["jane@customer.test"])
        ),
        "received": received_payload(box, thread_id="thr_in"),
        "unknown_type": {"type": "event", "event_type": "domain.verified", "event_id": "evt_x"},
    }
    ids = {name: new_svix_id() for name in payloads}
    for name, payload in payloads.items():
        assert hook.post(client, payload, svix_id=ids[name], apply=False).status_code == 200

    taken, finished = applier.events_apply_batch()

    states = dict(WebhookEvent.objects.values_list("svix_id", "state"))
    assert {name: states[svix_id] for name, svix_id in ids.items()} == {
        "delivered": "applied",
        "other_sent": "applied",
        "foreign": "rejected",
        "unrecorded": "deferred",
        "received": "applied",
        "unknown_type": "ignored",
    }
    assert (taken, finished) == (6, 6)
    assert dict(RecipientDelivery.objects.values_list("intent_id", "state")) == {
        sent.pk: "delivered",
        other.pk: "sent",
    }
    assert sorted(journal_per_event()) == sorted([ids["delivered"], ids["other_sent"]])


def test_one_batch_of_events_for_the_same_recipients_journals_what_each_one_moved(
    client, tenant_a, hook_for, mailbox_row, intent_row
):
    """The batch advances recipient rows in memory, in order, and writes them once: each event's
    journal row still says whom it moved, and a lower rank after a higher one moves nobody."""
    hook = hook_for(tenant_a)
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"], cc=["ops@customer.test"])
    # Already sent to both before this batch: the rows exist and are locked by the batch.
    hook.post(client, delivery_payload("sent", intent))
    order = [
        ("delivered", ["jane@customer.test"]),
        ("sent", ["jane@customer.test", "ops@customer.test"]),  # late: below both
        ("delivered", ["ops@customer.test"]),
        ("bounced", ["jane@customer.test"]),
        ("delivered", ["jane@customer.test"]),  # after the bounce: nothing
    ]
    ids = [new_svix_id() for _ in order]
    for svix_id, (kind, recipients) in zip(ids, order, strict=True):
        payload = delivery_payload(kind, intent, recipients=recipients)
        hook.post(client, payload, svix_id=svix_id, apply=False)

    assert applier.events_apply_batch() == (5, 5)

    moved = {
        row.actor_label: row.data["moved"]
        for row in IntentEvent.objects.filter(actor_kind="webhook", actor_label__in=ids)
    }
    assert [moved[svix_id] for svix_id in ids] == [
        ["jane@customer.test"],
        [],
        ["ops@customer.test"],
        ["jane@customer.test"],
        [],
    ]
    rows = RecipientDelivery.objects.filter(intent=intent)
    assert dict(rows.values_list("address", "state")) == {
        "jane@customer.test": "bounced",
        "ops@customer.test": "delivered",
    }
    # Each row names the event that last moved it.
    assert dict(rows.values_list("address", "last_event__svix_id")) == {
        "jane@customer.test": ids[3],
        "ops@customer.test": ids[2],
    }


SURVIVOR_APP = "cs-test-applier-outage"


def _backends(application_name: str) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [application_name]
        )
        return [pid for (pid,) in cursor.fetchall()]


def _until(condition, timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_applier_loop_rides_out_a_lost_database_connection(
    client, tenant_a, hook_for, mailbox_row, intent_row
):
    """The dedicated applier (DEPLOYMENT.md) died on the first batch after its connection was
    lost (a PostgreSQL restart, a failover, a killed backend): an OperationalError traceback,
    and no event applied until someone started it again. The worker's loop waits it out."""
    hook = hook_for(tenant_a)
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    env = {
        **os.environ,
        "COUNTERSIGN_ENV": "test",
        "DATABASE_URL": server_database_url(SURVIVOR_APP),
        "LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "webhooks_apply", "--poll", "0.1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # An event its loop applied: the loop's connection is the one open now (the start-up
        # check's is closed). Waiting to catch its look's query in pg_stat_activity instead
        # took 10 s on average: each look is a millisecond in a tenth of a second.
        hook.post(client, delivery_payload("sent", intent), apply=False)
        connected = _until(lambda: WebhookEvent.objects.filter(state="applied").exists())
        with connection.cursor() as cursor:
            for pid in _backends(SURVIVOR_APP):
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        time.sleep(1)  # a few looks at the ledger on the lost connection
        hook.post(client, delivery_payload("delivered", intent), apply=False)
        applied = _until(
            lambda: WebhookEvent.objects.filter(state="applied").count() == 2, timeout=30
        )
        alive = proc.poll() is None
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)

    assert (connected, alive, applied) == (True, True, True), err
    assert proc.returncode == 0
    assert "webhooks.applier.database_unavailable" in err
    assert "Traceback" not in err
