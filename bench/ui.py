"""Review UI: server time and query count of the queue page and a draft page as the number of
pending drafts grows (100 → 10,000 → 100,000), measured in-process with the test client.

Rows are bulk-inserted (drafts and their first version, with real content hashes); the pages are
rendered through the full middleware stack, signed in as an approver. The slowest query of each
page at the largest size is kept with its EXPLAIN (ANALYZE, BUFFERS) plan for the report.
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

from bench.common import local_mailbox, make_tenant, percentile, reset_tables, vacuum_analyze

REPEATS = 15
CHUNK = 5000


def _insert(tenant, mailboxes, start: int, stop: int) -> None:
    from django.utils import timezone

    from intents.hashing import content_hash
    from intents.models import Draft, DraftVersion, IntentEvent

    deadline = timezone.now() + timedelta(days=7)
    for low in range(start, stop, CHUNK):
        high = min(stop, low + CHUNK)
        drafts = Draft.objects.bulk_create(
            [
                Draft(
                    tenant=tenant,
                    mailbox=mailboxes[i % len(mailboxes)],
                    thread_id=f"thr_{i}",
                    provenance={"model": "bench"},
                    review_deadline=deadline,
                )
                for i in range(low, high)
            ]
        )
        versions = []
        for i, draft in zip(range(low, high), drafts, strict=True):
            to = [f"customer{i}@example.com"]
            subject, text = f"Re: order {i}", f"Hello, your order {i} shipped yesterday."
            versions.append(
                DraftVersion(
                    draft=draft,
                    tenant=tenant,
                    number=1,
                    to=to,
                    subject=subject,
                    text=text,
                    author_kind=DraftVersion.Author.AGENT,
                    content_hash=content_hash(
                        mailbox_id=draft.mailbox_id,
                        to=to,
                        cc=[],
                        bcc=[],
                        subject=subject,
                        text=text,
                        html="",
                        in_reply_to="",
                    ),
                )
            )
        DraftVersion.objects.bulk_create(versions)
        # The journal grows with the queue (every draft has at least its creation event), so
        # pages that read it are measured against a realistic table.
        IntentEvent.objects.bulk_create(
            [
                IntentEvent(
                    tenant=tenant,
                    draft=draft,
                    actor_kind=IntentEvent.Actor.AGENT,
                    actor_label="bench",
                    action="draft.created",
                    to_state=Draft.Status.PENDING,
                    data={"version": 1},
                )
                for draft in drafts
            ]
        )


def _measure(client, url: str) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url)  # warm: templates, caches, plans
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - started)
    with CaptureQueriesContext(connection) as ctx:
        client.get(url)
    slowest = max(ctx.captured_queries, key=lambda q: float(q["time"]))
    return {
        "median_ms": round(statistics.median(times) * 1000, 1),
        "p95_ms": round(percentile(times, 95) * 1000, 1),
        "queries": len(ctx.captured_queries),
        "bytes": len(response.content),
        "slowest_sql": slowest["sql"],
        "slowest_ms": round(float(slowest["time"]) * 1000, 2),
    }


def _explain(sql: str) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def run(params: dict) -> dict:
    from django.test import Client

    from intents.models import Draft

    sizes = sorted(params["sizes"])
    reset_tables()
    tenant, user = make_tenant("ui")
    mailboxes = [local_mailbox(tenant, f"support{i}", "ui.bench.test") for i in range(3)]
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    rows, plans, have = [], {}, 0
    for size in sizes:
        started = time.perf_counter()
        _insert(tenant, mailboxes, have, size)
        have = size
        vacuum_analyze("intents_draft", "intents_draftversion", "intents_intentevent")
        insert_s = time.perf_counter() - started
        middle = Draft.objects.filter(tenant=tenant).order_by("id")[size // 2]
        for page, url in (
            ("queue", f"/t/{tenant.slug}/"),
            ("draft", f"/t/{tenant.slug}/drafts/{middle.pk}/"),
        ):
            measured = _measure(client, url)
            if size == sizes[-1]:
                plans[page] = {
                    "sql": measured["slowest_sql"],
                    "plan": _explain(measured["slowest_sql"]),
                }
            rows.append(
                {
                    "page": page,
                    "pending": size,
                    "insert_s": round(insert_s, 1),
                    **{k: v for k, v in measured.items() if k != "slowest_sql"},
                }
            )
    counts = {size: [r["queries"] for r in rows if r["pending"] == size] for size in sizes}
    queue_counts = [r["queries"] for r in rows if r["page"] == "queue"]
    return {
        "rows": rows,
        "plans": plans,
        "queries_by_size": counts,
        "queue_queries_constant": len(set(queue_counts)) == 1,
    }
