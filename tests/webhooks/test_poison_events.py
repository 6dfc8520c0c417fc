"""Events whose apply raises every time ("poison": a bug, data the apply step cannot take) must not
stall the applier or the sweep. Oldest first, a batch's worth of them was taken first by every
batch and every sweep for ever, and no newer event was applied again (nothing lost, liveness
lost). Now failures are counted, those that failed go behind the others, and at
``WEBHOOK_APPLY_MAX_FAILURES`` the event is ``failed`` until an operator retries it.

The fault is real: a PostgreSQL trigger, made by the test, refuses any recipient row of one
address, so applying a delivery event to it raises inside the database."""

from __future__ import annotations

import io
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command, load_command_class
from django.core.management.base import CommandError
from django.db import connection, connections, transaction
from django.db.models.functions import Now
from prometheus_client.parser import text_string_to_metric_families

from console.selectors import health
from intents.models import IntentEvent
from tenants.models import AuditEvent
from tests.webhooks.conftest import apply_stored, delivery_payload
from webhooks.models import RecipientDelivery, WebhookEvent
from webhooks.services import applier, apply
from webhooks.services.retention import events_purge_payloads

POISON = "poison@customer.test"
METRICS_TOKEN = "poison-test-token"


def poison_the_address() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION cs_test_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.address = '{POISON}' THEN RAISE EXCEPTION 'poisoned row'; END IF; "
            "RETURN NEW; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER cs_test_poison BEFORE INSERT OR UPDATE ON "
            f"{RecipientDelivery._meta.db_table} FOR EACH ROW EXECUTE FUNCTION cs_test_poison()"
        )


def cure_the_address() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"DROP TRIGGER cs_test_poison ON {RecipientDelivery._meta.db_table}; "
            "DROP FUNCTION cs_test_poison()"
        )


def store(client, hook, intents) -> list[int]:
    """One delivery event per intent, stored and not applied; their ids in order."""
    for intent in intents:
        hook.post(client, delivery_payload("delivered", intent), apply=False)
    return list(WebhookEvent.objects.order_by("id").values_list("pk", flat=True))[-len(intents) :]


def states(ids) -> list[tuple[str, int]]:
    """(state, failures) of each event, in the order of ``ids``."""
    rows = WebhookEvent.objects.filter(pk__in=ids).values_list("pk", "state", "apply_failures")
    found = {pk: (state, failures) for pk, state, failures in rows}
    return [found[pk] for pk in ids]


@pytest.fixture
def poisoned(db, client, tenant_a, hook_for, mailbox_row, intent_row):
    """(hook, mailbox, four poison events, two good events stored after them)."""
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a)
    poison_the_address()
    bad = store(client, hook, [intent_row(mailbox, to=[POISON]) for _ in range(4)])
    good = store(client, hook, [intent_row(mailbox, to=["jane@customer.test"]) for _ in range(2)])
    return hook, mailbox, bad, good


def test_more_poison_events_than_a_batch_do_not_hold_back_the_batch_applier(poisoned):
    _, _, bad, good = poisoned

    runs = [applier.events_apply_batch(limit=3) for _ in range(2)]

    # First batch: three poison events, each failing alone. Second: the fourth, then the two
    # good ones (none failed yet), not the first three again.
    assert runs == [(3, 0), (3, 2)]
    assert states(good) == [("applied", 0)] * 2
    assert states(bad) == [("pending", 1)] * 4
    assert RecipientDelivery.objects.filter(state="delivered").count() == 2


def test_more_poison_events_than_a_batch_do_not_hold_back_the_sweep(poisoned):
    _, _, bad, good = poisoned

    moved = [apply.events_replay_pending(batch=3) for _ in range(2)]

    assert moved == [0, 2]
    assert states(good) == [("applied", 0)] * 2
    assert states(bad) == [("pending", 1)] * 4


def test_a_poison_event_is_failed_after_the_bound_and_counted(poisoned, client, settings, tenant_a):
    settings.WEBHOOK_APPLY_MAX_FAILURES = 3
    settings.METRICS_TOKEN = METRICS_TOKEN
    _, _, bad, good = poisoned

    for _ in range(5):
        apply_stored()
        apply.events_replay_pending()

    assert states(good) == [("applied", 0)] * 2
    assert states(bad) == [("failed", 3)] * 4
    outcome = WebhookEvent.objects.get(pk=bad[0]).outcome
    assert outcome == (
        "applying it raised ProgrammingError 3 times; an operator retries it "
        "(webhooks_apply --retry-failed)"
    )
    # Nothing takes a failed event any more.
    assert applier.events_apply_batch() == (0, 0)
    assert apply.events_replay_pending() == 0
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }
    tenant = frozenset({("tenant", tenant_a.slug)})
    assert samples[("countersign_webhook_failed", tenant)] == 4
    assert samples[("countersign_webhook_unapplied", tenant)] == 0
    assert (health(tenant_a).webhook_failed, health(tenant_a).webhook_unapplied) == (4, 0)


