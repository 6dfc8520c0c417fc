"""/metrics (config/metrics.py): the exposition parses with prometheus_client's own parser, label
values survive whatever a tenant's slug or a provider key holds, the counters equal what really
happened (real sends through the sandbox, a replayed Idempotency-Key, a duplicate webhook), and a
scrape costs the same number of queries, none reading the history, at 1,000 and 100,000 rows of
history. Run with -rP to see the scrape times printed."""

from __future__ import annotations

import importlib
import json
import time
import uuid

import pytest
from django.db import connection, transaction
from django.db.models import Count
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from common.counters import count, counter_totals, counters_add
from common.models import Counter
from intents import sending, services
from intents.attachments import Upload
from intents.models import IntentEvent, ProviderThrottle, SendAttempt, SendIntent
from tenants import onboarding
from tenants.tokens import token_create
from tests.agent_api.conftest import ALL_SCOPES, Api, draft_body
from tests.factories import MembershipFactory, TenantFactory, make_local_mailbox
from tests.intents.helpers import run_concurrently
from tests.plans import plan_nodes
from tests.webhooks.conftest import Hook, add_secret, delivery_payload, new_secret, new_svix_id
from webhooks.models import WebhookEndpoint, WebhookEvent

TOKEN = "metrics-test-token"
backfill = importlib.import_module("common.migrations.0002_backfill_metric_counters")


@pytest.fixture
def metrics_token(settings):
    settings.METRICS_TOKEN = TOKEN


def scrape(client) -> dict[tuple[str, frozenset], float]:
    """Every sample of one scrape, keyed by (sample name, labels)."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def at(samples, name: str, **labels) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def hook_of(tenant) -> Hook:
    endpoint = WebhookEndpoint.objects.create(
        tenant=tenant, status=WebhookEndpoint.Status.ACTIVE, provider_webhook_id="ep_metrics"
    )
    secret = new_secret()
    add_secret(endpoint, secret)
    return Hook(endpoint, secret)


def step():
    return sending.run_once(worker="metrics", limit=1)


# --- the exposition ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_label_values_with_quotes_backslashes_and_newlines_survive(client, metrics_token):
    slug = 'we"ird\\slug\nline two'
    key = 'key "k1"\\ \n}'
    TenantFactory(slug=slug)
    ProviderThrottle.objects.create(key_ref=key, refilled_at=timezone.now(), circuit="open")

    samples = scrape(client)

    assert at(samples, "countersign_intents", tenant=slug, state="queued") == 0
    assert at(samples, "countersign_webhook_duplicates_total", tenant=slug) == 0
    assert at(samples, "countersign_circuit_open", key=key, state="open") == 1


@pytest.mark.django_db
def test_a_tenant_name_never_reaches_the_exposition(client, metrics_token):
    TenantFactory(name='Evil "name"\n# TYPE fake gauge\nfake 1', slug="evil-name")
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert "Evil" not in text and "fake" not in text
    assert list(text_string_to_metric_families(text))


@pytest.mark.django_db
@pytest.mark.parametrize(
    "slug", ["a\\", "\\n", 'x"} 1\nfake_metric 2', "é-ünïcode", "\u2028sep", "tab\there"]
)
def test_odd_slugs_stay_one_label_value(client, metrics_token, slug):
    TenantFactory(slug=slug)
    samples = scrape(client)
    assert at(samples, "countersign_intents", tenant=slug, state="queued") == 0
    assert not any(name == "fake_metric" for name, _labels in samples)


@pytest.mark.django_db
def test_every_series_keeps_its_name_and_type(client, metrics_token, tenant_a):
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    types = {f.name: f.type for f in text_string_to_metric_families(response.content.decode())}

    assert types == {
        "countersign_intents": "gauge",
        "countersign_oldest_queued_seconds": "gauge",
        "countersign_oldest_uncertain_seconds": "gauge",
        "countersign_attempts": "counter",
        "countersign_provider_429": "counter",
        "countersign_reconciliations": "counter",
        "countersign_idempotent_replays": "counter",
        "countersign_webhook_duplicates": "counter",
        "countersign_circuit_open": "gauge",
        "countersign_webhook_ledger_rows": "gauge",
        "countersign_webhook_unapplied": "gauge",
        "countersign_webhook_lag_seconds": "gauge",
        "countersign_webhook_failed": "gauge",
        "countersign_webhook_last_received_timestamp_seconds": "gauge",
        "countersign_attachment_storage_bytes": "gauge",
        "countersign_attachment_storage_quota_bytes": "gauge",
        "countersign_mailboxes_key_refused": "gauge",
    }


@pytest.mark.django_db
def test_attachment_storage_is_what_each_tenant_holds_and_the_quota(
    client, metrics_token, tenant_a, tenant_b, settings
):
    """The quota per tenant is its effective one: the deployment's, or its own."""
    settings.TENANT_ATTACHMENT_STORAGE_BYTES = 5_000_000
    onboarding.tenant_storage_quota_set(slug=tenant_b.slug, quota_bytes=20 * 1024**3)
    mailbox = make_local_mailbox(tenant_a)
    person = MembershipFactory(tenant=tenant_a, role="approver").user
    for text in ("one", "two"):  # the same file twice: held once
        services.draft_create(
            tenant=tenant_a,
            mailbox=mailbox,
            to=["c@example.com"],
            subject=text,
            text=text,
            actor_user=person,
            attachments=[Upload("a.txt", "text/plain", b"a" * 3000)],
        )

    samples = scrape(client)

    assert at(samples, "countersign_attachment_storage_bytes", tenant=tenant_a.slug) == 3000
    assert at(samples, "countersign_attachment_storage_bytes", tenant=tenant_b.slug) == 0
    assert at(samples, "countersign_attachment_storage_quota_bytes", tenant=tenant_a.slug) == (
        5_000_000
    )
    assert at(samples, "countersign_attachment_storage_quota_bytes", tenant=tenant_b.slug) == (
        20 * 1024**3
    )


