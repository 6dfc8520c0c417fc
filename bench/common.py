"""Shared helpers: databases, Django bootstrap, table resets, tenant fixtures, statistics."""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"

CTX_FORK = multiprocessing.get_context("fork")

PRODUCT = "bench.settings"
PEERS = "bench.settings_peers"


# --- databases -----------------------------------------------------------------------------------


def admin_conninfo() -> dict:
    """Connection parameters of the PostgreSQL server the product uses (embedded or DATABASE_URL)."""
    import dj_database_url

    url = os.environ.get("DATABASE_URL")
    if not url:
        from config.dbserver import database_url

        url = database_url()
    parsed = dj_database_url.parse(url)
    return {
        # The embedded server's socket folder arrives as ?host=... (OPTIONS), not HOST.
        "host": parsed.get("HOST") or parsed.get("OPTIONS", {}).get("host") or None,
        "port": parsed.get("PORT") or None,
        "user": parsed.get("USER") or None,
        "password": parsed.get("PASSWORD") or None,
        "dbname": "postgres",
    }


def postgres_cpu() -> float | None:
    """CPU seconds used so far by the embedded PostgreSQL server: the postmaster, its live
    children (backends, WAL writer, checkpointer...) and its exited children. None when the
    server is not the local embedded one (DATABASE_URL elsewhere).

    A backend that exits while ``/proc`` is being read moves its CPU from its own entry to the
    postmaster's reaped-children total; read once, it could be missed (a row whose peer's
    connections were closing as it ended came out negative). So the postmaster is read before
    and after its children, and the scan repeats until no child was reaped in between."""
    if os.environ.get("DATABASE_URL"):
        return None
    from config.dbserver import PGDATA

    try:
        postmaster = int((PGDATA / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    ticks = None
    for _ in range(20):
        before, children, after = (
            _stat_fields(postmaster),
            _children_ticks(postmaster),
            _stat_fields(postmaster),
        )
        if before is None or after is None:
            return None
        ticks = children + sum(int(f) for f in after[11:15])  # utime, stime, cutime, cstime
        if before[13:15] == after[13:15]:  # cutime, cstime: no child reaped during the scan
            break
    return None if ticks is None else ticks / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3 onwards)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _children_ticks(parent: int) -> int:
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == parent:
            continue
        fields = _stat_fields(int(entry))
        if fields is not None and int(fields[1]) == parent:
            total += int(fields[11]) + int(fields[12])
    return total


def ensure_databases(*names: str) -> None:
    import psycopg
    from psycopg import sql

    info = {k: v for k, v in admin_conninfo().items() if v}
    with psycopg.connect(**info, autocommit=True) as conn:
        for name in names:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_databases(*names: str) -> None:
    import psycopg
    from psycopg import sql

    info = {k: v for k, v in admin_conninfo().items() if v}
    with psycopg.connect(**info, autocommit=True) as conn:
        for name in names:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def clone_database(source: str, target: str) -> bool:
    """CREATE DATABASE target TEMPLATE source, unless target exists; True if it was created.
    The source must have no other connection (right after its migrate)."""
    import psycopg
    from psycopg import sql

    info = {k: v for k, v in admin_conninfo().items() if v}
    with psycopg.connect(**info, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [target]).fetchone():
            return False
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(target), sql.Identifier(source)
            )
        )
        return True


def bootstrap(settings_module: str) -> None:
    """Configure Django in this process (call before importing models)."""
    os.environ["DJANGO_SETTINGS_MODULE"] = settings_module
    os.environ.setdefault("COUNTERSIGN_ENV", "development")
    import django

    django.setup()


def reset_tables() -> None:
    """Empty every application table (keeps the schema and migrations)."""
    from django.db import connection

    keep = {"django_migrations", "django_content_type", "auth_permission"}
    tables = [
        t for t in connection.introspection.django_table_names(only_existing=True) if t not in keep
    ]
    if tables:
        with connection.cursor() as cursor:
            cursor.execute(
                "TRUNCATE "
                + ", ".join(connection.ops.quote_name(t) for t in tables)
                + " RESTART IDENTITY CASCADE"
            )


def vacuum_analyze(*tables: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {connection.ops.quote_name(table)}")


# --- fixtures ------------------------------------------------------------------------------------


def make_tenant(slug: str = "bench"):
    """A tenant with one approver (also admin) who may approve every mailbox."""
    from tenants.models import Membership, Tenant, User

    # No undo window: the benchmarks measure sending, and a held intent is not due for 10 s.
    tenant = Tenant.objects.create(name=f"Bench {slug}", slug=slug, send_hold_seconds=0)
    user = User.objects.create_user(email=f"approver@{slug}.bench.test", password=uuid.uuid4().hex)
    Membership.objects.create(
        user=user, tenant=tenant, role=Membership.Role.ADMIN, approve_all_mailboxes=True
    )
    return tenant, user


def provision_mailboxes(tenant, count: int, sandbox) -> list:
    """Real provisioning against the sandbox; the pod webhook is then removed so that a dispatch
    run measures sending only (webhook ingestion has its own row)."""
    from mailboxes import provisioning

    boxes = [
        provisioning.mailbox_create(tenant=tenant, username=f"bench{i}-{uuid.uuid4().hex[:6]}")
        for i in range(count)
    ]
    drop_sandbox_webhooks(sandbox)
    return boxes


def drop_sandbox_webhooks(sandbox) -> None:
    client = sandbox.sdk()
    for pod in client.pods.list().pods:
        for hook in client.pods.webhooks.list(pod.pod_id).webhooks:
            client.pods.webhooks.delete(pod.pod_id, hook.webhook_id)


def create_drafts(tenant, user, mailboxes, n: int, *, tag: str = "d") -> list[tuple]:
    """n pending drafts through the real service; returns (draft id, version, content hash)."""
    from intents import services

    made = []
    for i in range(n):
        draft = services.draft_create(
            tenant=tenant,
            mailbox=mailboxes[i % len(mailboxes)],
            to=[f"customer{i}@example.com"],
            subject=f"Re: order {tag}-{i}",
            text="Thanks for writing. Your order shipped yesterday; tracking number 1Z999.",
            actor_user=user,
        )
        version = draft.versions.get(number=draft.current_version)
        made.append((draft.pk, version.number, version.content_hash))
    return made


def approve(tenant, user, item: tuple) -> int:
    """Approve one draft exactly as a person would (the version and hash the page showed)."""
    from intents import services

    draft_id, version, digest = item
    intent = services.draft_approve(
        tenant=tenant, draft_id=draft_id, version=version, content_hash=digest, actor=user
    )
    return intent.pk


def approved_intents(tenant, user, mailboxes, n: int, *, tag: str = "d") -> list[int]:
    """n drafts created and approved through the real services; returns the intent ids."""
    return [
        approve(tenant, user, item) for item in create_drafts(tenant, user, mailboxes, n, tag=tag)
    ]


# --- statistics ----------------------------------------------------------------------------------


def percentile(values, q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return ordered[rank]


def latency_summary(seconds: list[float]) -> dict:
    ms = [s * 1000 for s in seconds]
    return {
        "p50_ms": _r(percentile(ms, 50)),
        "p95_ms": _r(percentile(ms, 95)),
        "p99_ms": _r(percentile(ms, 99)),
        "max_ms": _r(max(ms) if ms else None),
    }


def _r(value):
    return None if value is None else round(value, 1)


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
