"""Review UI: server time and query count of the queue page (and its views: Mine, Unassigned,
Escalated, sorted by time left) and a draft page as the number of pending drafts grows
(100 → 10,000 → 100,000), measured in-process with the test client.

Assignment and deadlines are on: every third draft is held by the signed-in reviewer and one in
eleven by a colleague, each has a due time spread over the next ten hours (a few already past),
and one in fifty is escalated.

Rows are bulk-inserted (drafts and their first version, with real content hashes); the pages are
rendered through the full middleware stack, signed in as an approver. At the largest size every
query of each page is explained (EXPLAIN (ANALYZE, BUFFERS)); the JSON keeps the plans, ordered by
execution time, and the report lists any sequential scan. (Django records query times rounded to
the millisecond, too coarse to pick the slowest query of a page by them.)
"""

from __future__ import annotations

import re
import statistics
import time
from datetime import timedelta

from bench.common import make_tenant, percentile, reset_tables, vacuum_analyze

REPEATS = 15
CHUNK = 5000


def _ownership(i: int, now, holders) -> dict:
    """Holder, deadline and escalation of the i-th bench draft (see the module docstring)."""
    me, colleague = holders
    holder = me if i % 3 == 0 else colleague if i % 11 == 0 else None
    due = now + timedelta(minutes=(i * 7) % 600 - 30)
    return {
        "assignee": holder,
        "assigned_how": "handed" if holder else "",
        "sla_due_at": due,
        "sla_warn_at": due - timedelta(minutes=30),
        "escalated_at": now if i % 50 == 0 else None,
    }


def _insert(tenant, mailboxes, start: int, stop: int, holders) -> None:
    from django.utils import timezone

    from intents.hashing import content_hash
    from intents.journal import Entry, journal_many
    from intents.models import Draft, DraftVersion, IntentEvent

    now = timezone.now()
    deadline = now + timedelta(days=7)
    for low in range(start, stop, CHUNK):
        high = min(stop, low + CHUNK)
        drafts = Draft.objects.bulk_create(
            [
                Draft(
                    tenant=tenant,
                    mailbox=mailboxes[i % len(mailboxes)],
                    # A reply, as most drafts are (a new message names no thread).
                    thread_id=f"thr_{i}",
                    in_reply_to=f"<msg_{i}@example.com>",
                    provenance={"model": "bench"},
                    review_deadline=deadline,
                    **_ownership(i, now, holders),
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
                        in_reply_to=draft.in_reply_to,
                    ),
                )
            )
        DraftVersion.objects.bulk_create(versions)
        # The journal grows with the queue (every draft has at least its creation event), so
        # pages that read it are measured against a realistic table.
        journal_many(
            [
                Entry(
                    tenant_id=tenant.pk,
                    draft_id=draft.pk,
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
    return {
        "median_ms": round(statistics.median(times) * 1000, 1),
        "p95_ms": round(percentile(times, 95) * 1000, 1),
        "queries": len(ctx.captured_queries),
        "bytes": len(response.content),
        "sql": [q["sql"] for q in ctx.captured_queries],
    }


_EXECUTION = re.compile(r"Execution Time: ([0-9.]+) ms")
_SEQ_SCAN = re.compile(r"Seq Scan on (\w+).*?\(actual time=[0-9.]+\.\.[0-9.]+ rows=([0-9.]+)")


def _explain_all(statements: list[str]) -> list[dict]:
    """Every read of a page explained with ANALYZE (writes, such as the session's, are not
    re-run), slowest first, with the tables read by a sequential scan and the rows it returned."""
    from django.db import connection

    plans = []
    with connection.cursor() as cursor:
        for sql in statements:
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            found = _EXECUTION.search(plan)
            plans.append(
                {
                    "sql": sql,
                    "execution_ms": float(found.group(1)) if found else None,
                    "seq_scans": [
                        {"table": table, "rows": int(float(rows))}
                        for table, rows in _SEQ_SCAN.findall(plan)
                    ],
                    "plan": plan,
                }
            )
    return sorted(plans, key=lambda p: -(p["execution_ms"] or 0))


def _pages(tenant, draft) -> tuple[tuple[str, str], ...]:
    """The measured pages: the tenant's queue, its views, and one draft's review page."""
    queue = f"/t/{tenant.slug}/"
    return (
        ("queue", queue),
        ("queue mine", f"{queue}?view=mine"),
        ("queue unassigned", f"{queue}?view=unassigned"),
        ("queue escalated", f"{queue}?view=escalated"),
        ("queue by time left", f"{queue}?sort=due"),
        ("draft", f"/t/{tenant.slug}/drafts/{draft.pk}/"),
    )


def run(params: dict) -> dict:
    from django.db.models.functions import Now
    from django.test import Client

    from intents.models import Draft
    from tests.factories import make_local_mailbox

    sizes = sorted(params["sizes"])
    reset_tables()
    tenant, user = make_tenant("ui")
    holders = (user, _colleague(tenant))
    mailboxes = [make_local_mailbox(tenant, f"support{i}") for i in range(3)]
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    rows, plans, have = [], {}, 0
    for size in sizes:
        started = time.perf_counter()
        _insert(tenant, mailboxes, have, size, holders)
        have = size
        vacuum_analyze("intents_draft", "intents_draftversion", "intents_intentevent")
        insert_s = time.perf_counter() - started
        middle = Draft.objects.filter(tenant=tenant).order_by("id")[size // 2]
        for page, url in _pages(tenant, middle):
            measured = _measure(client, url)
            statements = measured.pop("sql")
            if size == sizes[-1]:
                plans[page] = _explain_all(statements)
            rows.append({"page": page, "pending": size, "insert_s": round(insert_s, 1), **measured})
    # The usual shape of a real queue: a few drafts pending among many decided ones. All but the
    # newest 100 are marked rejected (one UPDATE); the queue then reads its page through the
    # draft_queue index instead of scanning.
    decided_pending = min(100, have)
    keep = Draft.objects.filter(tenant=tenant).order_by("-id")[decided_pending - 1].pk
    Draft.objects.filter(tenant=tenant, pk__lt=keep).update(
        status=Draft.Status.REJECTED,
        decided_by=user,
        decided_at=Now(),
        reject_reason="bench",
        assignee=None,
        assigned_how="",
    )
    vacuum_analyze("intents_draft")
    middle = Draft.objects.filter(tenant=tenant, pk__gte=keep).order_by("id")[decided_pending // 2]
    for page, url in _pages(tenant, middle):
        measured = _measure(client, url)
        plans[f"{page}, {decided_pending} pending of {have:,}"] = _explain_all(measured.pop("sql"))
        rows.append({"page": page, "pending": decided_pending, "of": have, **measured})
    counts = {
        size: [r["queries"] for r in rows if r["pending"] == size and "of" not in r]
        for size in sizes
    }
    by_page: dict[str, set[int]] = {}
    for r in rows:
        if r["page"].startswith("queue") and "of" not in r:
            by_page.setdefault(r["page"], set()).add(r["queries"])
    return {
        "rows": rows,
        "plans": plans,
        "queries_by_size": counts,
        "queue_queries_constant": all(len(n) == 1 for n in by_page.values()),
        "queue_queries_by_view": {page: sorted(n) for page, n in by_page.items()},
    }


def _colleague(tenant):
    from tenants.models import Membership, User

    colleague = User.objects.create_user(
        email=f"colleague@{tenant.slug}.bench.test", full_name="Bench Colleague"
    )
    Membership.objects.create(user=colleague, tenant=tenant, role=Membership.Role.APPROVER)
    return colleague