@pytest.mark.django_db
def test_apply_lag_is_the_age_of_the_oldest_pending_event(client, metrics_token, tenant_a):
    hook = hook_of(tenant_a)
    now = timezone.now()
    for n, (state, age) in enumerate([("pending", 30), ("deferred", 90), ("applied", 600)]):
        WebhookEvent.objects.create(
            endpoint=hook.endpoint,
            tenant=tenant_a,
            svix_id=f"msg_lag_{n}",
            event_type="message.delivered",
            state=state,
            received_at=now,
        )
        WebhookEvent.objects.filter(svix_id=f"msg_lag_{n}").update(
            received_at=Now() - timezone.timedelta(seconds=age)
        )

    samples = scrape(client)

    lag = at(samples, "countersign_webhook_lag_seconds", tenant=tenant_a.slug)
    assert 30 <= lag < 60
    assert at(samples, "countersign_webhook_unapplied", tenant=tenant_a.slug) == 2


# --- counters equal what happened ----------------------------------------------------------------


def happen(live, client, make_token):
    """Real traffic for one tenant: a send accepted at once, one uncertain then replayed, one
    answered 429, a duplicate webhook delivery and a replayed agent API request."""
    first = live.approved()
    step()
    uncertain = live.approved(subject="Second")
    live.sandbox.fault("sends", "500_after")
    step()
    SendIntent.objects.filter(pk=uncertain.pk).update(next_attempt_at=Now())
    step()
    live.sandbox.fault("sends", "429", retry_after=600)
    live.approved(subject="Third")
    step()

    first.refresh_from_db()
    hook = hook_of(live.tenant)
    payload, svix_id = delivery_payload("delivered", first), new_svix_id()
    assert hook.post(client, payload, svix_id=svix_id).json()["duplicate"] is False
    assert hook.post(client, payload, svix_id=svix_id).json()["duplicate"] is True

    api, token = Api(client), make_token(live.tenant)
    for _ in range(2):
        api.post("/drafts", draft_body(live.mailbox), token=token, key="metrics-replay")


@pytest.fixture
def make_token(member_of):
    def make(tenant):
        admin = member_of(tenant, "admin").user
        _, plaintext = token_create(
            tenant=tenant,
            name=f"agent-{uuid.uuid4().hex[:8]}",
            scopes=ALL_SCOPES,
            mailbox_ids=[],
            expires_at=None,
            actor=admin,
        )
        return plaintext

    return make


