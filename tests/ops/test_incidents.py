"""Incident drills from the operator's chair (DEPLOYMENT.md "Watching it"): each incident is made
to happen for real (a table lock held by another session, the sandbox AgentMail's faults over
real HTTP, the worker not running), and each surface an operator reads during it (/healthz,
/readyz, /metrics, the health panel, manage.py intents_status) must answer, say what is wrong
and what to do, and clear once it is over."""

from __future__ import annotations

import io
import re
import threading
import time
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.models.functions import Now

from intents import sending
from intents.models import ProviderThrottle, SendIntent
from mailboxes import key_health
from tests.ops.test_metrics import TOKEN, at, hook_of, scrape
from tests.webhooks.conftest import delivery_payload, new_svix_id
from webhooks import views as webhook_views
from webhooks.models import WebhookEndpoint


def _answered_while_locked(request, table: str, wait: float = 5.0):
    """Run ``request()`` in another thread (its own connection) while this session holds an
    ACCESS EXCLUSIVE lock on ``table`` (what a migration's ALTER TABLE takes), for at most
    ``wait`` seconds; returns the response, or None if it had not answered by then."""
    answers: list = []

    def run() -> None:
        try:
            answers.append(request())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        thread.start()
        thread.join(wait)
        answered = list(answers)
    thread.join(30)
    return answered[0] if answered else None


INTENTS = SendIntent._meta.db_table


@pytest.mark.django_db(transaction=True)
def test_a_locked_intents_table_gets_metrics_a_prompt_503_that_says_so(client, settings, tenant_a):
    settings.METRICS_TOKEN = TOKEN
    settings.OPS_QUERY_TIMEOUT_SECONDS = 0.5

    response = _answered_while_locked(
        lambda: client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"), INTENTS
    )
    liveness = _answered_while_locked(lambda: client.get("/healthz"), INTENTS)
    readiness = _answered_while_locked(lambda: client.get("/readyz"), INTENTS)

    assert response is not None, "/metrics waited for the lock"
    assert response.status_code == 503
    assert "did not answer within 0.5 s" in response.content.decode()
    assert "pg_stat_activity" in response.content.decode()
    assert liveness is not None and liveness.status_code == 200
    assert readiness is not None and readiness.status_code == 200
    # Over: the next scrape reads the figures again.
    assert at(scrape(client), "countersign_intents", tenant=tenant_a.slug, state="queued") == 0


@pytest.mark.django_db(transaction=True)
def test_a_locked_intents_table_still_renders_the_health_panel_saying_why_it_has_no_figures(
    client, settings, tenant_a, member_of, signed_in
):
    settings.OPS_QUERY_TIMEOUT_SECONDS = 0.5
    admin = signed_in(member_of(tenant_a, "admin").user)
    url = f"/t/{tenant_a.slug}/admin/"

    page = _answered_while_locked(lambda: admin.get(url), INTENTS)
    fragment = _answered_while_locked(lambda: admin.get(url, HTTP_HX_REQUEST="true"), INTENTS)

    assert page is not None, "the health panel waited for the lock"
    assert page.status_code == 200
    assert "data-health-unavailable" in page.content.decode()
    assert fragment is not None and fragment.status_code == 200
    body = fragment.content.decode()
    assert "data-health-unavailable" in body
    assert "within 0.5 seconds" in body
    # Still polling: the panel comes back by itself once the lock is gone.
    assert 'hx-trigger="every 30s"' in body
    after = admin.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "data-health-unavailable" not in after
    assert "data-oldest-queued" in after


