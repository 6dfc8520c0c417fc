"""No statement of a hot path scans a table that grows with traffic.

Each statement that the hot paths (the applier and the sweep, the send worker, an agent's calls,
a reviewer's pages, the admin console, the periodic jobs, a broadcast) really run over a tenant
with history is captured as executed, then executed again under EXPLAIN ANALYZE in a savepoint that is rolled back, with sequential scans switched
off and fresh statistics: where an index can serve the statement, the planner then uses it. A
``Seq Scan`` left on a growing table, or an index scan that reads and discards more than
``WASTE_LIMIT`` rows (a lookup through an index on another column), is a cost that grows with
history.

Found this way: the applier's one-statement lookup of a batch's intents matched
``provider_message_id`` to the event's message id, and the index on that column is partial
(``WHERE provider_message_id <> ''``); nothing in the statement implied the predicate, so every
delivery event scanned every intent (or, with statistics, every intent of its mailbox).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from intents import sending
from intents.models import Broadcast, SendIntent
from intents.retention import draft_bodies_purge
from intents.sending.fanout import broadcast_run
from intents.services.broadcasts import broadcast_approve, broadcast_create
from intents.tasks import sweep_once
from tests.agent_api.conftest import Api, draft_body
from tests.factories import UserFactory
from tests.intents.helpers import drain_sends
from tests.plans import plan_nodes
from tests.webhooks.conftest import apply_stored, delivery_payload, received_payload
from webhooks.models import RecipientDelivery, WebhookEvent
from webhooks.services import apply, reapply
from webhooks.services.backfill import webhooks_backfill
from webhooks.services.retention import events_purge_payloads

pytestmark = pytest.mark.django_db

# Rows here grow with every draft, send and event; the others are configuration (tenants,
# mailboxes, endpoints, members), a handful of rows per tenant.
GROWING = {
    "intents_draft",
    "intents_draftversion",
    "intents_sendintent",
    "intents_sendattempt",
    "intents_intentevent",
    "intents_agentevent",
    "intents_agenteventdelivery",
    "intents_broadcastrecipient",
    "webhooks_webhookevent",
    "webhooks_recipientdelivery",
    "webhooks_inboundmessage",
}
STATEMENTS = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")
# History in the test's one mailbox: far more rows than any hot statement may read and discard.
HISTORY = 120
WASTE_LIMIT = 20


def analyze() -> None:
    """Statistics, as autovacuum keeps them in production: without any, the planner guesses."""
    with connection.cursor() as cursor:
        for table in sorted(GROWING):
            cursor.execute(f"ANALYZE {table}")


def captured(run) -> list[str]:
    """The statements ``run`` executed (as executed: parameters in place), reads and writes only."""
    with CaptureQueriesContext(connection) as queries:
        run()
    statements = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip(" (\n").upper().startswith(STATEMENTS)
    ]
    assert statements, "nothing was captured: the test would prove nothing"
    return statements


def _plan(sql: str) -> list[dict]:
    """The statement's plan nodes, executed (and rolled back) with indexes preferred; a statement
    that cannot run twice (an INSERT of a key that now exists) is explained without running."""
    try:
        return plan_nodes(sql, analyze=True, seqscan=False)
    except DatabaseError:
        return plan_nodes(sql, seqscan=False)


def wasteful(sql: str) -> set[str]:
    """The growing tables the statement reads with a sequential scan, or reads through rows it
    then throws away (more than ``WASTE_LIMIT``: a lookup by an index on another column)."""
    found = set()
    for node in _plan(sql):
        table = node.get("Relation Name")
        if table not in GROWING:
            continue
        removed = node.get("Rows Removed by Filter", 0) * node.get("Actual Loops", 1)
        if node["Node Type"] == "Seq Scan" or removed > WASTE_LIMIT:
            how = node["Node Type"] + (
                f" using {node['Index Name']}" if "Index Name" in node else ""
            )
            found.add(f"{table}: {how}, {removed:.0f} rows read and discarded")
    return found


def scanning(statements: list[str]) -> list[tuple[set[str], str]]:
    return [(tables, sql[:200]) for sql in statements if (tables := wasteful(sql))]


def earlier_sends(intent_row, mailbox, approver) -> None:
    """``HISTORY`` earlier sends of the mailbox: drafts, versions and accepted intents."""
    for i in range(HISTORY):
        intent_row(mailbox, thread_id=f"thr_old_{i}", approver=approver)


def test_the_applier_and_the_sweep_use_an_index_for_every_growing_table(
    client, tenant_a, hook_for, mailbox_row, intent_row
):
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a)
    approver = UserFactory()
    earlier_sends(intent_row, mailbox, approver)
    sent = [intent_row(mailbox, to=[f"c{i}@customer.test"], thread_id=f"thr_{i}") for i in range(3)]
    for intent in sent:
        hook.post(client, delivery_payload("sent", intent), apply=False)
        hook.post(client, delivery_payload("delivered", intent), apply=False)
    hook.post(client, received_payload(mailbox, thread_id="thr_in"), apply=False)
    unknown = (mailbox.inbox_id, "<not-recorded-yet@sandbox.test>", "thr_x", ["x@customer.test"])
    hook.post(client, delivery_payload("delivered", unknown), apply=False)
    analyze()

    statements = captured(apply_stored) + captured(apply.events_replay_pending)

    assert WebhookEvent.objects.filter(state="applied").count() == 7  # the path really ran
    assert WebhookEvent.objects.filter(state="deferred").count() == 1  # and the sweep's branch
    assert scanning(statements) == []


def test_the_sweeps_pass_over_rejected_events_uses_an_index_for_every_growing_table(
    client, tenant_a, hook_for, mailbox_row
):
    """Its search for rejected events whose inbox a mailbox has recorded since, over a tenant's
    applied inbound history and rejections of an inbox it has no mailbox for; and the re-apply
    of one mailbox (the same statement as mailbox_provisioned's)."""
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a)
    # No mailbox of the tenant has this inbox: its events are rejected.
    stranger = SimpleNamespace(inbox_id="gone@agentmail.test", address="gone@agentmail.test")
    for i in range(HISTORY // 4):
        hook.post(client, received_payload(mailbox, thread_id=f"thr_{i}"), apply=False)
    for i in range(3):
        hook.post(client, received_payload(stranger, thread_id=f"thr_s{i}"), apply=False)
    apply_stored()
    analyze()

    statements = captured(reapply.events_apply_rejected_due) + captured(
        lambda: reapply.events_apply_rejected(mailbox=mailbox)
    )

    assert WebhookEvent.objects.filter(state="rejected").count() == 3  # the path really ran
    assert scanning(statements) == []


@pytest.mark.django_db(transaction=True)
def test_the_send_worker_uses_an_index_for_every_growing_table(live, intent_row):
    earlier_sends(intent_row, live.mailbox, live.approver)
    intents = [live.approved(to=[f"c{i}@example.com"]) for i in range(3)]
    analyze()

    statements = captured(lambda: sending.run_once(worker="w", limit=10))

    assert {i.state for i in type(intents[0]).objects.filter(pk__in=[i.pk for i in intents])} == {
        "accepted"
    }
    assert scanning(statements) == []


def test_the_agent_api_uses_an_index_for_every_growing_table(
    client, tenant_a, make_token, mailbox_row, intent_row, member_of
):
    mailbox = mailbox_row(tenant_a)
    approver = member_of(tenant_a, "approver").user
    earlier_sends(intent_row, mailbox, approver)
    token = make_token(tenant_a)
    api = Api(client)
    analyze()

    def agent_loop():
        made = api.post("/drafts", draft_body(mailbox), token=token, key="k-1")
        assert made.status_code == 201, made.content
        draft_id = made.json()["id"]
        for path in ("/drafts", f"/drafts/{draft_id}", "/mailboxes", "/analytics"):
            assert api.get(path, token=token).status_code == 200, path
        revised = api.post(
            f"/drafts/{draft_id}/versions",
            {
                "to": ["customer@example.com"],
                "subject": "Re: order",
                "text": "Revised.",
                "base_version": 1,
            },
            token=token,
        )
        assert revised.status_code == 201, revised.content
        assert api.post(f"/drafts/{draft_id}/withdraw", token=token).status_code == 200

    assert scanning(captured(agent_loop)) == []


def test_the_review_pages_use_an_index_for_every_growing_table(
    tenant_a, mailbox_row, intent_row, make_draft, member_of, signed_in
):
    mailbox = mailbox_row(tenant_a)
    admin = member_of(tenant_a, "admin").user
    earlier_sends(intent_row, mailbox, admin)
    drafts = [make_draft(mailbox) for _ in range(3)]
    sent = intent_row(mailbox, thread_id="thr_new", approver=admin)
    client = signed_in(admin)
    analyze()

    def reviewer():
        for name, args in (
            ("tenant_home", []),
            ("nav_counts", []),
            ("draft", [drafts[0].pk]),
            ("outbox", []),
            ("outbox_intent", [sent.pk]),
            ("attention", []),
        ):
            page = client.get(reverse(name, args=[tenant_a.slug, *args]))
            assert page.status_code == 200, name
        version = drafts[1].versions.get()
        approved = client.post(
            reverse("draft_approve", args=[tenant_a.slug, drafts[1].pk]),
            {"version": version.number, "content_hash": version.content_hash},
        )
        assert approved.status_code in (200, 302), approved.content[:300]

    assert scanning(captured(reviewer)) == []


def test_the_periodic_jobs_use_an_index_for_every_growing_table(
    tenant_a, mailbox_row, intent_row, make_draft, member_of
):
    """The minute's sweep (leases, expiry, claims, SLA, idempotency keys, broadcasts, due sends)
    and the daily purges, over decided history and a few pending drafts."""
    mailbox = mailbox_row(tenant_a)
    admin = member_of(tenant_a, "admin").user
    earlier_sends(intent_row, mailbox, admin)
    for _ in range(3):
        make_draft(mailbox)
    analyze()

    def jobs():
        sweep_once()
        draft_bodies_purge()
        events_purge_payloads()

    assert scanning(captured(jobs)) == []


@pytest.mark.django_db(transaction=True)
def test_the_webhook_backfill_uses_an_index_for_every_growing_table(
    live, client, intent_row, hook_for, settings
):
    """The backfill's search for accepted sends with no delivery yet (and no event waiting),
    over delivered history, a send still waiting for its webhook and a stored event not yet
    applied."""
    settings.WEBHOOK_BACKFILL_AFTER_SECONDS = 0
    settings.WEBHOOK_BACKFILL_CALLS_PER_SECOND = 0
    hook = hook_for(live.tenant)
    earlier_sends(intent_row, live.mailbox, live.approver)
    RecipientDelivery.objects.bulk_create(
        RecipientDelivery(
            tenant=live.tenant, intent=intent, address=intent.recipients["to"][0], state="delivered"
        )
        for intent in SendIntent.objects.filter(tenant=live.tenant)
    )
    intent_row(live.mailbox, thread_id="thr_waiting")  # the sandbox does not know its message
    stored = intent_row(live.mailbox, thread_id="thr_stored")
    hook.post(client, delivery_payload("delivered", stored), apply=False)
    analyze()
    reports = []

    statements = captured(lambda: reports.append(webhooks_backfill(tenant_id=live.tenant.pk)))

    # One message lookup (the waiting send: the history is delivered, one event is stored) and
    # one page of the inbox's list.
    assert (reports[0].mailboxes, reports[0].calls) == (1, 2)
    assert scanning(statements) == []


@pytest.mark.django_db(transaction=True)
def test_a_broadcast_uses_an_index_for_every_growing_table(live, intent_row):
    """Fan-out, its sends and its completion, beside an earlier broadcast's recipients and the
    mailbox's earlier sends."""
    earlier_sends(intent_row, live.mailbox, live.approver)

    def broadcast(n: int, start: int = 0):
        return broadcast_create(
            tenant=live.tenant,
            mailbox=live.mailbox,
            subject="Order {{ order }} is delayed",
            text="Hello {{ name }}",
            recipients=[
                {"address": f"c{i}@example.com", "variables": {"name": f"N{i}", "order": i}}
                for i in range(start, start + n)
            ],
        )

    broadcast(HISTORY, start=1000)  # earlier, still in review
    new = broadcast(4)
    broadcast_approve(
        tenant=live.tenant, broadcast_id=new.pk, content_hash=new.content_hash, actor=live.approver
    )
    analyze()

    def fan_out_and_send():
        broadcast_run(new.pk)
        drain_sends()  # a broadcast's sends are paced by its own bucket
        broadcast_run(new.pk)

    statements = captured(fan_out_and_send)

    assert Broadcast.objects.get(pk=new.pk).state == "completed"
    assert scanning(statements) == []


def test_the_admin_console_uses_an_index_for_every_growing_table(
    client, tenant_a, hook_for, mailbox_row, intent_row, member_of, signed_in
):
    """The console's pages and exports, over sends whose delivery events were applied (so the
    journal, the ledger and the recipients' delivery rows have history too)."""
    hook = hook_for(tenant_a)
    mailbox = mailbox_row(tenant_a)
    admin = member_of(tenant_a, "admin").user
    for i in range(HISTORY):
        sent = intent_row(mailbox, thread_id=f"thr_old_{i}", approver=admin)
        hook.post(client, delivery_payload("delivered", sent), apply=False)
    apply_stored()
    analyze()
    console = signed_in(admin)

    def admin_pages():
        for name, args in (
            ("admin_home", []),
            ("admin_members", []),
            ("admin_recipients", []),
            ("admin_suppressions", []),
            ("admin_webhooks", []),
            ("admin_audit", []),
            ("admin_audit_csv", []),
            ("admin_analytics", []),
            ("admin_analytics_csv", []),
            ("token_list", []),
            ("agent_events", []),
            ("mailbox_list", []),
            ("mailbox_detail", [mailbox.pk]),
        ):
            page = console.get(reverse(name, args=[tenant_a.slug, *args]))
            assert page.status_code == 200, name
            if page.streaming:  # the CSV exports query as they stream
                b"".join(page.streaming_content)

    assert scanning(captured(admin_pages)) == []