@pytest.mark.django_db(transaction=True)
def test_counters_equal_what_happened(live, client, metrics_token, make_token, tenant_b):
    happen(live, client, make_token)

    samples = scrape(client)
    slug, other = live.tenant.slug, tenant_b.slug
    attempts = {
        (row["kind"], row["outcome"]): row["n"]
        for row in SendAttempt.objects.values("kind", "outcome").annotate(n=Count("id"))
    }
    counted = {
        (dict(labels)["kind"], dict(labels)["outcome"]): value
        for (name, labels), value in samples.items()
        if name == "countersign_attempts_total" and dict(labels)["tenant"] == slug
    }

    assert (
        counted
        == attempts
        == {
            ("send", "accepted"): 1,
            ("send", "uncertain"): 1,
            ("replay", "accepted"): 1,
            ("send", "retry"): 1,
        }
    )
    assert at(samples, "countersign_provider_429_total", tenant=slug) == 1
    assert at(samples, "countersign_reconciliations_total", tenant=slug, result="accepted") == 1
    assert at(samples, "countersign_intents", tenant=slug, state="accepted") == 2
    assert at(samples, "countersign_intents", tenant=slug, state="queued") == 1
    assert at(samples, "countersign_intents", tenant=slug, state="uncertain") == 0
    assert at(samples, "countersign_idempotent_replays_total", tenant=slug) == 1
    assert at(samples, "countersign_webhook_duplicates_total", tenant=slug) == 1
    # The other tenant saw nothing of it.
    assert at(samples, "countersign_intents", tenant=other, state="accepted") == 0
    assert at(samples, "countersign_idempotent_replays_total", tenant=other) == 0
    assert at(samples, "countersign_webhook_duplicates_total", tenant=other) == 0
    assert [
        name
        for name, labels in samples
        if ("tenant", other) in labels
        and name in ("countersign_attempts_total", "countersign_reconciliations_total")
    ] == []


@pytest.mark.django_db(transaction=True)
def test_the_migrations_backfill_counts_what_the_writers_counted(live, client, make_token):
    happen(live, client, make_token)
    # Replays and duplicates leave no history: the backfill cannot know them (they start at 0).
    written = {
        (t.tenant_id, t.name, json.dumps(t.labels, sort_keys=True), t.n)
        for t in counter_totals()
        if t.name not in ("idempotent_replays", "webhook_duplicates")
    }
    Counter.objects.all().delete()

    with connection.cursor() as cursor:
        cursor.execute(backfill.BACKFILL)
    rebuilt = {
        (t.tenant_id, t.name, json.dumps(t.labels, sort_keys=True), t.n) for t in counter_totals()
    }

    assert rebuilt == written
    assert len(written) == 7


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_add_up_exactly_and_never_deadlock(tenant_a, tenant_b):
    def add(i):
        for _ in range(20):
            with transaction.atomic():
                # Opposite orders in alternate threads: the writer sorts them.
                pair = [
                    count(tenant_a.pk, "attempts", kind="send", outcome="accepted", n=2),
                    count(tenant_b.pk, "attempts", kind="send", outcome="accepted"),
                ]
                counters_add(pair if i % 2 else pair[::-1])
        return "ok"

    results = run_concurrently(add, 8)
    totals = {(t.tenant_id, t.name): t.n for t in counter_totals()}

    assert results == ["ok"] * 8
    assert totals == {(tenant_a.pk, "attempts"): 8 * 20 * 2, (tenant_b.pk, "attempts"): 8 * 20}


# --- scrape cost does not grow with history ------------------------------------------------------


def clone(model, template_pk: int, first: int, last: int, **columns: str) -> None:
    """Copies number first..last of one row (INSERT ... SELECT over generate_series, as g): every
    column copied, except those given as an SQL expression of g."""
    table = model._meta.db_table
    names = [f.column for f in model._meta.concrete_fields if not f.primary_key]
    values = [columns.get(name, connection.ops.quote_name(name)) for name in names]
    quoted = [connection.ops.quote_name(name) for name in names]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(quoted)}) SELECT {', '.join(values)} "
            f"FROM {table}, generate_series(%s::int, %s::int) AS g WHERE id = %s",
            [first, last, template_pk],
        )