def _status() -> str:
    out = io.StringIO()
    call_command("intents_status", stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_no_worker_while_sends_wait_for_reconciliation_moves_a_metric_and_the_status(
    live, client, settings
):
    """No worker runs while a send is uncertain (AgentMail answered 500 after processing it): its
    replay falls due and nobody makes it. countersign_oldest_queued_seconds, the series the guide
    said a stopped worker shows as, ages queued sends only and stayed at 0."""
    settings.METRICS_TOKEN = TOKEN
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now(), hold_until=None)
    live.sandbox.fault("sends", "500_after")
    sending.run_once(worker="drill", limit=1)
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now() - timedelta(minutes=10))

    during = scrape(client)
    status = _status()

    assert at(during, "countersign_oldest_uncertain_seconds") >= 600
    assert re.search(r"Oldest due uncertain intent \(replay or label lookup\): 6\d\d\.\d s", status)

    # A worker again: the replay finds the first send, nothing waits any more.
    sending.run_once(worker="drill", limit=1)
    assert SendIntent.objects.get(pk=intent.pk).state == SendIntent.State.ACCEPTED
    assert at(scrape(client), "countersign_oldest_uncertain_seconds") == 0
    assert "Oldest due uncertain intent (replay or label lookup): none" in _status()


@pytest.mark.django_db(transaction=True)
def test_webhooks_that_stop_arriving_show_in_a_metric_until_one_arrives_again(
    live, client, settings, tenant_b
):
    """The receiver unreachable (a proxy's route gone, PUBLIC_BASE_URL wrong after a move): sends
    are still accepted, AgentMail's deliveries fail, and no series moved at all; only the
    console's muted "Last webhook: 2 hours ago" line said it."""
    settings.METRICS_TOKEN = TOKEN
    hook = hook_of(live.tenant)
    first = live.approved()
    SendIntent.objects.filter(pk=first.pk).update(next_attempt_at=Now(), hold_until=None)
    sending.run_once(worker="drill", limit=1)
    first.refresh_from_db()
    assert (
        hook.post(client, delivery_payload("delivered", first), svix_id=new_svix_id()).status_code
        == 200
    )
    # Two hours without a delivery while sends go on (the database clock cannot be moved).
    WebhookEndpoint.objects.filter(pk=hook.endpoint.pk).update(
        last_event_at=Now() - timedelta(hours=2)
    )
    second = live.approved(subject="Second")
    SendIntent.objects.filter(pk=second.pk).update(next_attempt_at=Now(), hold_until=None)
    sending.run_once(worker="drill", limit=1)

    during = scrape(client)
    last = at(
        during, "countersign_webhook_last_received_timestamp_seconds", tenant=live.tenant.slug
    )

    assert last is not None
    assert 7000 < time.time() - last < 7400
    # A tenant whose receiver never heard anything has no sample (no webhook endpoint yet).
    assert (
        at(during, "countersign_webhook_last_received_timestamp_seconds", tenant=tenant_b.slug)
        is None
    )

    second.refresh_from_db()
    # The receiver reachable again; this process touched the endpoint less than a minute ago, so
    # the delivery is taken as a fresh web process takes it (each keeps its own touch clock).
    webhook_views._endpoints.clear()
    assert (
        hook.post(client, delivery_payload("delivered", second), svix_id=new_svix_id()).status_code
        == 200
    )
    after = at(
        scrape(client),
        "countersign_webhook_last_received_timestamp_seconds",
        tenant=live.tenant.slug,
    )
    assert time.time() - after < 60


@pytest.mark.django_db(transaction=True)
def test_intents_status_says_which_mailbox_waits_for_its_key_and_what_to_do(live, member_of):
    """AgentMail answers 401 for one mailbox's key (revoked): its send waits, queued, and the
    operators' command said 'Oldest due queued intent: none', as on a quiet day."""
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now(), hold_until=None)
    live.sandbox.fault("sends", "401_unknown_key")
    sending.run_once(worker="drill", limit=1)

    during = _status()

    assert SendIntent.objects.get(pk=intent.pk).state == SendIntent.State.QUEUED
    assert f"AgentMail refused the key of {live.mailbox.address} ({live.tenant.slug})" in during
    assert "1 send waiting" in during
    assert "Check the key again" in during

    key_health.mailbox_key_check(
        tenant=live.tenant, mailbox_id=live.mailbox.pk, actor=member_of(live.tenant, "admin").user
    )
    assert "refused the key" not in _status()