def test_the_retry_command_brings_failed_events_back_and_each_is_applied_once(
    poisoned, settings, tenant_a
):
    settings.WEBHOOK_APPLY_MAX_FAILURES = 1
    _, _, bad, _ = poisoned
    apply_stored()
    assert states(bad) == [("failed", 1)] * 4
    out = io.StringIO()

    with pytest.raises(CommandError, match=f"not a failed webhook event: {bad[0] - 1}"):
        call_command("webhooks_apply", "--retry-failed", str(bad[0]), str(bad[0] - 1))
    still = states(bad)
    call_command("webhooks_apply", "--retry-failed", str(bad[0]), stdout=out)
    one_back = states(bad)
    call_command("webhooks_apply", "--retry-failed", stdout=out)
    all_back = states(bad)
    cure_the_address()
    apply_stored()
    apply.events_replay_pending()

    assert still == [("failed", 1)] * 4
    assert one_back == [("pending", 0)] + [("failed", 1)] * 3
    assert all_back == [("pending", 0)] * 4
    assert out.getvalue().splitlines() == [
        f"1 failed webhook event(s) back to pending: {bad[0]}",
        f"3 failed webhook event(s) back to pending: {bad[1]}, {bad[2]}, {bad[3]}",
    ]
    assert states(bad) == [("applied", 0)] * 4
    svix_ids = WebhookEvent.objects.filter(pk__in=bad).values_list("svix_id", flat=True)
    journal = IntentEvent.objects.filter(actor_label__in=svix_ids, action="delivery.delivered")
    assert journal.count() == 4
    assert RecipientDelivery.objects.filter(address=POISON, state="delivered").count() == 4
    assert list(
        AuditEvent.objects.filter(tenant=tenant_a, action="webhook.events_retried")
        .order_by("id")
        .values_list("data", flat=True)
    ) == [{"webhook_event_ids": bad[:1]}, {"webhook_event_ids": bad[1:]}]


def test_the_retry_command_says_when_there_is_nothing_to_retry_and_refuses_bad_input(db):
    out = io.StringIO()

    call_command("webhooks_apply", "--retry-failed", stdout=out)

    assert out.getvalue() == "No failed webhook events: nothing to retry.\n"
    with pytest.raises(CommandError, match="'x' is not a number"):
        call_command("webhooks_apply", "--retry-failed", "x")
    with pytest.raises(CommandError, match="0 is not allowed: it must be at least 1"):
        call_command("webhooks_apply", "--retry-failed", "0")
    with pytest.raises(CommandError, match="--retry-failed runs alone"):
        call_command("webhooks_apply", "--retry-failed", "--once")


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (["--batch", "5"], "leave out --batch."),
        (["--poll", "2"], "leave out --poll."),
        (["--poll", "2", "--batch", "5"], "leave out --batch and --poll."),
        (["--once", "--batch", "5", "--poll", "2"], "leave out --once, --batch and --poll."),
    ],
)
def test_the_retry_command_refuses_the_applier_options_it_would_ignore(db, poisoned, given, named):
    """Found by a probe: --retry-failed refused --once but silently ignored --batch and --poll,
    as if they had been honoured. Each is named, and nothing is retried."""
    _, _, bad, _ = poisoned
    WebhookEvent.objects.filter(pk=bad[0]).update(state="failed", apply_failures=5)

    with pytest.raises(CommandError) as refused:
        call_command("webhooks_apply", "--retry-failed", *given)

    assert str(refused.value) == f"--retry-failed runs alone: it applies nothing, {named}"
    assert WebhookEvent.objects.get(pk=bad[0]).state == "failed"


def test_the_retry_command_refuses_them_from_the_command_line_too(db, capsys):
    # Django's own run_from_argv, which turns a CommandError into the exit status; not
    # ManagementUtility.execute, whose django.setup() configures logging again, leaving the
    # root handler writing to this test's captured stderr, closed after it: every later test
    # in this process that logged and read its stderr found "--- Logging error ---" there.
    command = load_command_class("webhooks", "webhooks_apply")
    with pytest.raises(SystemExit) as exited:
        command.run_from_argv(["manage.py", "webhooks_apply", "--retry-failed", "--poll", "1"])

    assert exited.value.code == 1
    assert (
        "--retry-failed runs alone: it applies nothing, leave out --poll."
        in capsys.readouterr().err
    )


@pytest.mark.django_db(transaction=True)
def test_a_lock_timeout_is_not_counted_as_a_failure(
    client, settings, tenant_a, hook_for, mailbox_row, intent_row, monkeypatch
):
    settings.WEBHOOK_APPLY_MAX_FAILURES = 1
    monkeypatch.setattr(applier, "APPLY_LOCK_TIMEOUT_MS", 200)
    monkeypatch.setattr(apply, "SWEEP_LOCK_TIMEOUT_MS", 200)
    hook = hook_for(tenant_a)
    intent = intent_row(mailbox_row(tenant_a), to=["jane@customer.test"])
    hook.post(client, delivery_payload("sent", intent))
    locked, release = threading.Event(), threading.Event()

    def hold_the_row():
        try:
            with transaction.atomic():
                list(RecipientDelivery.objects.select_for_update().filter(intent=intent))
                locked.set()
                release.wait(60)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    locked.wait(5)
    [event] = store(client, hook, [intent])
    for _ in range(3):
        apply_stored()
        apply.events_replay_pending()
    while_locked = states([event])
    release.set()
    holder.join()
    apply_stored()

    assert while_locked == [("pending", 0)]
    assert states([event]) == [("applied", 0)]
    assert RecipientDelivery.objects.get(intent=intent).state == "delivered"


def test_a_failed_event_past_retention_is_closed_as_ignored_with_its_payload(poisoned, tenant_a):
    _, _, bad, _ = poisoned
    WebhookEvent.objects.filter(pk=bad[0]).update(state="failed", apply_failures=5)
    WebhookEvent.objects.filter(pk__in=bad[:2]).update(received_at=Now() - timedelta(days=400))

    events_purge_payloads()

    assert states(bad[:3]) == [("ignored", 5), ("ignored", 0), ("pending", 0)]
    assert WebhookEvent.objects.get(pk=bad[0]).payload is None
    assert health(tenant_a).webhook_failed == 0