def grow_history(intent: SendIntent, event: WebhookEvent, first: int, last: int) -> None:
    """History rows first..last: finished intents (each its own version of one draft), their
    attempts, journal rows and applied webhook events."""
    version = intent.draft_version
    clone(type(version), version.pk, first, last, number="g + 1")
    with connection.cursor() as cursor:
        # The intents' clone looks each version up by (draft, number): without fresh statistics
        # the planner may scan the 100,000 versions once per intent (seen: 20 minutes).
        cursor.execute(f"ANALYZE {type(version)._meta.db_table}")
    clone(
        SendIntent,
        intent.pk,
        first,
        last,
        draft_version_id=(
            "(SELECT v.id FROM intents_draftversion v "
            f"WHERE v.draft_id = {intent.draft_id} AND v.number = g + 1)"
        ),
        idempotency_key="idempotency_key || '-' || g",
    )
    attempt = SendAttempt.objects.get(intent=intent, number=1)
    clone(SendAttempt, attempt.pk, first, last, number="g + 1")
    journal_row = IntentEvent.objects.filter(intent=intent).order_by("pk").first()
    clone(IntentEvent, journal_row.pk, first, last)
    clone(WebhookEvent, event.pk, first, last, svix_id="svix_id || '-' || g")
    with connection.cursor() as cursor:
        for model in (SendIntent, SendAttempt, IntentEvent, WebhookEvent):
            cursor.execute(f"ANALYZE {model._meta.db_table}")


def timed_scrape(client) -> tuple[list[str], float]:
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        scrape(client)
        elapsed = time.perf_counter() - started
    return [q["sql"] for q in queries.captured_queries], elapsed


def scans(sql: str) -> set[tuple[str, str]]:
    """(node type, relation) of every scan in the statement's plan."""
    return {(n["Node Type"], n["Relation Name"]) for n in plan_nodes(sql) if "Relation Name" in n}


@pytest.mark.django_db
def test_scrape_cost_does_not_grow_with_history(
    client, metrics_token, tenant_a, mailbox_row, intent_row, capsys
):
    mailbox = mailbox_row(tenant_a)
    intent = intent_row(mailbox)
    SendAttempt.objects.create(
        intent=intent,
        tenant=tenant_a,
        number=1,
        worker="w",
        started_at=timezone.now(),
        outcome="accepted",
        http_status=200,
    )
    IntentEvent.objects.create(
        tenant=tenant_a,
        intent=intent,
        draft=intent.draft,
        actor_kind="worker",
        action="intent.accepted",
        from_state="sending",
        to_state="accepted",
    )
    event = WebhookEvent.objects.create(
        endpoint=hook_of(tenant_a).endpoint,
        tenant=tenant_a,
        svix_id="msg_history",
        event_type="message.delivered",
        state="applied",
    )
    intent_row(mailbox, state="queued", message_id=None)

    scrape(client)  # warm-up: the first request imports and compiles what later ones reuse
    grow_history(intent, event, 1, 1_000)
    small, small_seconds = timed_scrape(client)
    grow_history(intent, event, 1_001, 100_000)
    large, large_seconds = timed_scrape(client)
    plans = set().union(*(scans(sql) for sql in large if sql.lstrip().upper().startswith("SELECT")))
    with capsys.disabled():
        print(
            f"\n/metrics scrape: {len(small)} queries, {small_seconds * 1000:.1f} ms at 1,000 "
            f"attempts; {len(large)} queries, {large_seconds * 1000:.1f} ms at 100,000 attempts"
        )

    assert SendAttempt.objects.count() == 100_001
    assert len(small) == len(large)
    assert {relation for _, relation in plans} & {
        SendAttempt._meta.db_table,
        IntentEvent._meta.db_table,
    } == set()
    assert {
        (node, relation)
        for node, relation in plans
        if node == "Seq Scan"
        and relation in (SendIntent._meta.db_table, WebhookEvent._meta.db_table)
    } == set()