@pytest.mark.django_db(transaction=True)
def test_intents_status_names_the_mailbox_whose_circuit_agentmail_opened(live, settings):
    """AgentMail answers 503 to every call: the key's circuit opens and the sends wait for its
    probe, and the operators' command said 'Oldest due queued intent: none'."""
    settings.SEND_CIRCUIT_FAILURES = 2
    for n in range(2):
        intent = live.approved(subject=f"Down {n}")
        SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now(), hold_until=None)
    live.sandbox.fault("sends", "503_before", times=10)
    sending.run_once(worker="drill", limit=2)

    during = _status()

    assert ProviderThrottle.objects.get().circuit == ProviderThrottle.Circuit.OPEN
    assert re.search(
        rf"AgentMail keeps failing for {re.escape(live.mailbox.address)} \({live.tenant.slug}\): "
        r"calls paused until \d\d:\d\d:\d\d UTC",
        during,
    )

    live.sandbox.clear_faults()
    ProviderThrottle.objects.update(opened_until=Now())
    SendIntent.objects.filter(state=SendIntent.State.UNCERTAIN).update(next_attempt_at=Now())
    sending.run_once(worker="drill", limit=2)
    assert ProviderThrottle.objects.get().circuit == ProviderThrottle.Circuit.CLOSED
    assert "keeps failing" not in _status()


@pytest.mark.django_db(transaction=True)
def test_the_health_panel_says_agentmail_keeps_failing_and_that_sends_resume_by_themselves(
    live, settings, member_of, signed_in
):
    """AgentMail answers 503 to every call: the panel showed 'Uncertain 2' and 'Failed attempts
    4 of 4' and nothing about why, or that no one needs to do anything."""
    settings.SEND_CIRCUIT_FAILURES = 2
    admin = signed_in(member_of(live.tenant, "admin").user)
    url = f"/t/{live.tenant.slug}/admin/"
    for n in range(2):
        intent = live.approved(subject=f"Down {n}")
        SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now(), hold_until=None)
    live.sandbox.fault("sends", "503_before", times=10)
    sending.run_once(worker="drill", limit=2)

    during = admin.get(url, HTTP_HX_REQUEST="true").content.decode()

    assert "data-circuit-open" in during
    assert live.mailbox.address in during
    assert "AgentMail keeps failing" in during
    assert "go out by themselves" in during

    live.sandbox.clear_faults()
    ProviderThrottle.objects.update(opened_until=Now())
    SendIntent.objects.filter(state=SendIntent.State.UNCERTAIN).update(next_attempt_at=Now())
    sending.run_once(worker="drill", limit=2)
    assert "data-circuit-open" not in admin.get(url, HTTP_HX_REQUEST="true").content.decode()


@pytest.mark.django_db(transaction=True)
def test_intents_status_names_the_mailbox_agentmail_rate_limited_and_until_when(live):
    """AgentMail answers 429 with Retry-After 600: the key's sends wait ten minutes, and the
    operators' command said 'Oldest due queued intent: none'."""
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now(), hold_until=None)
    live.sandbox.fault("sends", "429", retry_after=600)
    sending.run_once(worker="drill", limit=1)

    during = _status()

    assert re.search(
        rf"AgentMail rate-limited the key of {re.escape(live.mailbox.address)} "
        rf"\({live.tenant.slug}\): its sends wait until \d\d:\d\d:\d\d UTC \(Retry-After\)",
        during,
    )

    # Retry-After has passed.
    ProviderThrottle.objects.update(refilled_at=Now())
    assert "rate-limited" not in _status()


@pytest.mark.django_db(transaction=True)
def test_calls_that_never_reach_agentmail_count_as_failed_attempts_on_the_panel(
    live, member_of, signed_in, settings
):
    """AgentMail unreachable (connection refused: a firewall change, its DNS pointing nowhere):
    every call failed and was rightly retried later, yet the panel's 'Failed attempts, last
    hour' tile read 0 of 2, unmarked, as on a good day: it counted only refusals and unknown
    outcomes."""
    admin = signed_in(member_of(live.tenant, "admin").user)
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now(), hold_until=None)
    settings.AGENTMAIL_BASE_URL = "http://127.0.0.1:9"
    for _ in range(2):
        sending.run_once(worker="drill", limit=1)
        SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())

    page = admin.get(f"/t/{live.tenant.slug}/admin/", HTTP_HX_REQUEST="true").content.decode()
    tile = re.search(r'<div class="stat[^"]*" data-failed-attempts>.*?</div>', page, re.S)

    assert SendIntent.objects.get(pk=intent.pk).state == SendIntent.State.QUEUED
    assert tile is not None
    assert "is-bad" in tile.group(0)
    assert re.search(r"<strong>2</strong>", tile.group(0))


def _backfill() -> str:
    out = io.StringIO()
    call_command("webhooks_backfill", stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_backfill_that_agentmail_fails_says_which_mailbox_and_that_the_next_run_asks_again(
    live, settings
):
    """After an outage of the receiver the operator runs webhooks_backfill, while AgentMail
    still answers 503: the command printed 'errors 1' and nothing else, and the logs had no
    line for it (a failed delivery lookup was counted and skipped silently)."""
    settings.WEBHOOK_BACKFILL_AFTER_SECONDS = 0
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now(), hold_until=None)
    sending.run_once(worker="drill", limit=1)
    live.sandbox.advance_clock(60)
    live.sandbox.fault("*", "503_before", times=50)

    during = _backfill()

    assert "errors 2" in during  # the delivery lookup and the inbox listing
    assert f"{live.mailbox.address} ({live.tenant.slug}): AgentMail answered 503" in during
    assert "asked again on the next run" in during

    live.sandbox.clear_faults()
    after = _backfill()
    assert "deliveries 1" in after
    assert "AgentMail answered" not in after


@pytest.mark.django_db(transaction=True)
def test_intents_status_on_a_locked_intents_table_says_so_instead_of_waiting(settings, tenant_a):
    settings.OPS_QUERY_TIMEOUT_SECONDS = 0.5

    def run():
        try:
            _status()
        except CommandError as exc:
            return str(exc)
        return "answered"

    said = _answered_while_locked(run, INTENTS)

    assert said is not None, "intents_status waited for the lock"
    assert "did not answer within 0.5 s" in said
    assert "pg_blocking_pids" in said
    assert "Send intents by state:" in _status()


@pytest.mark.django_db(transaction=True)
def test_the_log_says_when_agentmail_answers_again_as_it_said_when_it_stopped(
    live, settings, caplog
):
    """The worker logged intents.circuit.opened when AgentMail kept failing, and nothing when a
    probe's clean answer closed the circuit: reading the logs, an operator could not tell
    whether, or when, the outage ended."""
    settings.SEND_CIRCUIT_FAILURES = 1
    intent = live.approved()
    SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now(), hold_until=None)
    live.sandbox.fault("sends", "503_before", times=10)
    with caplog.at_level("INFO", logger="intents.sending"):
        sending.run_once(worker="drill", limit=1)
        live.sandbox.clear_faults()
        ProviderThrottle.objects.update(opened_until=Now())
        SendIntent.objects.filter(pk=intent.pk).update(next_attempt_at=Now())
        sending.run_once(worker="drill", limit=1)

    key_ref = ProviderThrottle.objects.get().key_ref
    said = [(r.getMessage(), getattr(r, "key_ref", None)) for r in caplog.records]
    assert ("intents.circuit.opened", key_ref) in said
    assert ("intents.circuit.closed", key_ref) in said
    assert SendIntent.objects.get(pk=intent.pk).state == SendIntent.State.ACCEPTED
